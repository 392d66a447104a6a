{#- Customer updates are partial: a NULL means "not changed", so coalesce keeps
    the stored value; lifetime value only grows. -#}
{{ config(
    materialized='vcmt_upsert',
    unique_key='customer_id',
    watermark='_batch_id',
    merge={'name': 'coalesce', 'email': 'coalesce', 'tier': 'coalesce', 'lifetime_value': 'greatest'},
) }}

select
    toInt64(assumeNotNull(customer_id)) as customer_id,
    name,
    email,
    tier,
    lifetime_value,
    toUInt64(assumeNotNull(_version)) as _version,
    toInt8(assumeNotNull(sign)) as sign,
    toUInt32(_batch_id) as _batch_id
from {{ vcmt.lake_source('stg_customers_changes') }}
{% if vcmt.is_incremental() %}
    where _batch_id > {{ vcmt.watermark(default=-1) }}
{% endif %}
