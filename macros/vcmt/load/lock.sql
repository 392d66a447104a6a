{#- One load of a model at a time (docs/design.md#one-load-at-a-time).

    Two loads of one model that overlap (a scheduler's retry, a backfill, a
    second developer, `dbt run` beside `vcmt-load-stage`) would both look up
    the same live row and both cancel it. Every load therefore holds the
    model's lock from its first DDL to its last write.

    ClickHouse has no lock statement; what it does make atomic is an
    INSERT's deduplication: of several INSERTs that carry the same
    `insert_deduplication_token` into one table, exactly one writes its row
    and the others write nothing. The lock is the table `<model>__lock`,
    whose rows say who claimed each generation `gen` of the lock and what
    happened to it (claimed as `acquired`, `renewed`, `released`). A load
    takes the lock by claiming generation n+1, its token naming that
    generation, when generation n is released, or stale: silent for the
    lease (_lock_lease_s) and none of its holder's statements running. Then
    it reads which claim won; loads racing for n+1 all read the same one.
    Taking and holding the lock changes no object: a run sends no DDL for it
    once the table exists.

    The lock is a lease with a fencing token: every write of a load carries
    the fence (`_lock_fence`), which the engine evaluates when the statement
    starts and which fails it unless the newest generation's claim is the
    load's own. A holder that was paused past its lease and taken over can
    therefore write nothing more, whatever it sends. Each of its writes, and
    each read of its SELECT, carries its name as `log_comment`
    (settings.sql `_holder_settings`), which system.processes shows in
    `Settings` uncut and unmasked: a long statement keeps the lock however
    long it takes.

    A failed run stops its loads' statements still running and releases
    their locks in the package's on-run-end hook; a killed one holds it until
    it has been silent for the lease.

    Until vcmt 0.4 the lock was a generation of tables `<model>__lock_<n>`
    (one CREATE per load). A model's first load by this version retires
    them once (_retire_legacy_lock): it waits for a 0.4 load that holds one,
    then creates the generation `_legacy_sentinel` above any a 0.4 load can
    make, which fences out every 0.4 load from then on and names the
    upgrade to any that waits for it. -#}

{#- How long a holder may stay silent (no renewal, no statement running)
    before another load takes the lock over: the project var
    `vcmt_lock_lease_s` (default 30). A shorter lease is safe (a holder taken
    over is fenced out and fails), but a load that pauses for longer, between
    two statements, fails more often. -#}
{% macro _lock_lease_s() %}
  {%- set value = var('vcmt_lock_lease_s', 30) -%}
  {%- if value is not number or value is boolean or value < 1 -%}
    {{ exceptions.raise_compiler_error("vcmt: the project var `vcmt_lock_lease_s` must be a number of seconds (1 or "
        ~ "more) a load may stay silent before another load takes its lock over; got `" ~ value
        ~ "`. Fix it in dbt_project.yml's vars or --vars, e.g. vcmt_lock_lease_s: 30.") }}
  {%- endif -%}
  {{ return(value | int) }}
{% endmacro %}


{#- The `lock_timeout` config: how long a load waits for another load of the
    same model, in seconds (0: fail at once; its default is in model/options.sql).
    A reader of model/options.sql (value, cfg, opt, who). -#}
{% macro _validate_lock_timeout(value, cfg=none, opt=none, who='vcmt_upsert') %}
  {%- if value is not number or value is boolean or value < 0 -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `lock_timeout` must be a number of seconds (0 or more) "
        ~ "a load waits for another load of the same model; got `" ~ value ~ "`. Fix it in the model's config, e.g. "
        ~ "lock_timeout=600.") }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}


{#- The lock's table of the model `target`: `<model>__lock` (model/objects.sql `lock`). -#}
{% macro _lock_relation(target) %}
  {{ return(target.incorporate(path={'identifier': target.identifier ~ vcmt._object_suffix('lock')})) }}
{% endmacro %}


{#- The lock's table: a generation's rows sorted by it (the fence and the
    state read only the newest), and the deduplication log that makes a
    claim atomic (_claim_sql). `at` is the lock node's own time, taken
    where the row is stored (MATERIALIZED): on a cluster every row's time
    and the state's `silent_s` come from one clock, whatever the clock of
    the node a load runs on. -#}
{% macro _create_lock_sql(lock) %}
  create table if not exists {{ lock }} {{ on_cluster_clause(lock) }}
    (gen UInt64, holder String, kind LowCardinality(String), what String, at DateTime64(3) materialized now64(3))
  engine = MergeTree order by gen
  settings non_replicated_deduplication_window = 10000
{% endmacro %}


{#- Who holds a model's lock: this dbt invocation's load of that model
    (`relation` is the model's target, or one of its full refresh's staging
    objects). Every write the load sends while it holds the lock, and every
    read of its SELECT, carries this name as its `log_comment`
    (settings.sql `_holder_settings`), so system.processes shows the load's
    statements whatever a profile, a model or the server sets. Plain ASCII:
    it appears in SQL text as it is. -#}
{% macro _lock_holder(relation) %}
  {%- set model = vcmt._model_relation(relation) -%}
  {{ return('vcmt load by dbt invocation ' ~ invocation_id ~ ' of ' ~ local_md5(model.schema ~ '.'
      ~ model.identifier)[:12]) }}
{% endmacro %}


{#- Where a model's lock lives: on its node, or, for a model on a cluster
    (dbt-clickhouse's `cluster`, the model's tables created ON CLUSTER), on
    the cluster's first shard, which every node reaches: loads through any
    node then serialise on the same tables (docs/design.md#one-load-at-a-time).
    Returns the cluster's name, or none. -#}
{% macro _lock_cluster(target) %}
  {%- set cluster = adapter.get_clickhouse_cluster_name() -%}
  {#- dbt-clickhouse gives the name quoted for ON CLUSTER; cluster() takes it as a string. -#}
  {{ return(vcmt._unquote(cluster) if cluster is not none and target.should_on_cluster else none) }}
{% endmacro %}


{#- `from <this>` for the rows of `lock` (a lock's table), read on the
    lock's node: the table itself, or, on a cluster, the first shard's copy
    through cluster() (the lock's slot as its sharding key, so the read is
    sent there alone and a node without the table is never asked). A
    subquery with its own settings, so it can stand in any statement. -#}
{% macro _lock_rows_source(lock, columns='*') %}
  {%- set cluster = vcmt._lock_cluster(lock) -%}
  {%- set newest = 'select ' ~ columns ~ ' from ' ~ lock ~ ' where gen = (select max(gen) from ' ~ lock ~ ')' -%}
  {%- if cluster is none -%}{{ return('(' ~ newest ~ ')') }}{%- endif -%}
  {{ return('(select * except (_vcmt_slot) from cluster(' ~ vcmt._sql_string(cluster) ~ ', view(select *, '
      ~ vcmt._lock_slot() ~ ' as _vcmt_slot from (' ~ newest ~ ')), _vcmt_slot) where _vcmt_slot = '
      ~ vcmt._lock_slot() ~ vcmt._lock_read_settings(lock, {'optimize_skip_unused_shards': 1,
                                                          'force_optimize_skip_unused_shards': 1}) ~ ')') }}
{% endmacro %}


{#- The fence (docs/design.md#one-load-at-a-time): a scalar the engine
    evaluates once, when the statement starts and before it writes any row.
    It is 0 while this load holds the lock of the model `relation` belongs to
    (the newest generation's claim is this load's name), and otherwise
    fails the statement. Every write of a load goes `where <fence> = 0`. -#}
{% macro _lock_fence(relation) %}
  {%- set model = vcmt._model_relation(relation) -%}
  {%- set me = vcmt._lock_holder(model) -%}
  {%- set message = 'vcmt_upsert ' ~ model.identifier ~ ': this load (' ~ me ~ ') no longer holds the lock of the '
      ~ 'model: '
      ~ 'another load took it over after this one had been silent for ' ~ vcmt._lock_lease_s() ~ ' s. This statement '
      ~ 'was refused before writing anything, and what this load wrote before is exact. Run the model again.' -%}
  {{ return('(select throwIf(' ~ vcmt._holds_sql(me) ~ ' = 0, ' ~ vcmt._sql_string(message) ~ ') from '
      ~ vcmt._lock_rows_source(vcmt._lock_relation(model), 'holder, kind') ~ ')') }}
{% endmacro %}

{#- Over the newest generation's rows: 1 when `me` claimed it. -#}
{% macro _holds_sql(me) %}
  {{ return("ifNull(anyIf(holder, kind = 'acquired'), '') = " ~ vcmt._sql_string(me)) }}
{% endmacro %}


{#- A condition for a load's writes: true while it holds the lock (else the statement fails). -#}
{% macro _fenced(relation) %}{{ return(vcmt._lock_fence(relation) ~ ' = 0') }}{% endmacro %}


{#- DDL takes no WHERE, so a load checks the fence right before each statement that changes the model's
    objects (a full refresh's build and swap, a schema change): a load taken over while it was stopped fails
    there instead of swapping stale tables in. What is left is the instant between the check and the
    statement (docs/design.md, "One load at a time"). -#}
{% macro _check_fence(relation) %}
  {%- do run_query('select ' ~ vcmt._lock_fence(relation)) -%}
{% endmacro %}


{#- The lock of the model `target`, in one read on the lock's node:
    {gen, holder, what, acquired, renewed, released, silent_s, rows} of its
    newest generation (`rows` 0: no load ever took it), and what is left of
    the 0.4 lock (`legacy`: its generation tables other than the sentinel;
    `retired`: whether the sentinel is there). none when the lock's table
    does not exist yet (dbt's relation cache, filled at the run's start, says
    so: a table created since is created again, IF NOT EXISTS); `known`: it
    exists. A run's first read of it is part of its observation (observe.sql). -#}
{% macro _lock_state(target, known=false) %}
  {%- set lock = vcmt._lock_relation(target) -%}
  {%- if not known
      and adapter.get_relation(database=lock.database, schema=lock.schema, identifier=lock.identifier) is none -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set result = run_query(vcmt._lock_state_sql(target)) -%}
  {%- set row = {} -%}
  {%- for name in vcmt._lock_state_fields() -%}{%- do row.update({name: result.rows[0][loop.index0]}) -%}{%- endfor -%}
  {{ return(vcmt._lock_state_row(row, target)) }}
{% endmacro %}

{% macro _lock_state_fields() %}
  {{ return(['gen', 'holder', 'what', 'acquired', 'renewed', 'released', 'silent_s', 'rows', 'legacy', 'retired']) }}
{% endmacro %}

{#- The read of _lock_state: one row of _lock_state_fields. -#}
{% macro _lock_state_sql(target) %}
  {%- set lock = vcmt._lock_relation(target) -%}
  {%- set sentinel = vcmt._sql_string(vcmt._legacy_sentinel(target).identifier) -%}
  {%- set sql = "select l_gen as gen, l_holder as holder, l_what as what, l_acquired as acquired, "
      ~ "l_renewed as renewed, l_released as released, l_silent_s as silent_s, l_rows as rows, l_legacy as legacy, "
      ~ "l_retired as retired "
      ~ "from (select max(gen) as l_gen, anyIf(holder, kind = 'acquired') as l_holder, "
      ~ "anyIf(what, kind = 'acquired') as l_what, toString(minIf(at, kind = 'acquired')) as l_acquired, "
      ~ "toString(max(at)) as l_renewed, countIf(kind = 'released') > 0 as l_released, "
      ~ "dateDiff('second', max(at), now64(3)) as l_silent_s, count() as l_rows from " ~ lock
      ~ " where gen = (select max(gen) from " ~ lock ~ ")) as _vcmt_newest cross join (select countIf(name != "
      ~ sentinel ~ ") as l_legacy, countIf(name = " ~ sentinel ~ ") as l_retired "
      ~ vcmt._legacy_lock_tables_sql(target) ~ ") as _vcmt_legacy" -%}
  {%- set cluster = vcmt._lock_cluster(target) -%}
  {%- if cluster -%}
    {#- Sent to the lock's node only (_lock_rows_source). -#}
    {{ return("select * except (_vcmt_slot) from cluster(" ~ vcmt._sql_string(cluster) ~ ", view(select *, "
        ~ vcmt._lock_slot() ~ " as _vcmt_slot from (" ~ sql ~ ")), _vcmt_slot) where _vcmt_slot = "
        ~ vcmt._lock_slot() ~ vcmt._lock_read_settings(target, {'optimize_skip_unused_shards': 1,
                                                               'force_optimize_skip_unused_shards': 1})) }}
  {%- endif -%}
  {{ return(sql ~ ' ' ~ vcmt._read_settings()) }}
{% endmacro %}

{#- _lock_state from a row of its read, {field: value} (values as the driver or JSON give them). -#}
{% macro _lock_state_row(row, target) %}
  {{ return({'gen': row.gen | int, 'holder': row.holder, 'what': row.what or 'a load', 'acquired': row.acquired,
             'renewed': row.renewed, 'released': row.released | int == 1, 'silent_s': row.silent_s | int,
             'rows': row.rows | int, 'relation': vcmt._lock_relation(target), 'legacy': row.legacy | int,
             'retired': row.retired | int > 0}) }}
{% endmacro %}


{#- Where a lock's rows are written: its table, on the cluster's first
    shard for a model on a cluster (a constant sharding key, the lock's
    slot, sends every row there). -#}
{% macro _lock_rows_into(lock) %}
  {%- set cluster = vcmt._lock_cluster(lock) -%}
  {%- if cluster is none -%}{{ return(lock | string) }}{%- endif -%}
  {{ return('function cluster(' ~ vcmt._sql_string(cluster) ~ ', ' ~ vcmt._sql_string(lock.schema) ~ ', '
            ~ vcmt._sql_string(lock.identifier) ~ ', ' ~ vcmt._lock_slot() ~ ')') }}
{% endmacro %}


{#- The Distributed slot of the lock's rows: 0, the first shard's (slots
    are given out by weight in shard order). -#}
{% macro _lock_slot() %}
  {{ return(0) }}
{% endmacro %}


{#- One row of the lock (`kind`) of the model `relation` belongs to,
    written only while this load holds it (`fenced`: failing the statement
    otherwise, else writing nothing), into the newest generation; on a
    cluster to the first shard's first replica that is up, where the
    lock's reads look (_lock_read_settings). -#}
{% macro _lock_row_sql(kind, what, relation, fenced=true) %}
  {%- set model = vcmt._model_relation(relation) -%}
  {%- set lock = vcmt._lock_relation(model) -%}
  {%- set me = vcmt._lock_holder(model) -%}
  insert into {{ vcmt._lock_rows_into(lock) }} (gen, holder, kind, what)
  select gen, {{ vcmt._sql_string(me) }} as holder, {{ vcmt._sql_string(kind) }} as kind,
    {{ vcmt._sql_string(what) }} as what
  from (select max(gen) as gen, {{ vcmt._holds_sql(me) }} as held from {{ vcmt._lock_rows_source(lock) }})
  where {{ vcmt._fenced(relation) if fenced else 'held' }}
  {%- set settings = {'load_balancing': 'in_order'} if vcmt._lock_cluster(lock) else {} -%}
  {%- do settings.update({'insert_deduplicate': 0, 'deduplicate_insert': 'disable', 'async_insert': 0,
                          'distributed_foreground_insert': 1}) -%}
  {%- do settings.update(vcmt._holder_settings(relation)) %}
  {{ vcmt._settings_clause(settings) }}
{% endmacro %}


{#- The claim of generation `gen` of `lock` by this load (`what` says
    which: 'dbt run', 'vcmt.load_stage'): one INSERT whose deduplication
    token names the generation, so of every load that claims it one row is
    written (docs/design.md#one-load-at-a-time). Forced on for this INSERT:
    a profile may turn deduplication off, or make the INSERT asynchronous. -#}
{% macro _claim_sql(lock, gen, what, model) %}
  insert into {{ vcmt._lock_rows_into(lock) }} (gen, holder, kind, what)
  select {{ gen }} as gen, {{ vcmt._sql_string(vcmt._lock_holder(model)) }} as holder, 'acquired' as kind,
    {{ vcmt._sql_string(what) }} as what
  {%- set settings = {'load_balancing': 'in_order'} if vcmt._lock_cluster(lock) else {} -%}
  {%- do settings.update({'insert_deduplicate': 1, 'deduplicate_insert': 'enable',
                          'deduplicate_insert_select': 'force_enable',
                          'insert_deduplication_token': 'vcmt lock ' ~ lock.identifier ~ ' generation ' ~ gen,
                          'async_insert': 0, 'distributed_foreground_insert': 1}) -%}
  {%- do settings.update(vcmt._holder_settings(model)) %}
  {{ vcmt._settings_clause(settings) }}
{% endmacro %}


{#- Take the lock of the model `objs` belongs to, waiting up to the model's
    `lock_timeout` for another load; `what` says which load this is ('dbt
    run', 'vcmt.load_stage'). Returns the lock's state as this load holds
    it, and names this load's `m__batch` in `objs` by the lock's generation.

    A takeover claims the next generation first, which fences the old
    holder out (its next statement fails at its start), and then waits until
    none of the old holder's statements runs: one that started before the
    claim may still be writing. -#}
{% macro _acquire_lock(cfg, objs, what, obs=none) %}
  {%- set timeout_s = cfg.lock_timeout -%}
  {%- set target = vcmt._model_relation(objs.target) -%}
  {%- set lock = vcmt._lock_relation(target) -%}
  {%- set me = vcmt._lock_holder(target) -%}
  {%- set lease = vcmt._lock_lease_s() -%}
  {%- set state = obs.lock if obs is not none else vcmt._lock_state(target) -%}
  {%- set legacy = false -%}
  {%- if state is none or not state.retired or state.legacy -%}
    {#- Once per model: the lock's table, and the 0.4 lock retired. -#}
    {%- call statement('vcmt_lock_table') -%}{{ vcmt._create_lock_sql(lock) }}{%- endcall -%}
    {%- set legacy = vcmt._retire_legacy_lock(target, timeout_s) -%}
    {%- do adapter.cache_added(lock) -%}
    {%- set state = vcmt._lock_state(target, known=true) -%}
  {%- endif -%}
  {%- set st = namespace(held=none, waited=0, said=false, previous=none, idle=0, idle_holder=none, state=state) -%}
  {%- for attempt in range((timeout_s | int) + 3) if st.held is none -%}
    {%- set state = st.state -%}
    {%- set taken = state.rows > 0 and not state.released -%}
    {#- Stale: silent for the lease, and seen with no statement running at
        two polls a second apart (a live holder is idle only for the
        moments between two of its statements). -#}
    {%- set idle = taken and state.holder != me and state.silent_s >= lease
                   and not vcmt._holder_busy(state.holder, target) -%}
    {%- set st.idle = (st.idle + 1 if state.holder == st.idle_holder else 1) if idle else 0 -%}
    {%- set st.idle_holder = state.holder if idle else none -%}
    {%- if not taken or st.idle >= 2 -%}
      {%- call statement('vcmt_lock') -%}{{ vcmt._claim_sql(lock, state.gen + 1, what, target) }}{%- endcall -%}
      {%- set claimed = vcmt._lock_state(target, known=true) -%}
      {%- if claimed.gen <= state.gen -%}
        {#- No load's claim was written: the engine took it for one it had seen, whose row is gone. -#}
        {{ exceptions.raise_compiler_error("vcmt_upsert " ~ target.identifier ~ ": the claim of generation "
            ~ (state.gen + 1) ~ " of this model's lock was dropped as a repeat of an earlier one: rows of " ~ lock
            ~ " were deleted (a DELETE, or a DROP PARTITION), so the lock can no longer tell its "
            ~ "generations apart. Nothing was changed. With no load of this model running, drop that table (DROP "
            ~ "TABLE " ~ lock ~ " " ~ on_cluster_clause(lock) ~ "); the next run creates it again.") }}
      {%- endif -%}
      {%- if claimed.gen == state.gen + 1 and claimed.holder == me -%}
        {%- if taken -%}
          {{ log('vcmt_upsert ' ~ target.identifier ~ ': took over the lock of ' ~ state.holder ~ ' (' ~ state.what
              ~ ', silent for ' ~ state.silent_s ~ ' s)', info=true) }}
          {%- set st.previous = state -%}
        {%- endif -%}
        {%- set st.held = claimed -%}
      {%- else -%}
        {%- set st.state = claimed -%}
      {%- endif -%}
    {%- endif -%}
    {%- if st.held is none -%}
      {%- set state = st.state -%}
      {%- if state.rows > 0 and not state.released -%}
        {%- if st.waited >= timeout_s + (1 if st.idle == 1 else 0) -%}
          {{ exceptions.raise_compiler_error("vcmt_upsert " ~ target.identifier ~ ": another load of this model is "
              ~ "running (" ~ state.what ~ "; " ~ state.holder ~ "; since " ~ state.acquired ~ ", last active "
              ~ state.renewed ~ "); waited " ~ st.waited ~ " s (`lock_timeout` = " ~ timeout_s
              ~ "). Nothing was changed. Run again when it has ended, or give the model a longer `lock_timeout`. "
              ~ "A load that was killed holds the lock until it has been silent for " ~ lease ~ " s.") }}
        {%- endif -%}
        {%- if not st.said -%}
          {{ log('vcmt_upsert ' ~ target.identifier ~ ': waiting for another load of this model (' ~ state.what ~ '; '
              ~ state.holder ~ '; since ' ~ state.acquired ~ '), up to ' ~ timeout_s ~ ' s', info=true) }}
          {%- set st.said = true -%}
        {%- endif -%}
        {%- do run_query('select sleep(1)') -%}
        {%- set st.waited = st.waited + 1 -%}
        {%- set st.state = vcmt._lock_state(target, known=true) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if st.held is none -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert " ~ target.identifier ~ ": could not take the lock of this model "
        ~ "in " ~ st.waited ~ " s: other loads claimed each generation first. Nothing was changed. Run again.") }}
  {%- endif -%}
  {%- if st.said -%}
    {{ log('vcmt_upsert ' ~ target.identifier ~ ': the other load has ended; this one goes on after ' ~ st.waited
        ~ ' s', info=true) }}
  {%- endif -%}
  {%- if st.previous is not none -%}
    {%- do vcmt._wait_for_statements_of(target, st.previous, timeout_s) -%}
  {%- endif -%}
  {%- do vcmt._run_state(cfg).update({'lock_written': modules.datetime.datetime.now()}) -%}
  {#- This load's `m__batch` and `m__fanout` are its generation's (objects.sql, _generation_object); the load
      tables of older generations (a killed or failed load's) are nobody's any more, and go first. -#}
  {%- for o in vcmt._roles_of('load_table') -%}
    {%- do objs.update({o.role: vcmt._generation_object(objs, o.role, st.held.gen)}) -%}
  {%- endfor -%}
  {#- The observation is this run's view of the catalog while nothing changes it: taken with the lock free, and
      this claim the next one. After a wait or a takeover, the caller observes again. -#}
  {#- A first claim ever (the lock's table new, no 0.4 lock before it) follows no holder either. -#}
  {%- set fresh = obs is not none and ((obs.lock is none and st.held.gen == 1 and not legacy)
                                       or (obs.lock is not none and st.held.gen == obs.lock.gen + 1)) -%}
  {%- set waited = st.previous is not none or not fresh -%}
  {%- do vcmt._drop_older_load_tables(objs, st.held.gen, none if waited or obs is none else obs.nodes) -%}
  {%- do st.held.update({'waited': waited}) -%}
  {{ return(st.held) }}
{% endmacro %}


{#- After a takeover: wait (up to `timeout_s`, and at least the lease) until
    none of the previous holder's statements runs. It can start no new one
    that writes (its fence fails), but one that started before the claim may
    still be writing. If one still runs then, this load gives the lock back
    (the previous holder stays fenced out) and fails, changing nothing. -#}
{% macro _wait_for_statements_of(target, previous, timeout_s) %}
  {%- set st = namespace(busy=true) -%}
  {%- for second in range([timeout_s | int, vcmt._lock_lease_s()] | max + 1) if st.busy -%}
    {%- set st.busy = vcmt._holder_busy(previous.holder, target) -%}
    {%- if st.busy -%}
      {%- if second == 0 -%}
        {{ log('vcmt_upsert ' ~ target.identifier ~ ': waiting for the statements of ' ~ previous.holder
            ~ ' that still run to end', info=true) }}
      {%- endif -%}
      {%- do run_query('select sleep(1)') -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if st.busy -%}
    {%- do vcmt._release_lock(target) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert " ~ target.identifier ~ ": took over the lock of " ~ previous.holder
        ~ ", whose statements still run on the server after " ~ ([timeout_s | int, vcmt._lock_lease_s()] | max)
        ~ " s; it can write nothing more (its next statement is refused), but this load does not write beside a "
        ~ "running one. Nothing was changed. Run again when they have ended (system.processes), "
        ~ "or stop them with KILL QUERY.") }}
  {%- endif -%}
{% endmacro %}


{#- The holder, at each step of its run (each statement the lifecycle's
    executor sends, each step of its load): its lease renewed when it has
    been silent for a fifth of it, by this load's own clock since the lock's
    last row it wrote (`cfg._run`, _run_state). Nothing when this run holds
    no lock (yet). Its statements that only read carry no name a waiting load
    could see, so a run busy with many short reads must renew as often as one
    that writes. The renewal is fenced like every write, so a holder that was
    taken over fails here at the latest, and so does its next write in any
    case. -#}
{% macro _renew_lock(cfg, objs) %}
  {%- set run = vcmt._run_state(cfg) -%}
  {%- set now = modules.datetime.datetime.now() -%}
  {%- if run.get('lock_written') is not none
      and (now - run.lock_written).total_seconds() >= [vcmt._lock_lease_s() // 5, 1] | max -%}
    {%- call statement('vcmt_lock_renew') -%}
      {{ vcmt._lock_row_sql('renewed', '', objs.target) }}
    {%- endcall -%}
    {%- do run.update({'lock_written': modules.datetime.datetime.now()}) -%}
  {%- endif -%}
{% endmacro %}


{#- Release the lock of the model whose target table is `relation`, if this
    load holds it (one INSERT that writes nothing otherwise). A load that
    failed may have statements still running on the server (a connection cut
    while its INSERT ran: the server goes on): they are stopped first (KILL
    QUERY ... SYNC), so nothing of this load writes once another load holds
    the lock. -#}
{% macro _release_lock(relation, failed=false) %}
  {%- set model = vcmt._model_relation(relation) -%}
  {%- set me = vcmt._lock_holder(model) -%}
  {%- if failed -%}
    {#- A failed load may have failed before it took the lock: there may be none. -#}
    {%- set state = vcmt._lock_state(model) -%}
    {%- if state is none or state.rows == 0 or state.holder != me or state.released -%}{{ return(none) }}{%- endif -%}
    {%- if vcmt._lock_cluster(model) -%}
      {#- Across a cluster: wait (bounded) until none runs on any node; else the
          lock lapses once they have ended and the lease has passed. -#}
      {%- set st = namespace(busy=true) -%}
      {%- for second in range(vcmt._lock_lease_s() + 1) if st.busy -%}
        {%- set st.busy = vcmt._holder_busy(me, model) -%}
        {%- if st.busy -%}{%- do run_query('select sleep(1)') -%}{%- endif -%}
      {%- endfor -%}
      {%- if st.busy -%}
        {{ log('vcmt_upsert ' ~ model.identifier ~ ': statements of this failed load still run on the cluster; '
            ~ 'its lock is left to lapse once they have ended', info=true) }}
        {{ return(none) }}
      {%- endif -%}
    {%- elif adapter.type() != 'chdb' -%}
      {%- call statement('vcmt_kill_own') -%}
        kill query where {{ vcmt._holder_statements(me) }} sync
      {%- endcall -%}
    {%- endif -%}
  {%- endif -%}
  {%- call statement('vcmt_unlock') -%}{{ vcmt._lock_row_sql('released', '', model, fenced=false) }}{%- endcall -%}
{% endmacro %}


{#- Fail a load that holds the lock and has written nothing, with `message`:
    the lock is released first. A `vcmt.load_stage` (a run-operation) has no
    on-run-end hook to release it, and the next load would wait out the
    lease. -#}
{% macro _refuse_under_lock(objs, message) %}
  {%- do vcmt._release_lock(objs.target) -%}
  {{ exceptions.raise_compiler_error(message) }}
{% endmacro %}


{#- The lock of vcmt 0.4 and before: a generation of tables
    `<model>__lock_<n>` (_legacy_lock_table), the highest one the lock, its
    holder the table's comment. -#}
{% macro _legacy_lock_table(target, gen) %}
  {{ return(target.incorporate(path={'identifier': target.identifier ~ vcmt._object_suffix('lock') ~ '_' ~ gen})) }}
{% endmacro %}

{#- The generation above any a 0.4 load creates (it reads 18 digits at most):
    its comment is the lock's holder for every 0.4 load from then on, which
    waits for it and then fails, naming the upgrade. -#}
{% macro _legacy_sentinel(target) %}
  {{ return(vcmt._legacy_lock_table(target, '9' * 18)) }}
{% endmacro %}

{% macro _legacy_sentinel_comment() %}
  {{ return('vcmt 0.5 or later loads this model: upgrade every process that loads it (dbt with the vcmt package, '
      ~ 'vcmt-load-stage) to that version') }}
{% endmacro %}


{#- Once per model, by its first load of this version (docs/design.md#one-load-at-a-time):
    wait (up to `timeout_s`) for a 0.4 load that holds the old lock, as a
    0.4 load would (released, or stale and idle); then create the sentinel
    generation, which fences out every 0.4 load; wait for the statements of
    a 0.4 holder that had not released to end (it may have claimed a
    generation just before); and drop the old generations. Idempotent: two
    loads of this version may run it at once. -#}
{% macro _retire_legacy_lock(target, timeout_s) %}
  {%- set sentinel = vcmt._legacy_sentinel(target) -%}
  {%- set names = vcmt._legacy_lock_generations(target) -%}
  {%- set st = namespace(state=vcmt._legacy_lock_state(target, names=names), waited=0, idle=0) -%}
  {%- for second in range((timeout_s | int) + 3) if st.state is not none and st.state.holder
      != vcmt._legacy_sentinel_comment() and not st.state.released and st.idle < 2 -%}
    {%- set idle = st.state.silent_s >= vcmt._lock_lease_s() and not vcmt._holder_busy(st.state.holder, target) -%}
    {%- set st.idle = st.idle + 1 if idle else 0 -%}
    {%- if st.idle < 2 -%}
      {%- if st.waited >= timeout_s -%}
        {{ exceptions.raise_compiler_error("vcmt_upsert " ~ target.identifier ~ ": a load by vcmt 0.4 holds this "
            ~ "model's lock (" ~ st.state.holder ~ "); waited " ~ st.waited ~ " s (`lock_timeout` = " ~ timeout_s
            ~ "). Nothing was changed. Run again when it has ended, and upgrade every process that loads this "
            ~ "model to this version of vcmt.") }}
      {%- endif -%}
      {%- if st.waited == 0 -%}
        {{ log('vcmt_upsert ' ~ target.identifier ~ ': waiting for a load by vcmt 0.4 of this model ('
            ~ st.state.holder ~ '), up to ' ~ timeout_s ~ ' s', info=true) }}
      {%- endif -%}
      {%- do run_query('select sleep(1)') -%}
      {%- set st.waited = st.waited + 1 -%}
      {%- set st.state = vcmt._legacy_lock_state(target) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- call statement('vcmt_lock_retire') -%}
    create table if not exists {{ sentinel }} {{ on_cluster_clause(sentinel) }}
      (holder String, kind String, what String, at DateTime64(3)) engine = Null
    comment {{ vcmt._sql_string(vcmt._legacy_sentinel_comment()) }}
  {%- endcall -%}
  {#- A 0.4 load that claimed a generation before the sentinel may still be writing. -#}
  {%- set names = vcmt._legacy_lock_generations(target) | reject('equalto', sentinel.identifier) | list -%}
  {%- set below = vcmt._legacy_lock_state(target, below_sentinel=true, names=names) -%}
  {%- if below is not none and not below.released -%}
    {%- do vcmt._wait_for_statements_of(target, below, timeout_s) -%}
  {%- endif -%}
  {%- for name in names -%}
    {%- set old = target.incorporate(path={'identifier': name}) -%}
    {%- call statement('vcmt_lock_cleanup') -%}
      drop table if exists {{ old }} {{ on_cluster_clause(old) }}
    {%- endcall -%}
  {%- endfor -%}
  {{ return(names | length > 0) }}
{% endmacro %}


{#- The 0.4 lock's newest generation (below the sentinel with
    `below_sentinel`), as 0.4 read it: {gen, holder, what, released,
    silent_s}; none when there is none. -#}
{% macro _legacy_lock_state(target, below_sentinel=false, names=none) %}
  {%- set gens = vcmt._legacy_lock_generations_sql(target, local=true) -%}
  {%- if below_sentinel -%}
    {%- set gens = 'select * from (' ~ gens ~ ') where name != '
        ~ vcmt._sql_string(vcmt._legacy_sentinel(target).identifier) -%}
  {%- endif -%}
  {#- merge() over no table fails: none is listed first (`names`, when the caller has listed them; the sentinel
      has the same columns). -#}
  {%- if (vcmt._legacy_lock_generations(target) if names is none else names) | length == 0 -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set prefix = modules.re.escape(vcmt._legacy_lock_table(target, '').identifier) -%}
  {%- set rows = "select _table as r_table, anyIf(what, kind = 'acquired') as r_what, "
      ~ "countIf(kind = 'released') > 0 as r_released, count() as r_count, dateDiff('second', max(at), now64(3)) "
      ~ "as r_silent from merge(" ~ vcmt._sql_string(target.schema) ~ ", " ~ vcmt._sql_string('^' ~ prefix
      ~ '[0-9]{1,18}$') ~ ") where _table != " ~ vcmt._sql_string(vcmt._legacy_sentinel(target).identifier)
      ~ " group by _table" -%}
  {%- set newest = "select max(gen) as g_gen, argMax(comment, gen) as g_comment, argMax(age, gen) as g_age, "
      ~ "argMax(name, gen) as g_name from (" ~ gens ~ ") having count() > 0" -%}
  {%- set sql = "select g_gen, g_comment, g_age, r_what, r_released, r_count, r_silent from (" ~ newest ~ ") as g "
      ~ "left join (" ~ rows ~ ") as r on r_table = g_name" -%}
  {%- set cluster = vcmt._lock_cluster(target) -%}
  {%- if cluster -%}
    {%- set sql = "select * except (_vcmt_slot) from cluster(" ~ vcmt._sql_string(cluster) ~ ", view(select *, "
        ~ vcmt._lock_slot() ~ " as _vcmt_slot from (" ~ sql ~ ")), _vcmt_slot) where _vcmt_slot = "
        ~ vcmt._lock_slot() ~ vcmt._lock_read_settings(target, {'optimize_skip_unused_shards': 1,
                                                               'force_optimize_skip_unused_shards': 1}) -%}
  {%- endif -%}
  {%- set found = run_query(sql).rows -%}
  {%- if found | length == 0 -%}{{ return(none) }}{%- endif -%}
  {%- set gen, holder, age, what, released, n, silent_s = found[0] -%}
  {%- set recorded = (n or 0) | int > 0 -%}
  {{ return({'gen': gen | int, 'holder': holder, 'what': what or 'a load',
             'released': (released | int == 1) if recorded else false,
             'silent_s': silent_s | int if recorded else age | int}) }}
{% endmacro %}


{#- The package's on-run-end hook: release the locks of the vcmt_upsert
    models of this invocation that failed (a failed load ends without its
    own release), once none of their statements runs; then warn about data
    tests that read a vcmt_upsert model's stored rows (dispatch_hint.sql). -#}
{% macro _release_locks_of_run(results) %}
  {%- if execute and results -%}
    {%- for res in results if res.node.resource_type == 'model' and res.node.config.materialized == 'vcmt_upsert'
                              and res.status in ('error', 'fail') -%}
      {%- do vcmt._release_lock(vcmt.objects(vcmt._node_target(res.node), res.node.config.get('sharding_key')).target,
                                failed=true) -%}
    {%- endfor -%}
    {#- A vcmt_aggregate model builds under the lock of the vcmt_upsert model it reads (its one input). -#}
    {%- for res in results if res.node.resource_type == 'model' and res.node.config.materialized == 'vcmt_aggregate'
                              and res.status in ('error', 'fail') and res.node.depends_on.nodes | length == 1 -%}
      {%- set upstream = graph.nodes.get(res.node.depends_on.nodes[0]) -%}
      {%- if upstream and upstream.config.materialized == 'vcmt_upsert' -%}
        {%- do vcmt._release_lock(vcmt._node_target(upstream), failed=true) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  {%- do vcmt._warn_tests_reading_stored_rows(results) -%}
  {{ return('') }}
{% endmacro %}
