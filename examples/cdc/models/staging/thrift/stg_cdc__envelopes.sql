{{ config(materialized='ephemeral') }}

{#-
    Every raw line of every topic, with the Debezium envelope opened but not yet typed.
    Lines are read as text so a line that is not JSON still reaches the quarantine, payload intact.
    Spark 4 VARIANT parses each line once; `try_*` functions turn bad input into NULL instead of failing.
-#}

{%- set topics = ['orders', 'customers'] %}

with raw_lines as (
    {%- for topic in topics %}
        select
            '{{ topic }}' as topic,
            value as raw_payload,
            _metadata.file_name as source_file,
            -- 64-bit, never wrapped: a folder that is not a 64-bit integer fails the run (docs/staging.md).
            coalesce(
                try_cast(_batch_id as bigint),
                raise_error(concat(
                    'a landed batch folder must be named _batch_id=<N>, N a whole number that fits 64 bits; '
                    'rename the folder holding ', _metadata.file_path
                ))
            ) as _batch_id
        from text.`{{ cdc_lake_root() }}/raw/{{ topic }}`
        {%- if not loop.last %}
            union all
        {%- endif %}
    {%- endfor %}
),

documents as (
    select
        topic,
        raw_payload,
        source_file,
        _batch_id,
        try_parse_json(raw_payload) as document
    from raw_lines
),

envelopes as (
    select
        topic,
        raw_payload,
        source_file,
        _batch_id,
        document is null as is_bad_json,
        -- Kafka Connect's JsonConverter with schemas enabled nests the envelope under `payload`.
        coalesce(try_variant_get(document, '$.payload', 'variant'), document) as envelope
    from documents
)

select
    topic,
    raw_payload,
    source_file,
    _batch_id,
    is_bad_json,
    try_variant_get(envelope, '$.op', 'string') as op,
    -- A delete carries its key in `before`; every other operation in `after`.
    case
        when try_variant_get(envelope, '$.op', 'string') = 'd'
            then try_variant_get(envelope, '$.before', 'variant')
        else try_variant_get(envelope, '$.after', 'variant')
    end as image,
    try_variant_get(envelope, '$.source.lsn', 'string') as lsn_text,
    try_variant_get(envelope, '$.source.lsn', 'bigint') as lsn,
    try_variant_get(envelope, '$.source.ts_ms', 'string') as source_ts_text,
    -- Range-checked: timestamp_millis() raises on overflow, and one bad line must not fail the run.
    case
        when
            try_variant_get(envelope, '$.source.ts_ms', 'bigint')
            between -62135596800000 and 253402300799999
            then timestamp_millis(try_variant_get(envelope, '$.source.ts_ms', 'bigint'))
    end as source_ts
from envelopes
