{#- Customer updates may be partial (simple encoding): a NULL means "not
    changed", so coalesce keeps the stored value; lifetime value only grows.
    Staged by stg_mysql__customers (var vcmt_staging = 'python', the default:
    Decimal lifetime value, birth_date) or stg_cdc__customer_changes
    (vcmt_staging = 'sql': Float64 lifetime value, no birth_date).
    docs/staging.md -#}
{%- set python_staging = var('vcmt_staging', 'python') == 'python' -%}
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
    {{ "toDecimal64(toString(lifetime_value), 2)" if python_staging else "lifetime_value" }} as lifetime_value,
    {{ "birth_date" if python_staging else "cast(null, 'Nullable(Date32)')" }} as birth_date,
    toUInt64(assumeNotNull(_version)) as _version,
    toInt8(assumeNotNull(sign)) as sign,
    toInt64(_batch_id) as _batch_id
from {{ vcmt.lake_source('stg_mysql__customers' if python_staging else 'stg_cdc__customer_changes') }}
where
    {{ "_kind = 'change'" if python_staging else "true" }}
    {% if vcmt.is_incremental() %}
        and _batch_id > {{ vcmt.watermark(default=-1) }}
    {% endif %}
