{#- The loader (docs/design.md#loader): the model's SELECT, checked, cut at
    the truncate floor, normalised (events.sql) and applied through the stage,
    folded (fold.sql) or in rounds (load_rounds.sql); then the run report
    (report.sql) and the watermark (watermark.sql). -#}


{#- When every column's policy is `replace` and deletes are versioned, a key's
    batch of events folds to its last event (by version; a delete wins a tie):
    one INSERT (on virtual shards, through a batch table and a fan-out:
    virtual_shards.sql). Otherwise the outcome depends on intermediate
    states (merge policies; an unconditional delete of version 0 still removes
    a row that a later event of the batch re-sends), so events are ranked per
    key and applied in rounds, one event per key per INSERT.

    A load killed half-way leaves the target exact (each INSERT applies whole
    events, and every event is version-guarded), and rerunning the same input
    applies only what is missing. A `m__batch` left by such a load is replaced. -#}
{% macro _load_events(cfg, objs, columns, select_columns, sql, rebuild=false) %}
  {%- set events_sql = vcmt._normalized_events_sql(cfg, columns, select_columns, sql) -%}
  {%- set data = vcmt._loaded_data_columns(cfg, columns, select_columns) -%}
  {%- set keys = vcmt._column_list(cfg.key_columns) -%}
  {%- set wm = vcmt._highest_as_text(vcmt._quote(cfg.watermark))
      if cfg.watermark else 'cast(null as Nullable(String))' -%}

  {%- if cfg.foldable -%}
    {%- set stats_sql = 'select count(), countIf(_vcmt_sign < 0), uniqExact(' ~ keys ~ '), ' ~ wm
        ~ ", getSetting('max_threads') from (" ~ events_sql ~ ') ' ~ vcmt._read_settings(holder_of=objs.target) -%}
    {%- set stats = run_query(stats_sql).rows[0] -%}
    {%- set ran = [stats_sql] -%}
    {%- set k = vcmt._virtual_shards_of(cfg, stats[2] | int, true, rebuild, stats[4]) if stats[0] | int > 0 else 1 -%}
    {%- if stats[0] | int > 0 and k == 1 -%}
      {%- set insert_sql = vcmt._fold_insert_sql(cfg, objs, data, events_sql) -%}
      {%- call statement('vcmt_load') -%}{{ insert_sql }}{%- endcall -%}
      {%- do ran.append(insert_sql) -%}
    {%- elif stats[0] | int > 0 -%}
      {%- do ran.extend(vcmt._load_folded_in_shards(cfg, objs, data, events_sql, stats[2] | int, k)) -%}
    {%- endif -%}
    {{ return({'events': stats[0] | int, 'deletes': stats[1] | int, 'fed': stats[2] | int,
               'rounds': 1 if stats[0] | int > 0 else 0, 'watermark': stats[3],
               'virtual_shards': k, 'sql': ran}) }}
  {%- endif -%}

  {{ return(vcmt._load_in_rounds(cfg, objs, columns, data, events_sql)) }}
{% endmacro %}


{#- Apply the model's SELECT through the stage and record what happened in
    `<model>__loads`. Returns the run's stats. The caller holds the model's
    lock (lock.sql), or names the load in `lock_for` to take it here, once
    the values are checked: a refused input then never holds the lock; such
    a load also refuses a model whose full refresh stopped mid-swap
    (_refuse_interrupted_swap). An
    external load (`vcmt.load_stage`) passes `move_watermark=false` unless
    asked (docs/design.md#watermark). -#}
{% macro _load(cfg, objs, columns, select_columns, sql, lock_for=none, move_watermark=true, obs=none, placed=none,
                rebuild=false) %}
  {%- set started = modules.datetime.datetime.now() -%}
  {%- set sql = vcmt._unsent_as_defaults(cfg, objs, columns, select_columns, sql) -%}
  {#- Every value is checked before the first write, truncates included. Every statement that reads the
      SELECT carries the load's name (settings.sql `_holder_settings`): a long read keeps the lock alive as a
      long write does. -#}
  {%- do vcmt._check_event_values(cfg, columns, select_columns, vcmt._without_truncates(cfg, sql), 'vcmt_upsert '
      ~ objs.target.identifier, holder_of=objs.target) -%}
  {%- if lock_for -%}
    {%- do vcmt._acquire_lock(cfg, objs, lock_for) -%}
    {%- do vcmt._refuse_interrupted_swap(cfg, objs, columns, lock_for) -%}
  {%- else -%}
    {%- do vcmt._renew_lock(cfg, objs) -%}
  {%- endif -%}
  {#- Under the lock, before the first write (sharding.sql `_checked_placement`): the caller's check, or here; the
      one recorded is the one checked. -#}
  {%- if placed is none -%}
    {%- set placed = vcmt._shard_placement(cfg, objs) -%}
    {%- if vcmt._placement_changed(placed) -%}
      {%- do vcmt._refuse_under_lock(objs, vcmt._placement_refusal(objs, placed, (lock_for or 'vcmt_upsert') ~ ' '
          ~ vcmt._public_relation(objs).identifier)) -%}
    {%- endif -%}
  {%- endif -%}
  {#- The change feed's first step, before any write (changes.sql). -#}
  {%- do vcmt._prepare_changes(cfg, objs) -%}
  {#- The run's observation read them before it took the lock, which no load has held since (observe.sql). -#}
  {%- set before = vcmt._applied_totals(objs) if not obs or not obs.get('applied') else {
      'inserted': obs.applied[0].inserted | int, 'updated': obs.applied[0].updated | int,
      'deleted': obs.applied[0].deleted | int} -%}
  {%- set truncated = vcmt._apply_truncates(cfg, objs, columns, select_columns, sql) -%}
  {%- set fed = vcmt._load_events(cfg, objs, columns, select_columns, truncated.sql, rebuild) -%}
  {#- With truncates, the watermark is the highest over every row read, ignored ones included. -#}
  {%- set batch_watermark = truncated.watermark if cfg.truncate_when else fed.watermark -%}
  {%- set recorded = batch_watermark if move_watermark else none -%}
  {#- A load that wrote nothing and moves no watermark leaves the totals as they were: not read again. -#}
  {%- if fed.rounds > 0 or truncated.get('ran') or recorded is not none -%}
    {%- set after = vcmt._applied_totals(objs, vcmt._next_watermark_sql(cfg, objs, columns, select_columns,
        recorded)) -%}
  {%- else -%}
    {%- set after = {'inserted': before.inserted, 'updated': before.updated, 'deleted': before.deleted,
                     'watermark': none} -%}
  {%- endif -%}
  {%- set truncated_rows = truncated.truncated_rows -%}
  {%- set stats = {
      'events': fed.events + truncated.ignored,
      'upserts': fed.events - fed.deletes + truncated.ignored - truncated.ignored_deletes,
      'deletes': fed.deletes + truncated.ignored_deletes,
      'fed': fed.fed,
      'superseded': fed.events - fed.fed,
      'rounds': fed.rounds,
      'virtual_shards': fed.virtual_shards,
      'inserted': after.inserted - before.inserted,
      'updated': after.updated - before.updated,
      'deleted': after.deleted - before.deleted - truncated_rows,
      'watermark': after.watermark,
      'watermark_not_moved': batch_watermark if cfg.watermark and not move_watermark else none,
      'watermark_column': cfg.watermark,
      'truncates': truncated.truncates,
      'truncated_to': truncated.truncated_to,
      'truncated_rows': truncated_rows,
      'ignored_below_truncate': truncated.ignored,
  } -%}
  {#- The report's numbers add up (README "What each run reports"). -#}
  {%- do stats.update({
      'skipped': stats.fed - stats.inserted - stats.updated - stats.deleted,
      'rows_written': stats.inserted + 2 * stats.updated + stats.deleted + truncated_rows,
      'seconds': (modules.datetime.datetime.now() - started).total_seconds(),
      'sql': truncated.get('ran', []) + fed.sql,
      'shards': placed.now,
  }) -%}
  {#- Every load is recorded, an empty one too: `<model>__loads` is the run history. -#}
  {%- do vcmt._record_load(objs, stats) -%}
  {{ return(stats) }}
{% endmacro %}
