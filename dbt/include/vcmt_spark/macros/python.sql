{#- The write step of a Python model on `type: vcmt_spark`, replacing dbt-spark's
    `py_write_table` (the most specific adapter's macro wins). dbt-spark's own
    version writes Delta by default and ignores partition_by and location_root;
    this one writes the model's table the way dbt-spark's SQL `create table as`
    does: file_format (default parquet, as for SQL models), partition_by and
    location_root/<alias>. The incremental materialization's `__dbt_tmp`
    relation is written as a plain managed table. -#}
{% macro py_write_table(compiled_code, target_relation) %}
{{ vcmt_spark_py_write(compiled_code, target_relation, 'create') }}
{%- endmacro -%}

{#- `mode`: create (replace the table), overwrite_partitions (replace the
    partitions the result holds, the rest stay), append. -#}
{% macro vcmt_spark_py_write(compiled_code, target_relation, mode) %}
{{ compiled_code }}
# --- vcmt_spark: run the model on the session and save its result --- #
from dbt.adapters.vcmt_spark.python_submissions import save_model_result

dbt = dbtObj(spark.table)
df = model(dbt, spark)
{%- set is_model_table = target_relation.identifier == model['alias'] %}
{%- set partition_by = config.get('partition_by') %}
{%- if partition_by is string %}{% set partition_by = [partition_by] %}{% endif %}
{%- set location_root = config.get('location_root') %}
save_model_result(
    spark,
    df,
    table={{ target_relation | string | tojson }},
    file_format={{ (config.get('file_format') or 'parquet') | tojson }},
    partition_by={{ (partition_by or []) | tojson if is_model_table else '[]' }},
    location={{ (location_root ~ '/' ~ model['alias']) | tojson if (is_model_table and location_root) else 'None' }},
    mode={{ mode | tojson }},
)
{%- endmacro -%}
