{#- The model's events, every column cast to the target's type (so one key
    has one spelling: a UUID written in upper and lower case is one key), with
    the sign normalised to +1 (upsert) / -1 (delete) in `_vcmt_sign`; a SELECT
    without a sign column is all upserts. -#}
{% macro _normalized_events_sql(cfg, columns, select_columns, sql) %}
  {%- set has_sign = cfg.sign in (select_columns | map(attribute='name') | list) -%}
  {%- set sign_expr = 'if(' ~ vcmt._quote(cfg.sign) ~ ' < 0, toInt8(-1), toInt8(1))' if has_sign else 'toInt8(1)' -%}
  {%- set types = {} -%}
  {%- for c in columns -%}{%- do types.update({c.name: c.data_type}) -%}{%- endfor -%}
  {%- set casts = [] -%}
  {%- for c in cfg.key_columns + vcmt._loaded_data_columns(cfg, columns, select_columns) + [cfg.version] -%}
    {%- do casts.append('cast(_vcmt_in.' ~ vcmt._quote(c) ~ ', ' ~ vcmt._sql_string(types[c]) ~ ') as ' ~ vcmt._quote(c)) -%}
  {%- endfor -%}
  {%- if cfg.watermark and cfg.watermark not in types -%}
    {%- do casts.append('_vcmt_in.' ~ vcmt._quote(cfg.watermark) ~ ' as ' ~ vcmt._quote(cfg.watermark)) -%}
  {%- endif -%}
  select {{ casts | join(', ') }}, _vcmt_in._vcmt_sign as _vcmt_sign
  from (select *, {{ sign_expr }} as _vcmt_sign from ({{ vcmt._user_sql(sql) }}) as _vcmt_src) as _vcmt_in
{% endmacro %}


