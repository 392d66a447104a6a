{#- A table function over one staged dataset of the lake, hive-partitioned by
    batch (`_batch_id=<N>/` folders, read as the `_batch_id` column; ClickHouse
    25.x+ does this by default, older servers need `use_hive_partitioning: 1`
    in the profile's custom_settings).

    Local lake (default): `file()`, relative to where dbt runs, or absolute.
    S3: set var `vcmt_lake_root` to `s3://bucket/prefix` (var `vcmt_s3_endpoint`
    for MinIO and other S3-compatible stores). Credentials come from env vars
    VCMT_S3_ACCESS_KEY_ID / VCMT_S3_SECRET_ACCESS_KEY when set, otherwise from
    the server's own S3 configuration (named collection, IAM role).

      select * from {{ vcmt.lake_source('stg_cdc__order_changes') }}
-#}
{% macro lake_source(dataset, format='Parquet') %}
  {{ return(adapter.dispatch('lake_source', 'vcmt')(dataset, format)) }}
{% endmacro %}

{% macro default__lake_source(dataset, format='Parquet') %}
  {%- set root = (var('vcmt_lake_root', '.local/lake') | string).rstrip('/') -%}
  {%- set path = root ~ '/staged/' ~ dataset ~ '/**/*.' ~ (format | lower) -%}
  {%- if not root.startswith('s3://') -%}
    {{ return("file(" ~ vcmt._sql_string(path) ~ ", " ~ vcmt._sql_string(format) ~ ")") }}
  {%- endif -%}
  {%- set endpoint = var('vcmt_s3_endpoint', none) -%}
  {%- set url = endpoint.rstrip('/') ~ '/' ~ path[5:] if endpoint else path -%}
  {%- set key = env_var('VCMT_S3_ACCESS_KEY_ID', '') -%}
  {%- set credentials = vcmt._sql_string(key) ~ ", " ~ vcmt._sql_string(env_var('VCMT_S3_SECRET_ACCESS_KEY', '')) ~ ", " if key else '' -%}
  {{ return("s3(" ~ vcmt._sql_string(url) ~ ", " ~ credentials ~ vcmt._sql_string(format) ~ ")") }}
{% endmacro %}
