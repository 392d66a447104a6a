{#- Incremental Python models on `type: vcmt_spark` write the model's result
    straight into its table: `insert_overwrite` replaces the partitions the
    result holds (dynamic partition overwrite), `append` appends. dbt-spark
    instead writes a `__dbt_tmp` table, runs `insert overwrite ... select` from
    it and drops it: two more Spark jobs and a table per run, seconds per model
    and batch (docs/staging.md, "Where staging time goes"). SQL models, and
    Python models on a first run or a full refresh, take dbt-spark's path. -#}
{% materialization incremental, adapter='vcmt_spark', supported_languages=['sql', 'python'] -%}
  {%- set existing_relation = load_relation(this) -%}
  {%- if model['language'] != 'python' -%}
    {{ return(materialization_incremental_spark()) }}
  {%- endif -%}
  {%- set strategy = config.get('incremental_strategy') or 'append' -%}
  {%- set partition_by = config.get('partition_by', none) -%}
  {%- if strategy not in ['insert_overwrite', 'append'] or (strategy == 'insert_overwrite' and not partition_by) -%}
    {{ exceptions.raise_compiler_error(
        "Python model " ~ model['alias'] ~ ": incremental_strategy '" ~ strategy ~ "' is not supported on "
        ~ "type vcmt_spark; use 'insert_overwrite' with partition_by (replaces the partitions a run stages) "
        ~ "or 'append'.") }}
  {%- endif -%}
  {%- if config.get('on_schema_change', 'ignore') != 'ignore' -%}
    {{ exceptions.raise_compiler_error(
        "Python model " ~ model['alias'] ~ ": on_schema_change is not supported on type vcmt_spark; "
        ~ "remove it (new columns need --full-refresh).") }}
  {%- endif -%}
  {{ run_hooks(pre_hooks) }}
  {%- if existing_relation is none or existing_relation.is_view or should_full_refresh() -%}
    {%- if existing_relation is not none -%}
      {% do adapter.drop_relation(existing_relation) %}
    {%- endif -%}
    {%- call statement('main', language='python') -%}
      {{ vcmt_spark_py_write(compiled_code, this, 'create') }}
    {%- endcall -%}
  {%- else -%}
    {%- call statement('main', language='python') -%}
      {{ vcmt_spark_py_write(compiled_code, this, 'overwrite_partitions' if strategy == 'insert_overwrite' else 'append') }}
    {%- endcall -%}
  {%- endif -%}
  {% do apply_grants(this, config.get('grants'), should_revoke(existing_relation, full_refresh_mode=should_full_refresh())) %}
  {% do persist_docs(this, model) %}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [this]}) }}
{%- endmaterialization %}
