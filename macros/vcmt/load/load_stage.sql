{#- Apply any SELECT of change events to an existing vcmt_upsert model through
    its stage, with the same loader as `dbt run` (one event per key per INSERT,
    every value checked and cast to the target's types before the first
    INSERT, stats in `<model>__loads`). For backfills and external feeds, and
    behind `vcmt-load-stage`:

      dbt run-operation vcmt.load_stage --args "{model: fct_orders, sql: 'select * from s3(...)'}"

    It leaves the model's `watermark` where it is (the rows' own batch ids
    belong to the load, not to the model's source) unless `move_watermark`
    is true (docs/design.md#watermark). -#}
{% macro load_stage(model, sql, local_file=none, move_watermark=false) %}
  {{ return(adapter.dispatch('load_stage', 'vcmt')(model, sql, local_file, move_watermark)) }}
{% endmacro %}

{#- `local_file`: the file of the machine running dbt that `sql` reads
    (vcmt-load-stage passes it). Only an engine in this process can read it. -#}
{% macro default__load_stage(model, sql, local_file=none, move_watermark=false) %}
  {%- if local_file and adapter.type() != 'chdb' -%}
    {{ exceptions.raise_compiler_error("vcmt-load-stage: `" ~ local_file ~ "` is a file on this machine, but target `"
        ~ target.name ~ "` is a ClickHouse server (type: " ~ adapter.type() ~ "), which reads its own file system. "
        ~ "Put the file where the server can read it and load it with a SELECT: dbt run-operation vcmt.load_stage "
        ~ "--args \"{model: " ~ model ~ ", sql: 'select * from s3(...)'}\" (or url(...), "
        ~ "or file('<path on the server>', 'Parquet')).") }}
  {%- endif -%}
  {%- set nodes = [] -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.name == model -%}
    {%- do nodes.append(node) -%}
  {%- endfor -%}
  {%- if nodes | length != 1 or nodes[0].config.materialized != 'vcmt_upsert' -%}
    {{ exceptions.raise_compiler_error("vcmt.load_stage: `model` must name one vcmt_upsert model of this project; got `"
        ~ model ~ "`.") }}
  {%- endif -%}
  {%- set node = nodes[0] -%}
  {%- set cfg = vcmt._read_config(node.config) -%}
  {%- set target = vcmt._node_target(node) -%}
  {%- set objs = vcmt.objects(target, cfg.sharding_key) -%}
  {%- if not vcmt._relation_exists(objs.stage) -%}
    {{ exceptions.raise_compiler_error("vcmt.load_stage: " ~ objs.stage ~ " does not exist; build the model first with "
        ~ "`dbt run --select " ~ model ~ "`.") }}
  {%- endif -%}
  {%- do vcmt._check_on_every_node(objs, 'vcmt.load_stage ' ~ model) -%}
  {%- set found = vcmt._existing_objects(objs) -%}
  {%- do vcmt._apply(cfg, objs, vcmt._plan_loads_columns(objs, found)) -%}
  {%- do vcmt._check_stored_routing(cfg, objs, found, vcmt._refresh_advice(objs), 'vcmt.load_stage ' ~ model) -%}
  {%- set columns = [] -%}
  {%- for c in adapter.get_columns_in_relation(objs.target) -%}{%- do columns.append({'name': c.name,
      'data_type': c.data_type}) -%}{%- endfor -%}
  {%- set cfg = vcmt._sorting_key_default(cfg, columns, objs.target) -%}
  {%- set select_columns = adapter.get_column_schema_from_query(vcmt._user_sql(sql)) -%}
  {%- set returned = select_columns | map(attribute='name') | list -%}
  {%- do vcmt._check_reserved_names(returned, 'vcmt.load_stage') -%}
  {%- for c in columns if c.name not in returned and c.name != cfg.sign -%}
    {{ exceptions.raise_compiler_error("vcmt.load_stage: the SELECT must return every column of " ~ target ~ "; `"
        ~ c.name ~ "` is missing. It returns " ~ returned ~ ".") }}
  {%- endfor -%}
  {#- Input types may differ from the target's (a file's Nullable or Float
      columns): values are checked and cast by the loader, before any INSERT. -#}
  {%- if move_watermark not in [true, false] -%}
    {{ exceptions.raise_compiler_error("vcmt.load_stage: `move_watermark` must be true or false; got `" ~ move_watermark
        ~ "`.") }}
  {%- endif -%}
  {%- set stats = vcmt._load(cfg, objs, columns, select_columns, sql, lock_for='vcmt.load_stage',
      move_watermark=move_watermark) -%}
  {%- do vcmt._release_lock(objs.target) -%}
  {{ log('vcmt.load_stage ' ~ model ~ vcmt._modes_note(cfg) ~ ': ' ~ vcmt._summary(stats), info=true) }}
  {{ return(stats) }}
{% endmacro %}
