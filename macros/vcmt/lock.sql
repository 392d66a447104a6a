{#- One load of a model at a time (docs/design.md#one-load-at-a-time).

    Two loads of one model that overlap (a scheduler's retry, a backfill, a
    second developer, `dbt run` beside `vcmt-load-stage`) would both look up
    the same live row and both cancel it. Every load therefore holds the
    model's lock from its first DDL to its last write.

    ClickHouse has no lock statement; what it does serialise is DDL on one
    name. The lock is a generation of tables `<model>__lock_<n>`: the highest
    generation is the lock, and its holder is the comment its CREATE wrote. A load takes the lock by creating generation n+1 (IF NOT
    EXISTS, so of any number of loads racing for the same n exactly one
    creates it) when generation n is released, or stale: silent for the
    lease (_lock_lease_s) and none of its holder's statements running. While
    it holds the lock, a load's connection runs with `log_comment` set to its
    holder name, which system.processes shows for each of its statements: a
    long statement (the SELECT's checks, a big INSERT, a projection rebuilt)
    keeps the lock however long it takes. A load holds
    it while the highest generation is its own, so two loads can never both
    hold it. The holder renews it at every step and fails at once if it was
    taken over. Generations only grow; older ones are dropped by the holder.

    A failed run releases its locks in the package's on-run-end hook; a
    killed one holds it until it has been silent for the lease. -#}

{#- How long a holder may stay silent (no renewal, no statement running)
    before another load takes the lock over. -#}
{% macro _lock_lease_s() %}{{ return(30) }}{% endmacro %}


{#- The `lock_timeout` config: how long a load waits for another load of the
    same model, in seconds (default 600, 0: fail at once). -#}
{% macro _validate_lock_timeout(value) %}
  {%- if value is none -%}{{ return(600) }}{%- endif -%}
  {%- if value is not number or value is boolean or value < 0 -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `lock_timeout` must be a number of seconds (0 or more) a load waits for another load of the same model; got `" ~ value ~ "`. Fix it in the model's config, e.g. lock_timeout=600.") }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}


{#- Who holds a lock: this dbt invocation (also the `log_comment` of its
    statements while it does). -#}
{% macro _lock_holder() %}{{ return('vcmt load by dbt invocation ' ~ invocation_id) }}{% endmacro %}


{#- The lock of the model `target`: its highest generation, as {gen,
    relation, holder, what, acquired, renewed, released, silent_s,
    generations}. The holder is the table's comment, written by the CREATE
    itself; the rows record what each event of the lock was. -#}
{% macro _lock_state(target) %}
  {%- set prefix = target.identifier ~ '__lock_' -%}
  {%- set gens = run_query("select toUInt64(substring(name, " ~ (prefix | length + 1) ~ ")) as gen, comment, "
      ~ "dateDiff('second', metadata_modification_time, now()) from system.tables where database = "
      ~ vcmt._sql_string(target.schema) ~ " and startsWith(name, " ~ vcmt._sql_string(prefix)
      ~ ") and match(substring(name, " ~ (prefix | length + 1) ~ "), '^[0-9]{1,18}$') order by gen desc").rows -%}
  {%- if gens | length == 0 -%}{{ return(none) }}{%- endif -%}
  {%- set top = target.incorporate(path={'identifier': prefix ~ gens[0][0]}) -%}
  {%- set row = run_query("select anyIf(what, kind = 'acquired'), toString(minIf(at, kind = 'acquired')), "
      ~ "toString(max(at)), countIf(kind = 'released') > 0, count(), dateDiff('second', max(at), now64(3)) from "
      ~ top).rows[0] -%}
  {{ return({'gen': gens[0][0] | int, 'relation': top, 'holder': gens[0][1], 'what': row[0] or 'a load',
             'acquired': row[1] if row[4] | int > 0 else 'just now', 'renewed': row[2], 'released': row[3],
             'silent_s': row[5] | int if row[4] | int > 0 else gens[0][2] | int,
             'generations': gens | map(attribute=0) | list}) }}
{% endmacro %}


{#- One of the holder's statements runs now (it is alive even if it has not
    renewed for a while). -#}
{% macro _holder_busy(holder) %}
  {%- set rows = run_query("select count() from system.processes where query_id != queryID() and Settings['log_comment'] = "
                           ~ vcmt._sql_string(holder)).rows -%}
  {{ return(rows[0][0] | int > 0) }}
{% endmacro %}


{#- The `log_comment` of this connection's statements: the holder's name
    while it holds the lock, the profile's own (or none) otherwise. -#}
{% macro _set_log_comment(value) %}
  {%- call statement('vcmt_log_comment') -%}set log_comment = {{ vcmt._sql_string(value) }}{%- endcall -%}
{% endmacro %}


{% macro _lock_row_sql(kind, what) %}
  select {{ vcmt._sql_string(vcmt._lock_holder()) }} as holder, {{ vcmt._sql_string(kind) }} as kind,
    {{ vcmt._sql_string(what) }} as what, now64(3) as at
{% endmacro %}


{#- Take the lock of the model `objs` belongs to, waiting up to `timeout_s`
    for another load; `what` says which load this is ('dbt run',
    'vcmt.load_stage'). Returns the lock's relation. -#}
{% macro _acquire_lock(objs, timeout_s, what) %}
  {%- set target = objs.target -%}
  {%- set me = vcmt._lock_holder() -%}
  {%- set lease = vcmt._lock_lease_s() -%}
  {%- set st = namespace(held=none, waited=0, said=false, last=none) -%}
  {%- for attempt in range((timeout_s | int) + 2) if st.held is none -%}
    {%- set state = vcmt._lock_state(target) -%}
    {%- if state is not none and state.holder == me and not state.released -%}
      {%- set st.held = state -%}
    {%- else -%}
      {%- set free = state is none or state.released
                     or (state.silent_s >= lease and not vcmt._holder_busy(state.holder)) -%}
      {%- if free -%}
        {%- set gen = (state.gen if state is not none else 0) + 1 -%}
        {%- set lock = target.incorporate(path={'identifier': target.identifier ~ '__lock_' ~ gen}) -%}
        {%- call statement('vcmt_lock') -%}
          create table if not exists {{ lock }} (holder String, kind String, what String, at DateTime64(3))
          engine = MergeTree order by tuple() comment {{ vcmt._sql_string(me) }}
        {%- endcall -%}
        {%- if state is not none and not state.released -%}
          {{ log('vcmt_upsert ' ~ target.identifier ~ ': took over the lock of ' ~ state.holder ~ ' (' ~ state.what ~ ', silent for ' ~ state.silent_s ~ ' s)', info=true) }}
        {%- endif -%}
        {%- set state = vcmt._lock_state(target) -%}
        {%- if state.holder == me and state.gen == gen -%}
          {%- call statement('vcmt_lock_acquired') -%}insert into {{ lock }} {{ vcmt._lock_row_sql('acquired', what) }}{%- endcall -%}
          {%- set st.held = vcmt._lock_state(target) -%}
        {%- endif -%}
      {%- endif -%}
      {%- if st.held is none -%}
        {%- set st.last = state -%}
        {%- if st.waited >= timeout_s -%}
          {{ exceptions.raise_compiler_error("vcmt_upsert " ~ target.identifier ~ ": another load of this model is running (" ~ state.what ~ "; " ~ state.holder ~ "; since " ~ state.acquired ~ ", last active " ~ state.renewed ~ "); waited " ~ st.waited ~ " s (`lock_timeout` = " ~ timeout_s ~ "). Nothing was changed. Run again when it has ended, or give the model a longer `lock_timeout`. A load that was killed holds the lock until it has been silent for " ~ lease ~ " s.") }}
        {%- endif -%}
        {%- if not st.said -%}
          {{ log('vcmt_upsert ' ~ target.identifier ~ ': waiting for another load of this model (' ~ state.what ~ '; ' ~ state.holder ~ '; since ' ~ state.acquired ~ '), up to ' ~ timeout_s ~ ' s', info=true) }}
          {%- set st.said = true -%}
        {%- endif -%}
        {%- do run_query('select sleep(1)') -%}
        {%- set st.waited = st.waited + 1 -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if st.said -%}
    {{ log('vcmt_upsert ' ~ target.identifier ~ ': the other load has ended; this one goes on after ' ~ st.waited ~ ' s', info=true) }}
  {%- endif -%}
  {%- do vcmt._set_log_comment(me) -%}
  {#- Older generations are nobody's lock any more. -#}
  {%- for gen in st.held.generations if gen | int < st.held.gen -%}
    {%- call statement('vcmt_lock_cleanup') -%}
      drop table if exists {{ target.incorporate(path={'identifier': target.identifier ~ '__lock_' ~ gen}) }}
    {%- endcall -%}
  {%- endfor -%}
  {{ return(st.held.relation) }}
{% endmacro %}


{#- The holder, at each step of its load: still the lock's holder (else it
    stops before writing anything more), and its lease renewed. -#}
{% macro _renew_lock(objs) %}
  {%- set state = vcmt._lock_state(vcmt._model_relation(objs.target)) -%}
  {%- if state is none or state.holder != vcmt._lock_holder() or state.released -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert " ~ objs.target.identifier ~ ": this load lost the model's lock to " ~ (state.holder if state else 'nobody') ~ " after it had been silent for " ~ vcmt._lock_lease_s() ~ " s with no statement running; it stops here. Run the model again: the rows it wrote are exact, and the rest is applied then.") }}
  {%- endif -%}
  {%- if state.silent_s >= 5 -%}
    {%- call statement('vcmt_lock_renew') -%}
      insert into {{ state.relation }} {{ vcmt._lock_row_sql('renewed', state.what) }}
    {%- endcall -%}
  {%- endif -%}
{% endmacro %}


{#- Release the lock of the model whose target table is `relation`, if this
    invocation holds it. -#}
{% macro _release_lock(relation) %}
  {%- set state = vcmt._lock_state(relation) -%}
  {%- if state is not none and state.holder == vcmt._lock_holder() and not state.released -%}
    {%- call statement('vcmt_unlock') -%}
      insert into {{ state.relation }} {{ vcmt._lock_row_sql('released', state.what) }}
    {%- endcall -%}
    {%- do vcmt._set_log_comment((target.get('custom_settings') or {}).get('log_comment', '')) -%}
  {%- endif -%}
{% endmacro %}


{#- The package's on-run-end hook: release the locks of the vcmt_upsert
    models of this invocation (a failed load ends without its own release). -#}
{% macro _release_locks_of_run(results) %}
  {%- if execute and results -%}
    {%- for res in results if res.node.resource_type == 'model' and res.node.config.materialized == 'vcmt_upsert'
                              and res.status in ('error', 'fail') -%}
      {%- set rel = api.Relation.create(database=res.node.database, schema=res.node.schema,
                                        identifier=res.node.alias, type='table') -%}
      {%- do vcmt._release_lock(vcmt.objects(rel, res.node.config.get('sharding_key')).target) -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return('') }}
{% endmacro %}
