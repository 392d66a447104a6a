{#- The lake root (var `vcmt_lake_root`) as Spark must see it. Spark resolves
    a relative table location against its warehouse, not the working
    directory: a relative root is anchored at the directory dbt runs from, as
    the Spark session does for reads. Absolute paths and URLs (`s3://...`)
    are kept as they are.

      from text.`{{ cdc_lake_root() }}/raw/orders`
-#}
{% macro cdc_lake_root() %}
  {%- set lake_root = var('vcmt_lake_root') -%}
  {%- if not (lake_root.startswith('/') or '://' in lake_root) -%}
    {%- set lake_root = env_var('PWD', '.') ~ '/' ~ lake_root -%}
  {%- endif -%}
  {{ return(lake_root) }}
{% endmacro %}
