{#- The model's events with the sign normalised to +1 (upsert) / -1 (delete)
    in `_vcmt_sign`; a SELECT without a sign column is all upserts. -#}
{% macro _normalized_events_sql(cfg, columns, select_columns, sql) %}
  {%- set has_sign = cfg.sign in (select_columns | map(attribute='name') | list) -%}
  {%- set sign_expr = 'if(' ~ adapter.quote(cfg.sign) ~ ' < 0, toInt8(-1), toInt8(1))' if has_sign else 'toInt8(1)' -%}
  {%- set cols = cfg.key_columns + vcmt._loaded_data_columns(cfg, columns, select_columns) + [cfg.version] -%}
  select {{ vcmt._column_list(cols) }}, _vcmt_sign
  from (select *, {{ sign_expr }} as _vcmt_sign from ({{ sql }}) as _vcmt_src)
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


{#- Settings for every INSERT into the stage. Blocks from one INSERT must not
    be dropped as duplicates of each other; the transform's FINAL lookup may
    stay within partitions (a cancel row lands in its old row's partition); and
    the transform never writes both signs of one (key, version) in a block, so
    collapsing on insert would only cost time. -#}
{% macro _stage_insert_settings(cfg) %}
  {%- set settings = {'insert_deduplicate': 0, 'do_not_merge_across_partitions_select_final': 1,
                      'optimize_on_insert': 0} -%}
  {%- do settings.update(cfg.insert_settings) -%}
  {%- set parts = [] -%}
  {%- for k, v in settings.items() -%}{%- do parts.append(k ~ ' = ' ~ (("'" ~ v ~ "'") if v is string else v)) -%}{%- endfor -%}
  {{ return('settings ' ~ parts | join(', ')) }}
{% endmacro %}


{#- When every column's policy is `replace` and deletes are versioned, a key's
    batch of events folds to its last event (by version; a delete wins a tie):
    one INSERT, no helper table. Otherwise the outcome depends on intermediate
    states (merge policies; an unconditional delete of version 0 still removes
    a row that a later event of the batch re-sends), so events are ranked per
    key and applied in rounds, one event per key per INSERT. -#}
{% macro _load_events(cfg, objs, columns, select_columns, sql) %}
  {%- set events_sql = vcmt._normalized_events_sql(cfg, columns, select_columns, sql) -%}
  {%- set data = vcmt._loaded_data_columns(cfg, columns, select_columns) -%}
  {%- set stage_cols = vcmt._column_list(cfg.key_columns + data + [cfg.version, cfg.sign]) -%}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set v = adapter.quote(cfg.version) -%}
  {%- set wm = 'toString(max(' ~ adapter.quote(cfg.watermark) ~ '))' if cfg.watermark else 'cast(null as Nullable(String))' -%}

  {%- if cfg.foldable -%}
    {%- set stats = run_query('select count(), countIf(_vcmt_sign < 0), uniqExact(' ~ keys ~ '), ' ~ wm ~ ' from (' ~ events_sql ~ ')').rows[0] -%}
    {%- if stats[0] | int > 0 -%}
      {#- LIMIT 1 BY over a sort is about twice as fast as argMax over a tuple
          here, and hands the transform its events in key order, so the target's
          part writer finds them (nearly) sorted. -#}
      {%- call statement('vcmt_load') -%}
        insert into {{ objs.stage }} ({{ stage_cols }})
        select {{ keys }}{% for c in data %}, {{ adapter.quote(c) }}{% endfor %}, {{ v }}, _vcmt_sign
        from ({{ events_sql }})
        order by {{ keys }}, {{ v }} desc, _vcmt_sign asc
        limit 1 by {{ keys }}
        {{ vcmt._stage_insert_settings(cfg) }}
      {%- endcall -%}
    {%- endif -%}
    {{ return({'events': stats[0] | int, 'deletes': stats[1] | int, 'fed': stats[2] | int,
               'rounds': 1 if stats[0] | int > 0 else 0, 'watermark': stats[3]}) }}
  {%- endif -%}

  {%- call statement('vcmt_batch') -%}
    create table {{ objs.batch }} engine = MergeTree order by _vcmt_round as
    select *, row_number() over (partition by {{ keys }} order by {{ v }} asc, _vcmt_sign desc) as _vcmt_round
    from ({{ events_sql }} limit 1 by {{ keys }}, {{ v }}, _vcmt_sign)
  {%- endcall -%}
  {%- set stats = run_query('select (select count() from (' ~ events_sql ~ ')), countIf(_vcmt_sign < 0), count(), max(_vcmt_round), ' ~ wm ~ ' from ' ~ objs.batch).rows[0] -%}
  {%- set rounds = stats[3] | int -%}
  {%- for r in range(1, rounds + 1) -%}
    {%- if r % 50 == 0 -%}
      {{ log('vcmt_upsert ' ~ objs.target.identifier ~ ': round ' ~ r ~ ' of ' ~ rounds, info=true) }}
    {%- endif -%}
    {%- call statement('vcmt_load_round') -%}
      insert into {{ objs.stage }} ({{ stage_cols }})
      select {{ keys }}{% for c in data %}, {{ adapter.quote(c) }}{% endfor %}, {{ v }}, _vcmt_sign
      from {{ objs.batch }}
      where _vcmt_round = {{ r }}
      {{ vcmt._stage_insert_settings(cfg) }}
    {%- endcall -%}
  {%- endfor -%}
  {%- call statement('vcmt_batch_drop') -%}
    drop table if exists {{ objs.batch }}
  {%- endcall -%}
  {{ return({'events': stats[0] | int, 'deletes': stats[1] | int, 'fed': stats[2] | int,
             'rounds': rounds, 'watermark': stats[4]}) }}
{% endmacro %}


{% macro _applied_totals(objs) %}
  {%- set row = run_query('select sum(inserted), sum(updated), sum(deleted) from ' ~ objs.applied).rows[0] -%}
  {{ return({'inserted': row[0] | int, 'updated': row[1] | int, 'deleted': row[2] | int}) }}
{% endmacro %}


{#- Apply the model's SELECT through the stage and record what happened in
    `<model>__loads`. Returns the run's stats. -#}
{% macro _load(cfg, objs, columns, select_columns, sql) %}
  {%- set started = modules.datetime.datetime.now() -%}
  {%- set before = vcmt._applied_totals(objs) -%}
  {%- set fed = vcmt._load_events(cfg, objs, columns, select_columns, sql) -%}
  {%- set after = vcmt._applied_totals(objs) -%}
  {%- set stats = {
      'events': fed.events,
      'upserts': fed.events - fed.deletes,
      'deletes': fed.deletes,
      'fed': fed.fed,
      'superseded': fed.events - fed.fed,
      'rounds': fed.rounds,
      'inserted': after.inserted - before.inserted,
      'updated': after.updated - before.updated,
      'deleted': after.deleted - before.deleted,
      'watermark': fed.watermark,
  } -%}
  {%- do stats.update({
      'skipped': stats.fed - stats.inserted - stats.updated - stats.deleted,
      'rows_written': stats.inserted + 2 * stats.updated + stats.deleted,
      'seconds': (modules.datetime.datetime.now() - started).total_seconds(),
  }) -%}
  {%- call statement('vcmt_log_load') -%}
    insert into {{ objs.loads }}
    select now64(3), '{{ invocation_id }}', {{ stats.events }}, {{ stats.upserts }}, {{ stats.deletes }},
      {{ stats.fed }}, {{ stats.rounds }}, {{ stats.inserted }}, {{ stats.updated }}, {{ stats.deleted }},
      {{ stats.skipped }}, {{ stats.rows_written }},
      {{ "'" ~ (stats.watermark | replace("'", "\\'")) ~ "'" if stats.watermark is not none else 'null' }},
      {{ stats.seconds }}
  {%- endcall -%}
  {{ return(stats) }}
{% endmacro %}
