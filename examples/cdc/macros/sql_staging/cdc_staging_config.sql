{#- Config of a staged dataset: Parquet under `<lake>/staged/<model>/`,
    incremental by partition, so each run replaces only the partitions
    (landing batches) it writes.

    Hooks, in order: write timestamps as Parquet TIMESTAMP_MICROS (ClickHouse
    DateTime64(6)) instead of Spark's legacy INT96; let a first build or
    --full-refresh write into a folder that already holds staged files; and
    make that build replace the folder (static) while incremental runs only
    replace the partitions they write (dynamic). They set session-wide Spark
    options: run with one thread.

      {{ cdc_staging_config(partition_by=['_batch_id']) }}
-#}
{% macro cdc_staging_config(partition_by) %}
  {%- if '_batch_id' not in partition_by -%}
    {{ exceptions.raise_compiler_error(
      "cdc_staging_config: argument `partition_by` must include `_batch_id`, the landing batch that "
      ~ "incremental runs skip or replace; got `" ~ partition_by ~ "`.") }}
  {%- endif -%}
  {{ config(
      materialized='incremental',
      incremental_strategy='insert_overwrite',
      file_format='parquet',
      partition_by=partition_by,
      location_root=cdc_lake_root() ~ '/staged',
      pre_hook=[
          "set spark.sql.parquet.outputTimestampType = TIMESTAMP_MICROS",
          "set spark.sql.legacy.allowNonEmptyLocationInCTAS = true",
          "set spark.sql.sources.partitionOverwriteMode = {{ 'DYNAMIC' if is_incremental() else 'STATIC' }}",
      ],
  ) }}
{% endmacro %}
