{{ config(
    engine='VersionedCollapsingMergeTree(row_sign, ver)',
    version='ver',
    sign='row_sign',
) }}

select
    tenant_id,
    order_id,
    _version as ver,
    sign as row_sign,
    status,
    amount
from {{ ref('orders_rows') }}
