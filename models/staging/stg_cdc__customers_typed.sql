{{ config(materialized='ephemeral') }}

{#-
    Customers lines with typed columns, and for a line that cannot be staged the reason why
    (NULL when the line is valid). Updates are partial: a column the update did not change is NULL,
    and the mart's merge policies (coalesce, greatest) keep the stored value.
    stg_cdc__orders_typed has the same shape: keep the two in step.
-#}

{%- set columns = [
    ('customer_id', 'bigint'),
    ('name', 'string'),
    ('email', 'string'),
    ('tier', 'string'),
    ('lifetime_value', 'double'),
] %}

with customers as (
    select *
    from {{ ref('stg_cdc__envelopes') }}
    where topic = 'customers'
),

fields as (
    select
        *,
        {%- for name, type in columns %}
            try_variant_get(image, '$.{{ name }}', 'string') as {{ name }}__text,
            try_variant_get(image, '$.{{ name }}', '{{ type }}') as {{ name }}__value
            {%- if not loop.last %},{% endif %}
        {%- endfor %}
    from customers
)

select
    topic,
    raw_payload,
    source_file,
    _batch_id,
    op,
    {%- for name, type in columns %}
        {{ name }}__value as {{ name }},
    {%- endfor %}
    lsn as _version,
    source_ts,
    -- Checked in this order; the first rule broken names the reason (codes shared with vcmt_tools.cdc).
    case
        when is_bad_json then 'bad_json'
        when op is null or op not in ('c', 'u', 'd', 'r') then 'unknown_op'
        when customer_id__text is null then 'null_key'
        when lsn_text is null then 'null_version'
        when
            lsn is null
            or (source_ts_text is not null and source_ts is null)
            {%- for name, type in columns if type != 'string' %}
                or ({{ name }}__text is not null and {{ name }}__value is null)
            {%- endfor %}
            then 'wrong_type'
    end as reason
from fields
