{{ config(
    projections=[
        {'name': 'by_status', 'query': 'select status, sum(sign), sum(amount * sign) group by status'},
        {'name': 'by_tenant', 'query': 'select tenant_id, sum(sign) as orders, sum(amount * sign) as total group by tenant_id'},
    ],
    settings={'deduplicate_merge_projection_mode': 'ignore'},
    post_hook=[
        "{{ write_status_change(this) }}",
        "optimize table {{ this }} final",
    ],
) }}

select
    tenant_id,
    order_id,
    _version,
    sign,
    status,
    amount
from {{ ref('orders_rows') }}
