{#- One load of a model at a time (docs/design.md#one-load-at-a-time).

    Two loads of one model that overlap (a scheduler's retry, a backfill, a
    second developer, `dbt run` beside `vcmt-load-stage`) would both look up
    the same live row and both cancel it. Every load therefore holds the
    model's lock from its first DDL to its last write.

    ClickHouse has no lock statement; what it does serialise is DDL on one
    name. The lock is a generation of tables `<model>__lock_<n>`: the highest
    generation is the lock, and its holder is the comment its CREATE wrote.
    A load takes the lock by creating generation n+1 (IF NOT EXISTS, so of
    any number of loads racing for the same n exactly one creates it) when
    generation n is released, or stale: silent for the lease (_lock_lease_s)
    and none of its holder's statements running.

    The lock is a lease with a fencing token: every write of a load carries
    the fence (`_lock_fence`), which the engine evaluates when the statement
    starts and which fails it unless the highest generation is still the
    load's own. A holder that was paused past its lease and taken over can
    therefore write nothing more, whatever it sends. The fence also puts the
    holder's name in the text of each write, which system.processes shows:
    a long statement keeps the lock however long it takes, and no setting a
    user can set hides it.

    A failed run stops its loads' statements still running and releases
    their locks in the package's on-run-end hook; a killed one holds it until
    it has been silent for the lease. -#}

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


{#- The table of generation `gen` of the lock of the model `target`:
    `<model>__lock_<gen>` (model/objects.sql `lock`). -#}
{% macro _lock_table(target, gen) %}
  {{ return(target.incorporate(path={'identifier': target.identifier ~ vcmt._object_suffix('lock') ~ '_' ~ gen})) }}
{% endmacro %}


{#- Who holds a model's lock: this dbt invocation's load of that model
    (`relation` is the model's target, or one of its full refresh's staging
    objects). Every statement the load sends while it holds the lock carries
    this name in its text (the fence, `_lock_fence`), so system.processes
    shows the load's statements whatever settings a profile or a model sets.
    Plain ASCII: it appears in SQL text as it is. -#}
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


{#- The fence (docs/design.md#one-load-at-a-time): a scalar the engine
    evaluates once, when the statement starts and before it writes any row.
    It is 0 while this load holds the lock of the model `relation` belongs to
    (the highest generation's comment is this load's name), and otherwise
    fails the statement. Every write of a load goes `where <fence> = 0`. -#}
{% macro _lock_fence(relation) %}
  {%- set model = vcmt._model_relation(relation) -%}
  {%- set me = vcmt._lock_holder(model) -%}
  {%- set message = 'vcmt_upsert ' ~ model.identifier ~ ': this load (' ~ me ~ ') no longer holds the lock of the '
      ~ 'model: '
      ~ 'another load took it over after this one had been silent for ' ~ vcmt._lock_lease_s() ~ ' s. This statement '
      ~ 'was refused before writing anything, and what this load wrote before is exact. Run the model again.' -%}
  {{ return('(select throwIf(ifNull(argMax(comment, gen), \'\') != ' ~ vcmt._sql_string(me) ~ ', '
      ~ vcmt._sql_string(message) ~ ') from (' ~ vcmt._lock_generations_sql(model) ~ '))') }}
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


{#- The lock of the model `target`: its highest generation, as {gen,
    relation, holder, what, acquired, renewed, released, silent_s,
    generations (every one, highest first)}. The holder is the table's
    comment, written by the CREATE itself; the rows record what each event
    of the lock was.

    One query reads both, on the lock's node (through cluster() on a
    cluster): the generations from system.tables, and the newest one's rows
    through merge() over every generation. merge() takes its tables when the
    query starts, so a generation dropped meanwhile by the load that took the
    next one is read or is not listed, instead of failing the query
    ("Unknown table"); a generation created meanwhile has no rows yet, as
    right after its CREATE. But merge() with no matching table fails: until
    a generation has been seen (`exists`), the generations are listed first,
    and none means no lock. The newest generation always exists once there
    is one. -#}
{% macro _lock_state(target, exists=true) %}
  {%- if not exists and run_query('select 1 from (' ~ vcmt._lock_generations_sql(target)
      ~ ') limit 1').rows | length == 0 -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set prefix = modules.re.escape(vcmt._lock_table(target, '').identifier) -%}
  {%- set rows = "select _table as r_table, anyIf(what, kind = 'acquired') as r_what, "
      ~ "toString(minIf(at, kind = 'acquired')) as r_acquired, toString(max(at)) as r_renewed, "
      ~ "countIf(kind = 'released') > 0 as r_released, count() as r_count, dateDiff('second', max(at), now64(3)) "
      ~ "as r_silent "
      ~ "from merge(" ~ vcmt._sql_string(target.schema) ~ ", " ~ vcmt._sql_string('^' ~ prefix ~ '[0-9]+$')
      ~ ") group by _table" -%}
  {%- set newest = "select max(gen) as g_gen, argMax(comment, gen) as g_comment, argMax(age, gen) as g_age, "
      ~ "argMax(name, gen) as g_name, arrayStringConcat(arrayReverseSort(groupArray(gen)), ',') as g_gens "
      ~ "from (" ~ vcmt._lock_generations_sql(target, local=true) ~ ") having count() > 0" -%}
  {%- set sql = "select g_gen, g_comment, g_age, g_gens, r_what, r_acquired, r_renewed, r_released, r_count, r_silent "
      ~ "from (" ~ rows ~ ") as r right join (" ~ newest ~ ") as g on r_table = g_name" -%}
  {%- set cluster = vcmt._lock_cluster(target) -%}
  {%- if cluster -%}
    {#- Sent to the lock's node only: the lock's slot, as the sharding key of
        cluster(), prunes every other shard (forced: never read from them), as
        the lock's rows are written there (_lock_rows_into). A node that lacks
        the lock's tables, one added to the cluster since, is not asked, where
        its merge() would fail the read. Were the slot not the first shard's
        (a first shard of weight 0), the lock reads as nobody's: loud. -#}
    {%- set sql = "select * except (_vcmt_slot) from cluster(" ~ vcmt._sql_string(cluster) ~ ", view(select *, "
        ~ vcmt._lock_slot() ~ " as _vcmt_slot from (" ~ sql ~ ")), _vcmt_slot) where _vcmt_slot = "
        ~ vcmt._lock_slot() ~ " and _shard_num = 1"
        ~ vcmt._lock_read_settings(target, {'optimize_skip_unused_shards': 1,
                                            'force_optimize_skip_unused_shards': 1}) -%}
  {%- endif -%}
  {%- set found = run_query(sql).rows -%}
  {%- if found | length == 0 -%}{{ return(none) }}{%- endif -%}
  {%- set gen, holder, age, gens, what, acquired, renewed, released, n, silent_s = found[0] -%}
  {%- set recorded = (n or 0) | int > 0 -%}
  {{ return({'gen': gen | int, 'relation': vcmt._lock_table(target, gen),
             'holder': holder, 'what': what or 'a load', 'acquired': acquired if recorded else 'just now',
             'renewed': renewed, 'released': released if recorded else false,
             'silent_s': silent_s | int if recorded else age | int,
             'generations': gens.split(',') | map('int') | list}) }}
{% endmacro %}


{#- Where a lock's rows are written: the generation's table, on the
    cluster's first shard for a model on a cluster (a constant sharding key,
    the lock's slot, sends every row there). -#}
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


{#- One row of the lock (`kind`), written only while this load holds it;
    on a cluster to the first shard's first replica that is up, where the
    lock's reads look (_lock_read_settings). -#}
{% macro _lock_row_sql(kind, what, relation) %}
  select {{ vcmt._sql_string(vcmt._lock_holder(relation)) }} as holder, {{ vcmt._sql_string(kind) }} as kind,
    {{ vcmt._sql_string(what) }} as what, now64(3) as at
  where {{ vcmt._fenced(relation) }}
  {{ vcmt._settings_clause({'load_balancing': 'in_order'}) if vcmt._lock_cluster(relation) }}
{% endmacro %}


{#- Take the lock of the model `objs` belongs to, waiting up to `timeout_s`
    for another load; `what` says which load this is ('dbt run',
    'vcmt.load_stage'). Returns the lock's relation, and names this load's
    `m__batch` in `objs` by the lock's generation.

    A takeover claims the next generation first, which fences the old
    holder out (its next statement fails at its start), and then waits until
    none of the old holder's statements runs: one that started before the
    claim may still be writing. -#}
{% macro _acquire_lock(objs, timeout_s, what) %}
  {%- set target = vcmt._model_relation(objs.target) -%}
  {%- set me = vcmt._lock_holder(target) -%}
  {%- set lease = vcmt._lock_lease_s() -%}
  {%- set st = namespace(held=none, waited=0, said=false, previous=none, idle=0, idle_holder=none, seen=false) -%}
  {%- for attempt in range((timeout_s | int) + 3) if st.held is none -%}
    {%- set state = vcmt._lock_state(target, exists=st.seen) -%}
    {%- set st.seen = st.seen or state is not none -%}
    {%- if state is not none and state.holder == me and not state.released -%}
      {%- set st.held = state -%}
    {%- else -%}
      {#- Stale: silent for the lease, and seen with no statement running at
          two polls a second apart (a live holder is idle only for the
          moments between two of its statements). -#}
      {%- set idle = state is not none and not state.released and state.silent_s >= lease
                     and not vcmt._holder_busy(state.holder, target) -%}
      {%- set st.idle = (st.idle + 1 if state.holder == st.idle_holder else 1) if idle else 0 -%}
      {%- set st.idle_holder = state.holder if idle else none -%}
      {%- set free = state is none or state.released or st.idle >= 2 -%}
      {%- if free -%}
        {%- set gen = (state.gen if state is not none else 0) + 1 -%}
        {%- set lock = vcmt._lock_table(target, gen) -%}
        {%- call statement('vcmt_lock') -%}
          create table if not exists {{ lock }} {{ on_cluster_clause(lock) }}
            (holder String, kind String, what String, at DateTime64(3))
          engine = MergeTree order by tuple() comment {{ vcmt._sql_string(me) }}
        {%- endcall -%}
        {%- set claimed = vcmt._lock_state(target) -%}
        {%- if claimed.holder == me and claimed.gen == gen -%}
          {%- if state is not none and not state.released -%}
            {{ log('vcmt_upsert ' ~ target.identifier ~ ': took over the lock of ' ~ state.holder ~ ' (' ~ state.what
                ~ ', silent for ' ~ state.silent_s ~ ' s)', info=true) }}
            {%- set st.previous = state -%}
          {%- endif -%}
          {%- call statement('vcmt_lock_acquired') -%}
            insert into {{ vcmt._lock_rows_into(lock) }} {{ vcmt._lock_row_sql('acquired', what, target) }}
          {%- endcall -%}
          {%- set st.held = vcmt._lock_state(target) -%}
        {%- else -%}
          {%- set state = claimed -%}
        {%- endif -%}
      {%- endif -%}
      {%- if st.held is none -%}
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
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if st.said -%}
    {{ log('vcmt_upsert ' ~ target.identifier ~ ': the other load has ended; this one goes on after ' ~ st.waited
        ~ ' s', info=true) }}
  {%- endif -%}
  {%- if st.previous is not none -%}
    {%- do vcmt._wait_for_statements_of(target, st.previous, timeout_s) -%}
  {%- endif -%}
  {#- This load's `m__batch` and `m__fanout` are its generation's (objects.sql, _generation_object); the load
      tables of older generations (a killed or failed load's) are nobody's any more, and go first: a generation
      still listed is dropped after its load tables, so a cleanup cut short is done again by the next load. -#}
  {%- for o in vcmt._roles_of('load_table') -%}
    {%- do objs.update({o.role: vcmt._generation_object(objs, o.role, st.held.gen)}) -%}
  {%- endfor -%}
  {%- do vcmt._drop_older_load_tables(objs, st.held.gen) -%}
  {#- Older generations are nobody's lock any more. -#}
  {%- for gen in st.held.generations if gen | int < st.held.gen -%}
    {%- call statement('vcmt_lock_cleanup') -%}
      {%- set old = vcmt._lock_table(target, gen) %}
      drop table if exists {{ old }} {{ on_cluster_clause(old) }}
    {%- endcall -%}
  {%- endfor -%}
  {{ return(st.held.relation) }}
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


{#- The holder, at each step of its load: still the lock's holder (else it
    stops before writing anything more), and its lease renewed. The renewal
    is fenced like every write, so a holder that was taken over fails here
    at the latest. -#}
{% macro _renew_lock(objs) %}
  {%- set model = vcmt._model_relation(objs.target) -%}
  {%- set state = vcmt._lock_state(model) -%}
  {%- if state is none or state.holder != vcmt._lock_holder(model) or state.released -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert " ~ model.identifier ~ ": this load lost the model's lock to "
        ~ (state.holder if state else 'nobody') ~ " after it had been silent for " ~ vcmt._lock_lease_s()
        ~ " s with no statement running; it stops here. Run the model again: the rows it wrote are exact, "
        ~ "and the rest is applied then.") }}
  {%- endif -%}
  {%- if state.silent_s >= [vcmt._lock_lease_s() // 5, 1] | max -%}
    {%- call statement('vcmt_lock_renew') -%}
      insert into {{ vcmt._lock_rows_into(state.relation) }} {{ vcmt._lock_row_sql('renewed', state.what, model) }}
    {%- endcall -%}
  {%- endif -%}
{% endmacro %}


{#- Release the lock of the model whose target table is `relation`, if this
    load holds it. A load that failed may have statements still running on
    the server (a connection cut while its INSERT ran: the server goes on):
    they are stopped first (KILL QUERY ... SYNC), so nothing of this load
    writes once another load holds the lock. -#}
{% macro _release_lock(relation, failed=false) %}
  {%- set model = vcmt._model_relation(relation) -%}
  {#- A failed load may have failed before it took the lock: there may be none. -#}
  {%- set state = vcmt._lock_state(model, exists=not failed) -%}
  {%- set me = vcmt._lock_holder(model) -%}
  {%- if state is not none and state.holder == me and not state.released -%}
    {%- if failed and vcmt._lock_cluster(model) -%}
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
    {%- elif failed and adapter.type() != 'chdb' -%}
      {%- call statement('vcmt_kill_own') -%}
        kill query where {{ vcmt._holder_statements(me) }} sync
      {%- endcall -%}
    {%- endif -%}
    {%- call statement('vcmt_unlock') -%}
      insert into {{ vcmt._lock_rows_into(state.relation) }} {{ vcmt._lock_row_sql('released', state.what, model) }}
    {%- endcall -%}
  {%- endif -%}
{% endmacro %}


{#- Fail a load that holds the lock and has written nothing, with `message`:
    the lock is released first. A `vcmt.load_stage` (a run-operation) has no
    on-run-end hook to release it, and the next load would wait out the
    lease. -#}
{% macro _refuse_under_lock(objs, message) %}
  {%- do vcmt._release_lock(objs.target) -%}
  {{ exceptions.raise_compiler_error(message) }}
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
