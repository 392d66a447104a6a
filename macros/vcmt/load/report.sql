{#- The run report: what a load did, counted once and shown three ways (the
    run line, dbt's result, a row of `<model>__loads`), plus the counters
    behind it (`<model>__applied`, written by a view on the target). -#}


{#- The columns of `<model>__loads`, as (name, type, what it counts): the one
    list its DDL, each load's row and the docs' table are made from. -#}
{% macro _loads_fields() %}
  {{ return([
      ('loaded_at', 'DateTime64(3)', 'when the load ended'),
      ('invocation_id', 'String', "dbt's invocation id"),
      ('events', 'UInt64', 'change events read (upserts + deletes): ignored_below_truncate + superseded + fed'),
      ('upserts', 'UInt64', 'events read with sign >= 0'),
      ('deletes', 'UInt64', 'events read with sign < 0'),
      ('superseded', 'UInt64', 'events folded into a later event of the same key in the batch, or exact duplicates'),
      ('fed', 'UInt64', 'events sent to the target: inserted + updated + deleted + skipped'),
      ('rounds', 'UInt32', 'INSERTs into the stage one after another (1 when the batch folds)'),
      ('virtual_shards', 'UInt32', 'concurrent streams of disjoint keys per round'),
      ('inserted', 'UInt64', 'keys that got their first live row'),
      ('updated', 'UInt64', 'keys whose live row was replaced'),
      ('deleted', 'UInt64', 'keys whose live row a delete event removed'),
      ('skipped', 'UInt64', 'fed events that changed nothing: stale, duplicate, or a delete of a key with no live row'),
      ('rows_written', 'UInt64', 'rows written to the target: inserted + 2 x updated + deleted + truncated_rows'),
      ('truncates', 'UInt64', 'truncate events read (not counted in events)'),
      ('truncated_rows', 'UInt64', 'live rows a truncate removed'),
      ('ignored_below_truncate', 'UInt64', 'events read at or below a truncate, ignored'),
      ('watermark', 'Nullable(String)', 'the highest `watermark` value loaded so far; NULL when this load moved '
          ~ 'nothing'),
      ('seconds', 'Float64', 'duration of the load'),
      ('shards', 'String', "a sharded model's placement when it loaded: the shard weights of the profile's cluster, "
          ~ "in shard order (e.g. '1,1'); '' when the model is not sharded"),
      ('load', 'UInt64', "the load's number: its lock's generation, which grows with each load of the model; the "
          ~ "change feed labels the rows a load wrote with it"),
  ]) }}
{% endmacro %}


{#- The one-line run report of a load (docs/design.md#run-report): printed by
    `dbt run` and by `vcmt.load_stage`, and kept in the run result. -#}
{% macro _summary(stats) %}
  {%- set n = stats -%}
  {%- set c = vcmt._count -%}
  {{ return(
      c(n.events, 'event') ~ ' read (' ~ c(n.upserts, 'upsert') ~ ', ' ~ c(n.deletes, 'delete') ~ '): '
      ~ (n.ignored_below_truncate ~ ' ignored at or below a truncate, ' if n.ignored_below_truncate > 0 else '')
      ~ n.superseded ~ ' superseded in the batch, ' ~ n.fed ~ ' sent to the target in ' ~ c(n.rounds, 'round')
      ~ (' on ' ~ n.virtual_shards ~ ' virtual shards' if n.virtual_shards > 1 else '')
      ~ ' (at most one event per key per round)' ~ ': '
      ~ n.inserted ~ ' inserted, ' ~ n.updated ~ ' updated, ' ~ n.deleted ~ ' deleted, '
      ~ n.skipped ~ ' skipped (stale, duplicate, or a delete of a key with no live row)'
      ~ ('; ' ~ c(n.truncates, 'truncate') ~ ': ' ~ c(n.truncated_rows, 'row') ~ ' at or below version '
      ~ n.truncated_to ~ ' deleted' if n.truncated_to is not none else '')
      ~ ('; ' ~ c(n.truncates, 'truncate') ~ ' already applied' if n.truncates > 0 and n.truncated_to is none else '')
      ~ '; ' ~ c(n.rows_written, 'row') ~ ' written'
      ~ ('; watermark not moved (this load\'s `' ~ n.watermark_column ~ '` reaches ' ~ n.watermark_not_moved
         ~ '; pass move_watermark=true to move it)' if n.get('watermark_not_moved') is not none else '')) }}
{% endmacro %}


{#- What the run line adds after the model's name: a `delete_mode` other than
    the default, which changes what a delete does. -#}
{% macro _modes_note(cfg) %}
  {{ return(' (delete_mode=' ~ cfg.delete_mode ~ ')' if cfg.delete_mode != 'versioned' else '') }}
{% endmacro %}


{#- What ran, in target/run/ as dbt writes it for its own materializations:
    the statements that read and applied this run's events (the DDL and the
    checks before them are in dbt's log). -#}
{% macro _write_run_sql(target, stats) %}
  {%- set header = '-- vcmt_upsert ' ~ target ~ ': the statements that loaded this run (docs/design.md#loader).\n-- '
                   ~ vcmt._summary(stats) ~ '\n\n' -%}
  {%- do write(header ~ (stats.sql | map('trim') | join(';\n\n')) ~ ';\n') -%}
{% endmacro %}


{#- "1 event", "2 events". -#}
{% macro _count(n, noun) %}
  {{ return(n ~ ' ' ~ noun ~ ('' if n == 1 else 's')) }}
{% endmacro %}


{#- The totals of `m__applied`, and with `watermark_sql` that expression too
    (one query after a load instead of two). -#}
{% macro _applied_totals(objs, watermark_sql=none) %}
  {%- set row = run_query(vcmt._applied_totals_sql(objs, watermark_sql)).rows[0] -%}
  {{ return({'inserted': row[0] | int, 'updated': row[1] | int, 'deleted': row[2] | int,
             'watermark': row[3] if watermark_sql else none}) }}
{% endmacro %}


{% macro _applied_totals_sql(objs, watermark_sql=none) %}
  {{ return('select sum(inserted) as inserted, sum(updated) as updated, sum(deleted) as deleted'
            ~ (', ' ~ watermark_sql ~ ' as watermark' if watermark_sql else '')
            ~ ' from ' ~ vcmt._all_shards(objs, 'applied') ~ ' ' ~ vcmt._read_settings()) }}
{% endmacro %}


{#- Exact per-insert counters of what the transform did, for the run report. -#}
{% macro _create_applied_sql(cfg, relation, columns) %}
  create table {{ relation }} {{ on_cluster_clause(relation) }} (
    inserted UInt64, updated UInt64, deleted UInt64
  ) engine = SummingMergeTree order by tuple()
{% endmacro %}


{#- In one insert block an update is a key with two rows (-1, +1), an insert a
    +1 alone, a delete a -1 alone; so rows - distinct keys counts updates, and
    the rest follows by sign. (uniqExact is about twice as fast as a GROUP BY.) -#}
{% macro _applied_writer_sql(cfg, objs, columns=none) %}
  {%- set s = vcmt._quote(cfg.sign) -%}
  {%- set updated = '(count() - uniqExact(' ~ vcmt._column_list(cfg.key_columns) ~ '))' -%}
  select
    countIf({{ s }} = 1) - {{ updated }} as inserted,
    {{ updated }} as updated,
    countIf({{ s }} = -1) - {{ updated }} as deleted
  from {{ objs.target }}
{% endmacro %}


{% macro _create_loads_sql(cfg, relation, columns) %}
  {%- set declared = vcmt._loads_fields() -%}
  {%- set names = vcmt._quote(declared | map(attribute=0) | list, each=true) -%}
  {%- set fields = [] -%}
  {%- for name, type, _ in declared -%}{%- do fields.append(names[loop.index0] ~ ' ' ~ type) -%}{%- endfor -%}
  create table {{ relation }} {{ on_cluster_clause(relation) }} (
    {{ fields | join(',\n    ') }}
  ) engine = MergeTree order by loaded_at
{% endmacro %}


{#- Record one load in `<model>__loads`, by column name, from the run's stats
    (the keys of `stats` are the field names). -#}
{% macro _record_load(objs, stats) %}
  {%- set fields = vcmt._loads_fields() -%}
  {%- set given = [] -%}
  {%- for name, type, _ in fields -%}
    {%- do given.append(invocation_id if name == 'invocation_id' else none if name in ['loaded_at', 'load']
        else stats[name]) -%}
  {%- endfor -%}
  {#- The values' and the types' literals, a macro call for each list (sql_text.sql `_sql_string`). -#}
  {%- set literals = vcmt._sql_string(given, each=true) -%}
  {%- set types = vcmt._sql_string(fields | map(attribute=1) | list, each=true) -%}
  {%- set values = [] -%}
  {%- for name, type, _ in fields -%}
    {%- if name == 'loaded_at' -%}
      {%- do values.append('now64(3)') -%}
    {%- elif name == 'load' -%}
      {%- do values.append(vcmt._load_number_sql(objs.target)) -%}
    {%- else -%}
      {%- do values.append('cast(' ~ ('null' if given[loop.index0] is none else literals[loop.index0]) ~ ', '
          ~ types[loop.index0] ~ ')') -%}
    {%- endif -%}
  {%- endfor -%}
  {%- call statement('vcmt_log_load') -%}
    insert into {{ objs.loads }} ({{ vcmt._column_list(fields | map(attribute=0)) }})
    select {{ values | join(', ') }} where {{ vcmt._fenced(objs.target) }}
    {{ vcmt._settings_clause(vcmt._holder_settings(objs.target)) }}
  {%- endcall -%}
{% endmacro %}


{#- A `<model>__loads` created by an older version lacks the fields added
    since (report.sql `_loads_fields`): each is added, from the table's
    stored CREATE in `found`. -#}
{% macro _plan_loads_columns(objs, found) %}
  {%- set stored = found.get(objs.loads.identifier, {}).get('create_table_query') -%}
  {%- set steps = [] -%}
  {%- for name, type, _ in vcmt._loads_fields() if stored and not vcmt._stored_has_column(stored, name) -%}
    {%- do steps.append(vcmt._step('vcmt_loads_add_' ~ name, 'alter table ' ~ objs.loads ~ ' '
        ~ on_cluster_clause(objs.loads) ~ ' add column if not exists ' ~ vcmt._quote(name) ~ ' ' ~ type,
        fence=false)) -%}
  {%- endfor -%}
  {{ return(steps) }}
{% endmacro %}
