{{ config(materialized='ephemeral') }}

{#-
    Orders lines with typed columns, and for a line that cannot be staged the reason why
    (NULL when the line is valid). Types are the ClickHouse mart's: Int32 and Int64 keys,
    Float64 amount, and created_at, sent as epoch milliseconds, as a timestamp.
    stg_cdc__customers_typed has the same shape: keep the two in step.
-#}

{%- set columns = [
    ('tenant_id', 'int'),
    ('order_id', 'bigint'),
    ('customer_id', 'bigint'),
    ('status', 'string'),
    ('amount', 'double'),
    ('note', 'string'),
    ('created_at', 'bigint'),
] %}

with orders as (
    select *
    from {{ ref('stg_cdc__envelopes') }}
    where topic = 'orders'
),

fields as (
    select
        *,
        {%- for name, type in columns %}
            try_variant_get(image, '$.{{ name }}', 'string') as {{ name }}__text,
            try_variant_get(image, '$.{{ name }}', '{{ type }}') as {{ name }}__value
            {%- if not loop.last %},{% endif %}
        {%- endfor %}
    from orders
)

select
    topic,
    raw_payload,
    source_file,
    _batch_id,
    op,
    {%- for name, type in columns if name != 'created_at' %}
        {{ name }}__value as {{ name }},
    {%- endfor %}
    -- Epoch milliseconds in the event. Range-checked: timestamp_millis() raises on overflow,
    -- and one bad line must not fail the run.
    case
        when created_at__value between -62135596800000 and 253402300799999
            then timestamp_millis(created_at__value)
    end as created_at,
    lsn as _version,
    source_ts,
    -- Checked in this order; the first rule broken names the reason (codes shared with vcmt_tools.cdc).
    case
        when is_bad_json then 'bad_json'
        when op is null or op not in ('c', 'u', 'd', 'r') then 'unknown_op'
        when tenant_id__text is null or order_id__text is null then 'null_key'
        when lsn_text is null then 'null_version'
        when
            lsn is null
            or (source_ts_text is not null and source_ts is null)
            {%- for name, type in columns if type != 'string' %}
                or ({{ name }}__text is not null and {{ name }}__value is null)
            {%- endfor %}
            or created_at__value not between -62135596800000 and 253402300799999
            then 'wrong_type'
    end as reason
from fields
