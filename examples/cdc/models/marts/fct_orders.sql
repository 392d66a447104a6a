{#- Staged by the Python model stg_pg__orders (var vcmt_staging = 'python', the default: real
    Debezium encodings, truncates applied, TOASTed values kept) or by the SQL model
    stg_cdc__order_changes (vcmt_staging = 'sql': the simple encoding, no truncates, every value sent).
    docs/staging.md -#}
{%- set python_staging = var('vcmt_staging', 'python') == 'python' -%}
{{ config(
    materialized='vcmt_upsert',
    unique_key=['tenant_id', 'order_id'],
    watermark='_batch_id',
    partition_by='toYYYYMM(created_at)',
    truncate_when="_kind = 'truncate'",
    unavailable_column='_unavailable',
    projections=[{
        'name': 'by_tenant_status',
        'query': 'select tenant_id, status, sum(sign), sum(amount * sign) group by tenant_id, status',
    }],
) }}

{#- Staging quarantines events without key or version, so they are not NULL
    here (Parquet columns are nullable; a truncate's key is ignored). Amounts
    become Decimal(18, 2) through their text form, so sums are exact. -#}
select
    toInt32(assumeNotNull(tenant_id)) as tenant_id,
    toInt64(assumeNotNull(order_id)) as order_id,
    toInt64(customer_id) as customer_id,
    coalesce(status, '') as status,
    toDecimal64(toString(amount), 2) as amount,
    note,
    toDateTime64(assumeNotNull(created_at), {{ 6 if python_staging else 3 }}, 'UTC') as created_at,
    toUInt64(assumeNotNull(_version)) as _version,
    toInt8(assumeNotNull(sign)) as sign,
    {{ "_kind" if python_staging else "'change'" }} as _kind,
    {{ "_unavailable" if python_staging else "cast([], 'Array(String)')" }} as _unavailable,
    toInt64(_batch_id) as _batch_id
from {{ vcmt.lake_source('stg_pg__orders' if python_staging else 'stg_cdc__order_changes') }}
where
    {{ "_kind in ('change', 'truncate')" if python_staging else "true" }}
    {% if vcmt.is_incremental() %}
        and _batch_id > {{ vcmt.watermark(default=-1) }}
    {% endif %}