{#- Target data columns the SELECT returns. A column the target keeps but the
    SELECT no longer returns (on_schema_change) is left to its default in the
    stage, and the transform keeps the stored value for it. -#}
{% macro _loaded_data_columns(cfg, columns, select_columns) %}
  {%- set returned = select_columns | map(attribute='name') | list -%}
  {%- set data = [] -%}
  {%- for c in vcmt._data_columns(cfg, columns) if c in returned -%}{%- do data.append(c) -%}{%- endfor -%}
  {{ return(data) }}
{% endmacro %}


{#- When every column's policy is `replace` and deletes are versioned, a key's
    batch of events folds to its last event (by version; a delete wins a tie):
    one INSERT, no helper table. Otherwise the outcome depends on intermediate
    states (merge policies; an unconditional delete of version 0 still removes
    a row that a later event of the batch re-sends), so events are ranked per
    key and applied in rounds, one event per key per INSERT.

    A load killed half-way leaves the target exact (each INSERT applies whole
    events, and every event is version-guarded), and rerunning the same input
    applies only what is missing. A `m__batch` left by such a load is replaced. -#}
{% macro _load_events(cfg, objs, columns, select_columns, sql) %}
  {%- set events_sql = vcmt._normalized_events_sql(cfg, columns, select_columns, sql) -%}
  {%- set data = vcmt._loaded_data_columns(cfg, columns, select_columns) -%}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set wm = vcmt._highest_as_text(vcmt._quote(cfg.watermark)) if cfg.watermark else 'cast(null as Nullable(String))' -%}

  {%- if cfg.foldable -%}
    {%- set stats = run_query('select count(), countIf(_vcmt_sign < 0), uniqExact(' ~ keys ~ '), ' ~ wm ~ ' from (' ~ events_sql ~ ') ' ~ vcmt._read_settings()).rows[0] -%}
    {%- if stats[0] | int > 0 and cfg.virtual_shards == 1 -%}
      {%- call statement('vcmt_load') -%}{{ vcmt._fold_insert_sql(cfg, objs, data, events_sql) }}{%- endcall -%}
    {%- elif stats[0] | int > 0 -%}
      {%- do vcmt._load_folded_in_shards(cfg, objs, data, events_sql, stats[2] | int) -%}
    {%- endif -%}
    {{ return({'events': stats[0] | int, 'deletes': stats[1] | int, 'fed': stats[2] | int,
               'rounds': 1 if stats[0] | int > 0 else 0, 'watermark': stats[3],
               'virtual_shards': cfg.virtual_shards if stats[0] | int > 0 else 1}) }}
  {%- endif -%}

  {{ return(vcmt._load_in_rounds(cfg, objs, columns, data, events_sql)) }}
{% endmacro %}


{#- The fold's INSERT: each key's last event (docs/design.md#fold-or-rounds). -#}
{% macro _fold_insert_sql(cfg, objs, data, events_sql) %}
  insert into {{ vcmt._all_shards(objs, 'stage') }} ({{ vcmt._column_list(cfg.key_columns + data + [cfg.version, cfg.sign]) }})
  {{ vcmt._fold_select_sql(cfg, data, events_sql) }}
  {{ vcmt._stage_insert_settings(cfg) }}
{% endmacro %}


{#- Each key's last event. LIMIT 1 BY over a sort is about twice as fast as
    argMax over a tuple here, and hands the transform its events in key
    order, so the target's part writer finds them (nearly) sorted. -#}
{% macro _fold_select_sql(cfg, data, events_sql) %}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set v = vcmt._quote(cfg.version) -%}
  select {{ keys }}{% for c in data %}, {{ vcmt._quote(c) }}{% endfor %}, {{ v }}, _vcmt_sign
  from ({{ events_sql }})
  order by {{ keys }}, {{ v }} desc, _vcmt_sign asc
  limit 1 by {{ keys }}
{% endmacro %}


{#- The fold on K virtual shards (docs/design.md#virtual-shards): the folded
    events are written once into `m__batch` as round 1, in key order with
    their position (the SELECT is read once, so a SELECT reading the model
    sees it as before the load); then each shard inserts one range of
    positions, i.e. of keys, from there. `keys` is the batch's number of
    distinct keys (the stats query counted it): the folded batch's rows. -#}
{% macro _load_folded_in_shards(cfg, objs, data, events_sql, keys) %}
  {%- call statement('vcmt_batch_replace') -%}{{ vcmt._drop_sql(objs.batch) }}{%- endcall -%}
  {%- call statement('vcmt_batch') -%}
    create table {{ objs.batch }} engine = MergeTree order by tuple() as
    select *, toUInt64(1) as _vcmt_round, rowNumberInAllBlocks() as _vcmt_pos from ({{ vcmt._fold_select_sql(cfg, data, events_sql) }})
    {{ vcmt._stage_insert_settings(cfg) }}
  {%- endcall -%}
  {%- set k = cfg.virtual_shards -%}
  {%- set statements = [] -%}
  {%- for i in range(k) -%}
    {%- do statements.append(vcmt._round_insert_sql(cfg, objs, data, 1, vcmt._range_shard_condition(i, k, keys))) -%}
  {%- endfor -%}
  {%- do vcmt._run_sharded(statements) -%}
  {%- call statement('vcmt_batch_drop') -%}{{ vcmt._drop_sql(objs.batch) }}{%- endcall -%}
{% endmacro %}


{#- The totals of `m__applied`, and with `watermark_sql` that expression too
    (one query after a load instead of two). -#}
{% macro _applied_totals(objs, watermark_sql=none) %}
  {%- set row = run_query(vcmt._applied_totals_sql(objs, watermark_sql)).rows[0] -%}
  {{ return({'inserted': row[0] | int, 'updated': row[1] | int, 'deleted': row[2] | int,
             'watermark': row[3] if watermark_sql else none}) }}
{% endmacro %}


{% macro _applied_totals_sql(objs, watermark_sql=none) %}
  {{ return('select sum(inserted), sum(updated), sum(deleted)' ~ (', ' ~ watermark_sql if watermark_sql else '')
            ~ ' from ' ~ vcmt._all_shards(objs, 'applied') ~ ' ' ~ vcmt._read_settings()) }}
{% endmacro %}


{#- SQL for the watermark to record after loading a batch whose highest
    watermark value is `batch_max`: the greater of it and the highest recorded
    so far, compared as the column's type in the target (the type `batch_max`
    was read as), so a backfill of older batches never lowers it. A recorded
    value that no longer fits that type (the watermark moved to another
    column) is ignored. none when the batch had no rows: an empty run records
    nothing. -#}
{% macro _next_watermark_sql(cfg, objs, columns, select_columns, batch_max) %}
  {%- if batch_max is none -%}{{ return(none) }}{%- endif -%}
  {%- set typed = (columns + select_columns) | selectattr('name', 'equalto', cfg.watermark) | first -%}
  {%- set scalar = vcmt._sql_string(vcmt._scalar_type(typed.data_type) or 'String') -%}
  {%- set batch = vcmt._sql_string(batch_max) -%}
  {%- set previous = '(' ~ vcmt._recorded_watermark_sql(objs) ~ ')' -%}
  {{ return('ifNull((select toString(max(_vcmt_x)) from (select arrayJoin([accurateCastOrNull(' ~ batch ~ ', ' ~ scalar ~ '), accurateCastOrNull('
            ~ previous ~ ', ' ~ scalar ~ ')]) as _vcmt_x)), ' ~ batch ~ ')') }}
{% endmacro %}


{#- The highest watermark recorded in `<model>__loads`, as text, or none.
    Every recorded value is the running maximum, so the latest one is it. -#}
{% macro _recorded_watermark(objs) %}
  {%- set rows = run_query(vcmt._recorded_watermark_sql(objs) ~ ' ' ~ vcmt._read_settings()).rows -%}
  {{ return(rows[0][0] if rows | length > 0 else none) }}
{% endmacro %}

{% macro _recorded_watermark_sql(objs) %}
  {{ return('select watermark from ' ~ vcmt._all_shards(objs, 'loads') ~ ' where watermark is not null order by loaded_at desc limit 1') }}
{% endmacro %}


{#- An aggregate: the highest value of `expr` as text, NULL over no rows
    (max() over nothing is the type's default, not "no value"). -#}
{% macro _highest_as_text(expr) %}
  {{ return('if(count() = 0, null, toString(max(' ~ expr ~ ')))') }}
{% endmacro %}


{#- Apply the model's SELECT through the stage and record what happened in
    `<model>__loads`. Returns the run's stats. -#}
{% macro _load(cfg, objs, columns, select_columns, sql) %}
  {%- set started = modules.datetime.datetime.now() -%}
  {%- set sql = vcmt._unsent_as_defaults(cfg, objs, columns, select_columns, sql) -%}
  {#- Every value is checked before the first write, truncates included. -#}
  {%- do vcmt._check_event_values(cfg, columns, select_columns, vcmt._without_truncates(cfg, sql), 'vcmt_upsert ' ~ objs.target.identifier) -%}
  {%- set before = vcmt._applied_totals(objs) -%}
  {%- set truncated = vcmt._apply_truncates(cfg, objs, columns, select_columns, sql) -%}
  {%- set fed = vcmt._load_events(cfg, objs, columns, select_columns, truncated.sql) -%}
  {#- With truncates, the watermark is the highest over every row read, ignored ones included. -#}
  {%- set batch_watermark = truncated.watermark if cfg.truncate_when else fed.watermark -%}
  {%- set after = vcmt._applied_totals(objs, vcmt._next_watermark_sql(cfg, objs, columns, select_columns, batch_watermark)) -%}
  {%- set stats = {
      'events': fed.events,
      'upserts': fed.events - fed.deletes,
      'deletes': fed.deletes,
      'fed': fed.fed,
      'superseded': fed.events - fed.fed,
      'rounds': fed.rounds,
      'virtual_shards': fed.virtual_shards,
      'inserted': after.inserted - before.inserted,
      'updated': after.updated - before.updated,
      'deleted': after.deleted - before.deleted,
      'watermark': after.watermark,
      'truncates': truncated.truncates,
      'truncated_to': truncated.truncated_to,
      'truncated_rows': truncated.truncated_rows,
      'ignored_below_truncate': truncated.ignored,
  } -%}
  {%- do stats.update({
      'skipped': stats.fed - stats.inserted - stats.updated - (stats.deleted - stats.truncated_rows),
      'rows_written': stats.inserted + 2 * stats.updated + stats.deleted,
      'seconds': (modules.datetime.datetime.now() - started).total_seconds(),
  }) -%}
  {%- if stats.events > 0 or stats.truncates > 0 or stats.ignored_below_truncate > 0 -%}
    {%- call statement('vcmt_log_load') -%}
      insert into {{ objs.loads }}
      select now64(3), {{ vcmt._sql_string(invocation_id) }}, {{ stats.events }}, {{ stats.upserts }}, {{ stats.deletes }},
        {{ stats.fed }}, {{ stats.rounds }}, {{ stats.inserted }}, {{ stats.updated }}, {{ stats.deleted }},
        {{ stats.skipped }}, {{ stats.rows_written }},
        {{ vcmt._sql_string(stats.watermark) if stats.watermark is not none else 'null' }},
        {{ stats.seconds }}
    {%- endcall -%}
  {%- endif -%}
  {{ return(stats) }}
{% endmacro %}


{#- With `unavailable_column`, a column an event did not send carries no value
    (Debezium's staging leaves it NULL), even in a non-Nullable column: it is
    replaced by its type's default before the checks and the load, and the
    transform keeps the stored value for it (docs/design.md#unsent-columns).
    The list must be a column of the target: a model that adds it later needs
    on_schema_change to add it (or --full-refresh). -#}
{% macro _unsent_as_defaults(cfg, objs, columns, select_columns, sql) %}
  {%- set u = cfg.unavailable_column -%}
  {%- if not u -%}{{ return(sql) }}{%- endif -%}
  {%- set stored = columns | map(attribute='name') | list -%}
  {%- if u not in stored -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert " ~ objs.target.identifier ~ ": `unavailable_column` `" ~ u ~ "` is not a column of the target, so unsent columns cannot be recognised and would be overwritten; nothing was loaded. Add the column with on_schema_change='append_new_columns' (or run with --full-refresh).") }}
  {%- endif -%}
  {%- set input_types = {} -%}
  {%- for c in select_columns -%}{%- do input_types.update({c.name: c.data_type}) -%}{%- endfor -%}
  {%- set replaced = [] -%}
  {%- for c in columns if c.name in input_types and c.name in vcmt._data_columns(cfg, columns) and c.name != u -%}
    {%- set col = vcmt._quote(c.name) -%}
    {#- The target type's default, as the input's (non-Nullable) type, so it converts back exactly. -#}
    {%- set default = 'cast(defaultValueOfTypeName(' ~ vcmt._sql_string(vcmt._scalar_type(c.data_type) or c.data_type) ~ '), '
                      ~ vcmt._sql_string(vcmt._scalar_type(input_types[c.name]) or input_types[c.name]) ~ ')' -%}
    {%- do replaced.append('if(has(' ~ vcmt._quote(u) ~ ', ' ~ vcmt._sql_string(c.name) ~ '), ' ~ default ~ ', ' ~ col ~ ') as ' ~ col) -%}
  {%- endfor -%}
  {%- if not replaced -%}{{ return(sql) }}{%- endif -%}
  {{ return('select * replace (' ~ replaced | join(', ') ~ ') from (' ~ vcmt._user_sql(sql) ~ ') as _vcmt_unsent') }}
{% endmacro %}
