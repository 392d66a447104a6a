{#- vcmt_upsert: keep a VersionedCollapsingMergeTree table in step with the
    change events the model's SELECT returns. See README "How it works". -#}
{% materialization vcmt_upsert, adapter='clickhouse' %}
  {%- set cfg = vcmt._read_config() -%}
  {%- set target = this.incorporate(type='table') -%}
  {%- set objs = vcmt.objects(target, cfg.sharding_key) -%}
  {%- set existing = load_cached_relation(this) -%}
  {%- set rebuild = existing is none or should_full_refresh() -%}

  {#- Everything about the SELECT is checked before any DDL, from one
      observation of the model's objects (engine/observe.sql). -#}
  {%- do vcmt._check_contract(sql) -%}
  {%- set select_columns = adapter.get_column_schema_from_query(sql) -%}
  {%- set columns = vcmt._target_columns(cfg, select_columns) -%}
  {%- set cfg = vcmt._sorting_key_default(cfg, columns, none if rebuild else objs.target) -%}
  {%- set obs = vcmt._observe_model(cfg, objs, columns, rebuild, vcmt._syntax_probes(cfg)) -%}
  {%- do vcmt._check_syntax(cfg, target, obs) -%}
  {#- A stored model's `sharding_key` was checked when it was built: a changed one is refused below (stored layout). -#}
  {%- if rebuild -%}{%- do vcmt._check_sharding_key(cfg, columns, target) -%}{%- endif -%}
  {%- do vcmt._check_projections(cfg) -%}
  {%- set found = obs.found -%}
  {#- A --full-refresh that stopped while it swapped its tables in leaves
      the nodes serving other tables than `found` says: the stored layout
      is checked once the swap is finished or refused (under the lock). -#}
  {%- set interrupted = none if rebuild else vcmt._interrupted_swap(cfg, objs, columns, obs.nodes) -%}
  {%- set swapping = interrupted is not none and interrupted.state != 'unswapped' -%}
  {#- A model on a cluster is on every node, a --full-refresh's too (lifecycle.sql). -#}
  {%- if existing is not none -%}
    {%- do vcmt._check_on_every_node(objs, 'vcmt_upsert ' ~ target.identifier, obs) -%}
  {%- endif -%}
  {%- if not rebuild -%}
    {%- do vcmt._check_existing_is_vcmt(objs, found) -%}
    {%- if not swapping -%}{%- do vcmt._check_stored_layout(cfg, objs, columns, found, obs) -%}{%- endif -%}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {#- A first run or full refresh checks its DDL with the engine (on temporary
      tables) before taking the lock, so a bad config leaves nothing behind. -#}
  {%- if rebuild -%}
    {%- do vcmt._check_build(cfg, objs, columns) -%}
  {%- endif -%}
  {#- One load of the model at a time, from its first DDL to its last write (lock.sql). A load that waited for
      another, or took its lock over, observes again: the other may have changed the model's objects. -#}
  {%- set lock = vcmt._acquire_lock(cfg, objs, 'dbt run', obs) -%}
  {%- if lock.waited -%}
    {%- set cfg = vcmt._sorting_key_default(cfg, columns, none if rebuild else objs.target) -%}
    {%- set obs = vcmt._observe_model(cfg, objs, columns, rebuild, vcmt._syntax_probes(cfg)) -%}
    {%- set found = obs.found -%}
  {%- endif -%}
  {#- A sharded model's placement, before the run's first DDL or write (sharding.sql). -#}
  {%- set placed = none if rebuild
      else vcmt._checked_placement(cfg, objs, found, 'vcmt_upsert ' ~ target.identifier) -%}
  {#- The lake files this load reads, claimed under the lock (lake_files.sql). Renewed around it: its reads are
      many and carry no name (lock.sql `_renew_lock`). -#}
  {%- do vcmt._renew_lock(cfg, objs) -%}
  {%- do vcmt._claim_lake_files(cfg, objs, sql, rebuild) -%}
  {%- do vcmt._renew_lock(cfg, objs) -%}
  {#- Both paths check their DDL with the engine before changing anything
      (check.sql); schema changes are planned whole first (schema_changes.sql). -#}
  {%- set load_into = objs -%}
  {%- set downstream = [] -%}
  {%- if rebuild -%}
    {%- set downstream = vcmt._downstream_views(objs) if objs.target.identifier in found else [] -%}
    {%- set load_into = vcmt._build_objects(cfg, objs, columns, found, vcmt._leftovers_in(objs, obs.nodes)) -%}
  {%- else -%}
    {#- Finished on every node, or refused naming the nodes, before any write (lifecycle.sql). -#}
    {%- if vcmt._finish_interrupted_swap(cfg, objs, columns, obs.nodes, found) or swapping -%}
      {#- The catalog changed: observed again, once. The target may now be the rebuild's: its sorting key
          decides the default again. -#}
      {%- set cfg = vcmt._sorting_key_default(cfg, columns, objs.target) -%}
      {%- set obs = vcmt._observe_model(cfg, objs, columns, rebuild, vcmt._syntax_probes(cfg)) -%}
      {%- set found = obs.found -%}
      {%- do vcmt._check_stored_layout(cfg, objs, columns, found, obs) -%}
    {%- endif -%}
    {%- set reconciled = vcmt._reconcile_objects(cfg, objs, columns, found, obs) -%}
    {#- The config the load runs with: the plan's merge policies for kept columns. -#}
    {%- set cfg = reconciled.cfg -%}
    {%- set columns = reconciled.columns -%}
  {%- endif -%}

  {%- set stats = vcmt._load(cfg, load_into, columns, select_columns, sql, obs=none if rebuild else obs,
      placed=placed, rebuild=rebuild) -%}
  {#- A full refresh loads beside the old tables and swaps last: a failed load leaves the old data serving. -#}
  {%- if load_into.target.identifier != objs.target.identifier -%}
    {%- do vcmt._swap_in_new_objects(cfg, objs, load_into, columns, found) -%}
  {%- endif -%}
  {#- Under the lock: the views on the old table now feed totals of rows that are gone (aggregate.sql). -#}
  {%- do vcmt._rebuild_downstream_views(cfg, objs, downstream) -%}
  {%- do vcmt._release_lock(objs.target) -%}
  {%- set summary = vcmt._summary(stats) -%}
  {{ log('vcmt_upsert ' ~ target.identifier ~ vcmt._modes_note(cfg) ~ ': ' ~ summary, info=true) }}
  {#- The whole report is the model's result (its status line, run_results.json's message): dbt-clickhouse's
      AdapterResponse has no other field for it (README, "What each run reports"). -#}
  {%- do store_raw_result('main', message=summary, code='VCMT_UPSERT', rows_affected=stats.rows_written) -%}
  {%- do vcmt._write_run_sql(target, stats) -%}

  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {%- do adapter.commit() -%}
  {#- `grants` go to the model alone, never to its helpers (docs/operations.md, "Readers and BI tools"). A
      sharded model's per-shard table gets them too, as dbt-clickhouse's distributed materializations grant it:
      a Distributed table's read of its own node's shard checks the reader's privileges there. -#}
  {%- set grant_config = config.get('grants') -%}
  {%- set revoke = should_revoke(existing, full_refresh_mode=rebuild) -%}
  {%- if vcmt._sharded(objs) -%}{%- do apply_grants(objs.target, grant_config, should_revoke=revoke) -%}{%- endif -%}
  {%- do apply_grants(target, grant_config, should_revoke=revoke) -%}
  {%- do persist_docs(target, model) -%}
  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target]}) }}
{% endmaterialization %}
