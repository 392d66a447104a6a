{{ config(
    materialized='vcmt_upsert',
    unique_key=['tenant_id', 'order_id'],
    watermark='_batch_id',
    partition_by='toYYYYMM(created_at)',
    projections=[{
        'name': 'by_tenant_status',
        'query': 'select tenant_id, status, sum(sign), sum(amount * sign) group by tenant_id, status',
    }],
) }}

{#- Staging quarantines events without key or version, so they are not NULL
    here (Parquet columns are nullable). Amounts become Decimal(18, 2) through
    their text form, so sums are exact. -#}
select
    toInt32(assumeNotNull(tenant_id)) as tenant_id,
    toInt64(assumeNotNull(order_id)) as order_id,
    toInt64(customer_id) as customer_id,
    coalesce(status, '') as status,
    toDecimal64(toString(amount), 2) as amount,
    note,
    toDateTime64(assumeNotNull(created_at), 3, 'UTC') as created_at,
    toUInt64(assumeNotNull(_version)) as _version,
    toInt8(assumeNotNull(sign)) as sign,
    toUInt32(_batch_id) as _batch_id
from {{ vcmt.lake_source('stg_orders_changes') }}
{% if vcmt.is_incremental() %}
    where _batch_id > {{ vcmt.watermark(default=-1) }}
{% endif %}
