{{ config(
    materialized='vcmt_upsert',
    unique_key=['tenant_id', 'order_id'],
    partition_by='toYYYYMM(created_at)',
    settings={'index_granularity': 1024},
    projections=[{'name': 'by_status', 'query': 'select status, sum(sign), sum(amount * sign) group by status'}],
    changes=true,
) }}

select
    tenant_id,
    order_id,
    status,
    amount,
    created_at,
    _version,
    sign
from {{ ref('it_order_events') }}
