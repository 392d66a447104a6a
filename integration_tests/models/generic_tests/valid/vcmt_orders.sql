select
    tenant_id,
    order_id,
    _version,
    sign,
    status,
    amount
from {{ ref('orders_rows') }}
