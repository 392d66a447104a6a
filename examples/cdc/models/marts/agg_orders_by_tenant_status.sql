{#- Downstream aggregate fed by fct_orders on every insert (a ClickHouse
    materialized view into SummingMergeTree). fct_orders only ever receives
    +1/-1 pairs, so these sums stay exact through updates and deletes. -#}
{{ config(
    materialized='materialized_view',
    engine='SummingMergeTree()',
    order_by=['tenant_id', 'status'],
) }}

select
    tenant_id,
    status,
    sum(sign) as orders,
    sum(amount * sign) as amount
from {{ ref('fct_orders') }}
group by tenant_id, status
