{#-
    Spark resolves a relative table location against its warehouse, not the working directory:
    anchor a relative lake root at the directory dbt runs from, as the Spark session does for reads.
-#}
{%- set lake_root = var('vcmt_lake_root') %}
{%- if not (lake_root.startswith('/') or '://' in lake_root) %}
    {%- set lake_root = env_var('PWD', '.') ~ '/' ~ lake_root %}
{%- endif %}

{#-
    Hooks, in order: write timestamps as Parquet TIMESTAMP_MICROS (ClickHouse DateTime64(6)) instead of
    Spark's legacy INT96; let a first build or --full-refresh write into a folder that already holds
    staged files; and make that build replace the folder (static) while incremental runs only replace
    the batches they write (dynamic).
-#}
{{ config(
    materialized='incremental',
    incremental_strategy='insert_overwrite',
    file_format='parquet',
    partition_by=['_batch_id'],
    location_root=lake_root ~ '/staged',
    pre_hook=[
        "set spark.sql.parquet.outputTimestampType = TIMESTAMP_MICROS",
        "set spark.sql.legacy.allowNonEmptyLocationInCTAS = true",
        "set spark.sql.sources.partitionOverwriteMode = {{ 'DYNAMIC' if is_incremental() else 'STATIC' }}",
    ],
) }}

{#-
    Batches already staged are skipped unless listed in var `vcmt_restage_batches`; a restaged batch
    replaces its partition, so no run ever stages a line twice.
-#}
{%- set new_batches = 'true' %}
{%- if execute and is_incremental() %}
    {%- set restage = var('vcmt_restage_batches', []) | map('int') | list %}
    {%- set skipped = [] %}
    {#- Partitions come from the metastore (`_batch_id=<N>`): no Spark job, unlike a select distinct. -#}
    {%- for row in run_query('show partitions ' ~ this) %}
        {%- set batch = row[0].split('=')[1] | int %}
        {%- if batch not in restage %}{% do skipped.append(batch) %}{% endif %}
    {%- endfor %}
    {%- if skipped %}
        {%- set new_batches = '_batch_id not in (' ~ (skipped | sort | join(', ')) ~ ')' %}
    {%- endif %}
{%- endif %}

select
    customer_id,
    name,
    email,
    tier,
    lifetime_value,
    _version,
    cast(case when op = 'd' then -1 else 1 end as tinyint) as sign,
    op as _op,
    source_ts as _source_ts,
    _batch_id
from {{ ref('stg_cdc__customers_typed') }}
where
    reason is null
    and {{ new_batches }}
