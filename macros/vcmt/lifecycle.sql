{#- Create every object of a model. The stage gets its views in one go, the
    transform last, so inserts reach the target as soon as the stage exists. -#}
{% macro _create_objects(cfg, objs, columns) %}
  {%- call statement('vcmt_create_target') -%}{{ vcmt.create_target_sql(cfg, objs.target, columns) }}{%- endcall -%}
  {%- call statement('vcmt_create_tombstones') -%}{{ vcmt.create_tombstones_sql(cfg, objs.tombstones, columns) }}{%- endcall -%}
  {%- call statement('vcmt_create_applied') -%}{{ vcmt.create_applied_sql(objs.applied) }}{%- endcall -%}
  {%- call statement('vcmt_create_loads') -%}{{ vcmt.create_loads_sql(objs.loads) }}{%- endcall -%}
  {%- call statement('vcmt_create_applied_writer') -%}
    {{ vcmt.create_view_sql(objs.applied_writer, objs.applied, vcmt.applied_writer_sql(cfg, objs)) }}
  {%- endcall -%}
  {%- if cfg.delete_mode == 'unconditional' -%}
    {%- call statement('vcmt_create_cancels_writer') -%}
      {{ vcmt.create_view_sql(objs.cancels_writer, objs.tombstones, vcmt.cancels_writer_sql(cfg, objs)) }}
    {%- endcall -%}
  {%- endif -%}
  {%- call statement('vcmt_create_stage') -%}{{ vcmt.create_stage_sql(objs.stage, columns) }}{%- endcall -%}
  {%- call statement('vcmt_create_tombstones_writer') -%}
    {{ vcmt.create_view_sql(objs.tombstones_writer, objs.tombstones, vcmt.tombstones_writer_sql(cfg, objs)) }}
  {%- endcall -%}
  {%- call statement('vcmt_create_transform') -%}
    {{ vcmt.create_view_sql(objs.transform, objs.target, vcmt.transform_sql(cfg, objs, columns)) }}
  {%- endcall -%}
{% endmacro %}


{% macro _check_existing_is_vcmt(objs, found) %}
  {%- set engine = found.get(objs.target.identifier, {}).get('engine', 'unknown') -%}
  {%- set has_stage = objs.stage.identifier in found -%}
  {%- if 'VersionedCollapsingMergeTree' not in engine or not has_stage -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `" ~ objs.target ~ "` exists but was not built by vcmt_upsert (engine " ~ engine ~ ", stage " ~ objs.stage.identifier ~ (" present" if has_stage else " missing") ~ "). Run once with --full-refresh to rebuild it.") }}
  {%- endif -%}
{% endmacro %}


{#- Bring an existing model's objects in line with its config without losing
    data, and without ever leaving the stage without its transform:
    schema changes per on_schema_change, helpers created if missing, the
    transform changed in place with MODIFY QUERY, projections added. -#}
{% macro _reconcile_objects(cfg, objs, columns, found) %}
  {%- set columns = vcmt._apply_schema_changes(cfg, objs, columns) -%}

  {%- for role, create_sql in [
        ('tombstones', vcmt.create_tombstones_sql(cfg, objs.tombstones, columns)),
        ('applied', vcmt.create_applied_sql(objs.applied)),
        ('loads', vcmt.create_loads_sql(objs.loads))] -%}
    {%- if objs[role].identifier not in found -%}
      {%- call statement('vcmt_create_' ~ role) -%}{{ create_sql }}{%- endcall -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if objs.applied_writer.identifier not in found -%}
    {%- call statement('vcmt_create_applied_writer') -%}
      {{ vcmt.create_view_sql(objs.applied_writer, objs.applied, vcmt.applied_writer_sql(cfg, objs)) }}
    {%- endcall -%}
  {%- endif -%}

  {#- delete_mode: the new writer is attached before the old one goes, so no
      delete is ever left without a tombstone. -#}
  {%- set has_cancels_writer = objs.cancels_writer.identifier in found -%}
  {%- if cfg.delete_mode == 'unconditional' and not has_cancels_writer -%}
    {%- call statement('vcmt_create_cancels_writer') -%}
      {{ vcmt.create_view_sql(objs.cancels_writer, objs.tombstones, vcmt.cancels_writer_sql(cfg, objs)) }}
    {%- endcall -%}
  {%- elif cfg.delete_mode == 'versioned' and has_cancels_writer -%}
    {%- call statement('vcmt_drop_cancels_writer') -%}drop table {{ objs.cancels_writer }} sync{%- endcall -%}
  {%- endif -%}
  {%- if objs.tombstones_writer.identifier not in found -%}
    {%- call statement('vcmt_create_tombstones_writer') -%}
      {{ vcmt.create_view_sql(objs.tombstones_writer, objs.tombstones, vcmt.tombstones_writer_sql(cfg, objs)) }}
    {%- endcall -%}
  {%- endif -%}

  {%- set transform = vcmt.transform_sql(cfg, objs, columns) -%}
  {%- if objs.transform.identifier not in found -%}
    {%- call statement('vcmt_create_transform') -%}
      {{ vcmt.create_view_sql(objs.transform, objs.target, transform) }}
    {%- endcall -%}
  {%- elif vcmt._view_query_differs(found[objs.transform.identifier].as_select, transform) -%}
    {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': transform changed, updating it in place (MODIFY QUERY)', info=true) }}
    {%- call statement('vcmt_modify_transform') -%}
      alter table {{ objs.transform }} {{ on_cluster_clause(objs.transform) }} modify query {{ transform }}
    {%- endcall -%}
  {%- endif -%}

  {%- do vcmt._sync_projections(cfg, objs, found[objs.target.identifier].create_table_query) -%}
  {{ return(columns) }}
{% endmacro %}


{#- Both sides go through ClickHouse's formatter, so only a real change counts. -#}
{% macro _view_query_differs(stored_select, select_sql) %}
  {%- set rows = run_query("select formatQuery(" ~ vcmt._sql_string(stored_select) ~ ") != formatQuery(" ~ vcmt._sql_string(select_sql) ~ ")").columns[0].values() -%}
  {{ return(rows[0] | int == 1) }}
{% endmacro %}


{#- Projections in config but not on the table are added and materialized for
    existing parts; a projection whose query changed is rebuilt; one no longer
    configured is dropped. -#}
{% macro _sync_projections(cfg, objs, create_table_query) %}
  {%- set existing = {} -%}
  {%- set rows = run_query("select name, query from system.projections where database = " ~ vcmt._sql_string(objs.target.schema) ~ " and table = " ~ vcmt._sql_string(objs.target.identifier)) -%}
  {%- for row in rows.rows -%}{%- do existing.update({row[0]: row[1]}) -%}{%- endfor -%}
  {%- set wanted = {} -%}
  {%- for p in cfg.projections -%}{%- do wanted.update({p['name']: p['query']}) -%}{%- endfor -%}
  {%- if wanted and 'deduplicate_merge_projection_mode' not in create_table_query -%}
    {%- call statement('vcmt_projection_mode') -%}
      alter table {{ objs.target }} {{ on_cluster_clause(objs.target) }} modify setting deduplicate_merge_projection_mode = 'rebuild'
    {%- endcall -%}
  {%- endif -%}
  {%- for name in existing.keys() if name not in wanted or vcmt._projection_query_differs(existing[name], wanted[name]) -%}
    {%- call statement('vcmt_drop_projection') -%}
      alter table {{ objs.target }} {{ on_cluster_clause(objs.target) }} drop projection {{ vcmt._quote(name) }}
    {%- endcall -%}
  {%- endfor -%}
  {%- for name, query in wanted.items() if name not in existing or vcmt._projection_query_differs(existing[name], query) -%}
    {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': adding projection ' ~ name ~ ' and materializing it for existing data', info=true) }}
    {%- call statement('vcmt_add_projection') -%}
      alter table {{ objs.target }} {{ on_cluster_clause(objs.target) }} add projection {{ vcmt._quote(name) }} ({{ vcmt._user_sql(query) }})
    {%- endcall -%}
    {%- call statement('vcmt_materialize_projection') -%}
      alter table {{ objs.target }} {{ on_cluster_clause(objs.target) }} materialize projection {{ vcmt._quote(name) }} settings mutations_sync = 2
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}


{% macro _projection_query_differs(stored, wanted) %}
  {%- set normalize = modules.re.compile('[\\s`"]+') -%}
  {{ return(normalize.sub('', stored | lower) != normalize.sub('', wanted | lower)) }}
{% endmacro %}


{% macro _summary(stats) %}
  {%- set n = stats -%}
  {{ return(
      n.events ~ ' events (' ~ n.upserts ~ ' upserts, ' ~ n.deletes ~ ' deletes); '
      ~ n.superseded ~ ' superseded in batch; ' ~ n.fed ~ ' applied in ' ~ n.rounds ~ ' round(s): '
      ~ n.inserted ~ ' inserted, ' ~ n.updated ~ ' updated, ' ~ n.deleted ~ ' deleted, '
      ~ n.skipped ~ ' skipped as stale or duplicate; ' ~ n.rows_written ~ ' rows written') }}
{% endmacro %}
