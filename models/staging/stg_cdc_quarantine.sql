{#-
    Spark resolves a relative table location against its warehouse, not the working directory:
    anchor a relative lake root at the directory dbt runs from, as the Spark session does for reads.
-#}
{%- set lake_root = var('vcmt_lake_root') %}
{%- if not (lake_root.startswith('/') or '://' in lake_root) %}
    {%- set lake_root = env_var('PWD', '.') ~ '/' ~ lake_root %}
{%- endif %}

{#- Hooks: see stg_orders_changes. -#}
{{ config(
    materialized='incremental',
    incremental_strategy='insert_overwrite',
    file_format='parquet',
    partition_by=['topic', '_batch_id'],
    location_root=lake_root ~ '/staged',
    pre_hook=[
        "set spark.sql.parquet.outputTimestampType = TIMESTAMP_MICROS",
        "set spark.sql.legacy.allowNonEmptyLocationInCTAS = true",
        "set spark.sql.sources.partitionOverwriteMode = {{ 'DYNAMIC' if is_incremental() else 'STATIC' }}",
    ],
) }}

{#-
    Partitioned by topic as well as batch: topics land independently, and overwriting batch N of one
    topic must not wipe batch N of the other. Skips the (topic, batch) pairs already quarantined unless
    the batch is listed in var `vcmt_restage_batches`. A batch with no malformed line leaves no
    partition, so it is read again on the next run and again yields nothing.
-#}
{%- set new_batches = 'true' %}
{%- if execute and is_incremental() %}
    {%- set restage = var('vcmt_restage_batches', []) | map('int') | list %}
    {%- set skipped = {} %}
    {#- Partitions come from the metastore (`topic=<t>/_batch_id=<N>`): no Spark job. -#}
    {%- for row in run_query('show partitions ' ~ this) %}
        {%- set topic_part, batch_part = row[0].split('/') %}
        {%- set topic, batch = topic_part.split('=')[1], batch_part.split('=')[1] | int %}
        {%- if batch not in restage %}{% do skipped.setdefault(topic, []).append(batch) %}{% endif %}
    {%- endfor %}
    {%- set predicates = [] %}
    {%- for topic, batches in skipped | dictsort %}
        {%- do predicates.append(
            "not (topic = '" ~ topic ~ "' and _batch_id in (" ~ (batches | sort | join(', ')) ~ "))"
        ) %}
    {%- endfor %}
    {%- if predicates %}{% set new_batches = predicates | join(' and ') %}{% endif %}
{%- endif %}

with malformed as (
    {%- for typed in ['stg_cdc__orders_typed', 'stg_cdc__customers_typed'] %}
        select
            reason,
            raw_payload,
            source_file,
            topic,
            _batch_id
        from {{ ref(typed) }}
        where reason is not null
        {%- if not loop.last %}
            union all
        {%- endif %}
    {%- endfor %}
)

select
    reason,
    raw_payload,
    source_file,
    topic,
    _batch_id
from malformed
where {{ new_batches }}
