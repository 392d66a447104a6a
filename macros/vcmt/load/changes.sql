{#- The change feed (`changes=true`, docs/design.md#change-feed): every row
    the transform writes into the target (each cancel and each new state),
    copied into `<model>__changes` by a view on the target and labelled with
    the number of the load that wrote it, so a downstream model reads what
    changed since its last run (vcmt.changes()). Merges collapse the target's
    cancel/state pairs, so the target cannot serve as that feed; the feed
    is a plain MergeTree that never merges a row away.

    `_vcmt_row` says what a row of the feed is: 0 the feed's start marker, 1
    a base row (the model's rows when the feed (re)started), 2 a change. The
    feed starts with a marker (a load's first step when it has none): a
    reader that finds none knows the feed is not whole. -#}


{#- The `changes` config: true or false. A sharded model or one on a
    cluster is refused: each node would hold the changes of the loads that
    went through it (docs/design.md#change-feed). A reader of
    model/options.sql (value, cfg, opt, who). -#}
{% macro _read_changes(value, cfg=none, opt=none, who='vcmt_upsert') %}
  {%- if value is not boolean -%}
    {{ exceptions.raise_compiler_error(who ~ ": `changes` must be true or false; got `" ~ value ~ "`. Fix it in the "
        ~ "model's config, e.g. changes=true.") }}
  {%- endif -%}
  {%- set clustered = adapter.get_clickhouse_cluster_name() is not none
      and (config.get('disable_on_cluster') | string | lower) != 'true' -%}
  {%- if value and (cfg.sharding_key or clustered) -%}
    {{ exceptions.raise_compiler_error(who ~ ": `changes=true` is not supported on a cluster (the profile sets "
        ~ "`cluster`" ~ (" and the model a `sharding_key`" if cfg.sharding_key else "") ~ "): each node would keep the "
        ~ "changes of the loads that went through it alone. Remove `changes`, or build the model on one node "
        ~ "(disable_on_cluster=true). Nothing was created or changed.") }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}


{#- `<model>__changes`: the target's columns, then the load's number and the
    row's kind, sorted by load (a reader reads a range of loads). -#}
{% macro _create_changes_sql(cfg, relation, columns) %}
  create table {{ relation }} {{ on_cluster_clause(relation) }} (
    {{ (vcmt._columns_ddl(columns) + ['`_vcmt_load` UInt64', '`_vcmt_row` UInt8']) | join(',\n    ') }}
  ) engine = MergeTree order by (`_vcmt_load`, `_vcmt_row`)
{% endmacro %}


{#- The number of the load that holds the lock of the model `relation`
    belongs to: the newest generation of its lock's table (lock.sql), read
    on the lock's node; a full refresh's staging objects read their model's
    lock. -#}
{% macro _load_number_sql(relation) %}
  {%- set lock = vcmt._lock_relation(vcmt._model_relation(relation)) -%}
  {{ return('(select max(gen) from ' ~ vcmt._lock_rows_source(lock, 'gen') ~ ')') }}
{% endmacro %}


{#- The view on the target that copies each row it receives into the feed.
    A row is labelled with the lock's generation, the number of the load
    writing it (a load records it in `<model>__loads` when it ends); a row
    written when that load has ended (an INSERT into the stage by another
    writer) belongs to the next load, which a reader reads once it has
    ended too. `select *`: a column added to the target later is skipped
    until the feed has it (_prepare_changes). -#}
{% macro _changes_writer_sql(cfg, objs, columns=none) %}
  with ifNull({{ vcmt._load_number_sql(objs.target) }}, 0) as _vcmt_gen
  select *, _vcmt_gen + (_vcmt_gen in (select `load` from {{ objs.loads }})) as `_vcmt_load`, toUInt8(2) as `_vcmt_row`
  from {{ objs.target }}
{% endmacro %}


{#- A load's first step with the change feed, under the lock, before it
    writes anything (load.sql `_load`). The feed and its view exist only
    while `changes=true` (a run with it off drops them, so turning it on
    again restarts the feed instead of leaving a gap):
    - a feed with no start marker (a first build or a full refresh's, which
      starts empty; `changes` just turned on) or whose columns have another
      type than the target's restarts at this load: its base is the model's
      rows now, labelled with this load's number, which every reader has
      not read yet, so each downstream model is rebuilt (vcmt.changes()
      says so);
    - a feed holding more than twice the target's rows (and more than the var
      `vcmt_changes_rebase_rows`, default 1000000) is rebased: its base
      becomes the model's rows now, labelled with the last load ended, and
      the changes before it go. A downstream model that has read every load
      ended reads on; one behind is rebuilt. Each rebase writes the model's
      rows once, after at least as many changes: the feed stays within
      about twice the target, and each change costs one more row written;
    - a column the target has and the feed lacks (a schema change) is added
      (the view's `select *` fills it from then on). -#}
{% macro _prepare_changes(cfg, objs) %}
  {%- set feed = objs.changes -%}
  {%- if not cfg.changes -%}{{ return(none) }}{%- endif -%}
  {%- if not vcmt._relation_exists(objs.changes_writer) -%}
    {{ vcmt._refuse_under_lock(objs, "vcmt_upsert " ~ objs.target.identifier ~ ": `changes=true`, but the model "
        ~ "has no " ~ objs.changes_writer.identifier ~ " yet, which writes its change feed: run `dbt run --select "
        ~ vcmt._model_relation(objs.target).identifier ~ "` first (it creates it). Nothing was loaded.") }}
  {%- endif -%}
  {%- set row = run_query('select (select count() from ' ~ feed ~ '), (select count() from ' ~ objs.target ~ '), '
      ~ '(select _vcmt_row from ' ~ feed ~ ' order by _vcmt_load, _vcmt_row limit 1), (select _vcmt_load from '
      ~ feed ~ ' order by _vcmt_load desc limit 1), (select max(`load`) from ' ~ objs.loads ~ ') '
      ~ vcmt._read_settings()).rows[0] -%}
  {%- set feed_rows, target_rows = row[0] | int, row[1] | int -%}
  {%- set started = feed_rows > 0 and row[2] | int == 0 -%}
  {#- Both as the catalog spells them. -#}
  {%- set stored = vcmt._types_by_name(vcmt._catalog_columns(feed)) -%}
  {%- set columns = vcmt._catalog_columns(objs.target) -%}
  {%- set missing = [] -%}
  {%- set retyped = [] -%}
  {%- for c in columns -%}
    {%- if c.name not in stored -%}
      {%- do missing.append((c, columns[loop.index0 - 1].name if not loop.first else none)) -%}
    {%- elif stored[c.name] != c.data_type -%}{%- do retyped.append(c.name) -%}{%- endif -%}
  {%- endfor -%}
  {%- if not started or retyped -%}
    {%- if feed_rows == 0 and target_rows == 0 and not missing and not retyped -%}
      {%- call statement('vcmt_changes_start') -%}
        insert into {{ feed }} (`_vcmt_load`, `_vcmt_row`, {{ vcmt._quote(cfg.sign) }})
        select {{ vcmt._load_number_sql(objs.target) }}, 0, 0 where {{ vcmt._fenced(objs.target) }}
      {%- endcall -%}
    {%- else -%}
      {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': change feed restarted at this load ('
          ~ ('the column(s) ' ~ retyped | join(', ') ~ ' changed type' if retyped else 'it had no start') ~ ')'
          ~ '; its downstream models rebuild', info=true) }}
      {%- do vcmt._rebase_changes(cfg, objs, columns, vcmt._load_number_sql(objs.target)) -%}
    {%- endif -%}
  {%- elif feed_rows > [2 * target_rows, var('vcmt_changes_rebase_rows', 1000000)] | max -%}
    {%- set label = [row[3] | int, (row[4] or 0) | int] | max -%}
    {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': change feed rebased at load ' ~ label ~ ' (' ~ feed_rows
        ~ ' rows for ' ~ target_rows ~ ' in the table)', info=true) }}
    {%- do vcmt._rebase_changes(cfg, objs, columns, label) -%}
  {%- else -%}
    {#- In the target's order: each after the column before it there. -#}
    {%- for c, previous in missing -%}
      {%- do vcmt._check_fence(objs.target) -%}
      {%- call statement('vcmt_changes_add_column') -%}
        alter table {{ feed }} add column if not exists {{ vcmt._quote(c.name) }} {{ c.data_type }}
        {{ 'after ' ~ vcmt._quote(previous) if previous else 'first' }}
      {%- endcall -%}
    {%- endfor -%}
  {%- endif -%}
{% endmacro %}


{#- Replace the feed by one that starts at load `label` (a number, or the
    SQL of one): a start marker and the model's rows now as base rows, in a
    table of the target's columns built beside the feed and exchanged with
    it in one statement, so a reader reads the old feed or the new one
    whole. Under the lock (nothing else writes the target), fenced. A table
    left by a rebase that was stopped is dropped first. -#}
{% macro _rebase_changes(cfg, objs, columns, label) %}
  {%- set feed = objs.changes -%}
  {%- set next = feed.incorporate(path={'identifier': objs.target.identifier ~ vcmt._object_suffix('changes_next')}) -%}
  {%- set names = vcmt._column_list(columns | map(attribute='name') | list) -%}
  {%- for name, sql in [
      ('vcmt_changes_drop_next', vcmt._drop_sql(next, local=true)),
      ('vcmt_changes_create_next', vcmt._create_changes_sql(cfg, next, columns)),
      ('vcmt_changes_base', 'insert into ' ~ next ~ ' (' ~ names ~ ', `_vcmt_load`, `_vcmt_row`) select ' ~ names
          ~ ', ' ~ label ~ ', 1 from ' ~ objs.target ~ ' final where ' ~ vcmt._quote(cfg.sign) ~ ' = 1 and '
          ~ vcmt._fenced(objs.target) ~ ' ' ~ vcmt._read_settings(holder_of=objs.target)),
      ('vcmt_changes_start', 'insert into ' ~ next ~ ' (`_vcmt_load`, `_vcmt_row`, ' ~ vcmt._quote(cfg.sign)
          ~ ') select ' ~ label ~ ', 0, 0 where ' ~ vcmt._fenced(objs.target)),
      ('vcmt_changes_swap', 'exchange tables ' ~ next ~ ' and ' ~ feed),
      ('vcmt_changes_drop_next', vcmt._drop_sql(next, local=true)),
  ] -%}
    {%- do vcmt._renew_lock(cfg, objs) -%}
    {%- do vcmt._check_fence(objs.target) -%}
    {%- call statement(name) -%}{{ sql }}{%- endcall -%}
  {%- endfor -%}
{% endmacro %}
