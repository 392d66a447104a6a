select
    tenant_id,
    order_id,
    _version,
    sign,
    status,
    amount
from {{ ref('orders_rows') }}
union all
select
    tenant_id,
    order_id,
    _version,
    sign,
    status,
    amount
from {{ ref('orders_corruptions') }}
where fixture = 'drifted'
