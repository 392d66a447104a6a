{#- The same totals kept online by a materialized view on it_fct_orders (README, "Downstream models"). -#}
{{ config(materialized='vcmt_aggregate') }}

select
    status,
    sum(sign) as orders,
    sum(amount * sign) as amount
from {{ ref('it_fct_orders') }}
group by status
