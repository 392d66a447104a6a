{#- Every line of one topic, from the envelopes, with the image typed and, for
    a line that cannot be staged, the reason why (NULL when the line is
    valid). The topics differ only in their columns and key; typing and the
    quarantine rules must not, so both typed models render them here.

    `key`: the key columns; a line missing one is `null_key`. `columns`: name
    to type, in output order, read from the image (`before` of a delete,
    `after` otherwise). A type is a Spark type for `try_variant_get`, or
    `timestamp_millis` for epoch milliseconds, staged as TIMESTAMP.

    Output: topic, raw_payload, source_file, _batch_id, op, the columns,
    _version (`source.lsn`), source_ts, reason. Reasons are checked in order
    and the first that applies wins: bad_json, unknown_op, null_key,
    null_version, wrong_type (var `cdc_reasons`, the staging contract).

      {{ cdc_typed_lines(ref('stg_cdc__envelopes'), topic='customers', key=['customer_id'],
                              columns={'customer_id': 'bigint', 'name': 'string'}) }}
-#}
{% macro cdc_typed_lines(envelopes, topic, key, columns) %}
  {%- for column in key if column not in columns -%}
    {{ exceptions.raise_compiler_error(
      "cdc_typed_lines: every column of argument `key` must be in `columns` " ~ (columns | list)
      ~ "; got `" ~ column ~ "`.") }}
  {%- endfor -%}
  {%- set millis_range = 'between -62135596800000 and 253402300799999' -%}
with lines as (
    select *
    from {{ envelopes }}
    where topic = '{{ topic }}'
),

fields as (
    select
        *,
        {%- for name, type in columns.items() %}
            try_variant_get(image, '$.{{ name }}', 'string') as {{ name }}__text,
            try_variant_get(image, '$.{{ name }}', '{{ 'bigint' if type == 'timestamp_millis' else type }}') as {{ name }}__value
            {%- if not loop.last %},{% endif %}
        {%- endfor %}
    from lines
)

select
    topic,
    raw_payload,
    source_file,
    _batch_id,
    op,
    {%- for name, type in columns.items() %}
        {%- if type == 'timestamp_millis' %}
        -- Epoch milliseconds in the event. Range-checked: timestamp_millis() raises on overflow,
        -- and one bad line must not fail the run.
        case
            when {{ name }}__value {{ millis_range }}
                then timestamp_millis({{ name }}__value)
        end as {{ name }},
        {%- else %}
        {{ name }}__value as {{ name }},
        {%- endif %}
    {%- endfor %}
    lsn as _version,
    source_ts,
    -- Checked in this order; the first rule broken names the reason (var `cdc_reasons`).
    case
        when is_bad_json then {{ cdc_reason('bad_json') }}
        when op is null or op not in ('c', 'u', 'd', 'r') then {{ cdc_reason('unknown_op') }}
        when {% for column in key %}{{ column }}__text is null{% if not loop.last %} or {% endif %}{% endfor %} then {{ cdc_reason('null_key') }}
        when lsn_text is null then {{ cdc_reason('null_version') }}
        when
            lsn is null
            or (source_ts_text is not null and source_ts is null)
            {%- for name, type in columns.items() if type != 'string' %}
                or ({{ name }}__text is not null and {{ name }}__value is null)
            {%- endfor %}
            {%- for name, type in columns.items() if type == 'timestamp_millis' %}
                or {{ name }}__value not {{ millis_range }}
            {%- endfor %}
            then {{ cdc_reason('wrong_type') }}
    end as reason
from fields
{% endmacro %}


{#- The quoted reason code `name`, one of var `cdc_reasons` (the staging contract). -#}
{% macro cdc_reason(name) %}
  {%- if name not in var('cdc_reasons') -%}
    {{ exceptions.raise_compiler_error("cdc_reason: `" ~ name ~ "` is not a reason of var `cdc_reasons` " ~ var('cdc_reasons') ~ ".") }}
  {%- endif -%}
  {{ return("'" ~ name ~ "'") }}
{% endmacro %}
