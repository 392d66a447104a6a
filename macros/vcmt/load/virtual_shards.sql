{#- Virtual shards (docs/design.md#virtual-shards): each step of a load
    (the fold's INSERT, or one round) runs on K threads at once, thread i
    holding its own keys (a range of the folded batch's keys, or a hash
    class of a round's), so no two share a key. It stays one statement: an
    INSERT into the load's fan-out, whose K views run concurrently under
    `parallel_view_processing`. `max_insert_threads` cannot do it:
    ClickHouse runs the materialized views of an INSERT in one stream. -#}

{#- The `virtual_shards` config: a whole number of shards from 1 to 64, or
    `'auto'` (_virtual_shards_of), the default; 1 is one stream. Refused
    otherwise, before any DDL. -#}
{% macro _validate_virtual_shards(value, cfg=none, opt=none, who='vcmt_upsert') %}
  {%- set fix = " Fix it in the model's config, e.g. virtual_shards='auto' to let each load choose (the default), "
      ~ "virtual_shards=2, or virtual_shards=1 for one stream." -%}
  {%- if value == 'auto' -%}{{ return(value) }}{%- endif -%}
  {%- if value is string -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `virtual_shards` must be a number or 'auto', not the string `'"
        ~ value ~ "'`." ~ fix) }}
  {%- endif -%}
  {%- if value is not number or value is boolean or value != (value | int) or value < 1 or value > 64 -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `virtual_shards` must be a whole number of parallel streams from "
        ~ "1 to 64, or 'auto'; got `" ~ value ~ "`." ~ fix) }}
  {%- endif -%}
  {{ return(value | int) }}
{% endmacro %}


{#- What `virtual_shards='auto'` chooses: K for a folded load (fold.sql)
    into the model's table that feeds at least `from_events` events to the
    stage, at most the load's `max_threads`; one stream below, for a load in
    rounds, a first run or a full refresh, and on a sharded model
    (docs/design.md#virtual-shards: on 2 cores two shards gained on the fold
    from 100k events on; below, the fan-out's statements ate the gain; the
    rounds' hash split, a load into an empty table and a cluster whose nodes
    have their own cores are not measured). -#}
{% macro _auto_virtual_shards() %}
  {{ return({'shards': 2, 'from_events': 100000}) }}
{% endmacro %}


{#- The shards of one load that feeds `fed` events to the stage, `folded`
    (fold.sql) or in rounds (load_rounds.sql), a `rebuild` (a first run or a
    full refresh) or not, with the engine's `threads` (its `max_threads`,
    none if unknown): the configured number, or with `'auto'` the choice of
    _auto_virtual_shards. The model's `insert_settings` may set `max_threads`
    for the load's INSERTs: then that bounds it. -#}
{% macro _virtual_shards_of(cfg, fed, folded, rebuild=false, threads=none) %}
  {%- if cfg.virtual_shards != 'auto' -%}{{ return(cfg.virtual_shards) }}{%- endif -%}
  {%- set auto = vcmt._auto_virtual_shards() -%}
  {%- if not folded or rebuild or cfg.sharding_key or fed < auto.from_events -%}{{ return(1) }}{%- endif -%}
  {%- set configured = (cfg.insert_settings or {}).get('max_threads') -%}
  {#- `int` gives 0 for none, a blank or 'auto': unknown, not a bound. -#}
  {%- set threads = (configured if configured is not none else threads) | int -%}
  {{ return([auto.shards, threads] | min if threads > 0 else auto.shards) }}
{% endmacro %}


{#- Which of `k` shards a round's event goes to: a stable hash of the key
    columns modulo k. It reads the loader's normalised (cast) events, so one
    key has one spelling and one shard. -#}
{% macro _hash_shard(cfg, k) %}
  {{ return('cityHash64(' ~ vcmt._column_list(cfg.key_columns) ~ ') % ' ~ k) }}
{% endmacro %}


{#- Which of `k` shards an event of a folded batch of `n` events numbered in
    key order (`_vcmt_pos`) goes to: one range of positions per shard, so
    each shard holds a range of keys and its lookup reads only the granules
    of that range (1.24x at K = 2 against 1.01x with the hash, measured with K
    INSERTs from the client). Each key is
    one event there, so the ranges partition the keys; a position past `n`
    (a source that grew since `n` was counted) falls to the last shard, so
    no event is ever left out. -#}
{% macro _range_shard(k, n) %}
  {{ return('least(intDiv(_vcmt_pos * ' ~ k ~ ', ' ~ ([n, 1] | max) ~ '), ' ~ (k - 1) ~ ')') }}
{% endmacro %}


{#- The load's fan-out (`m__fanout_<n>`, docs/design.md#virtual-shards): a
    Null table with the stage's columns and `_vcmt_shard`, and K views, the
    i-th passing the events of shard i into the stage. One INSERT into it,
    run with `parallel_view_processing`, is one step on K threads: the views
    run concurrently, each with its own chain of the stage's views, on
    every engine and through any client. Its DDL names no holder, so the
    lock is renewed first: a takeover never finds this load silent while it
    makes them. -#}
{% macro _create_fanout(cfg, objs, data, k) %}
  {%- do vcmt._renew_lock(cfg, objs) -%}
  {%- set events = vcmt._column_list(cfg.key_columns + data + [cfg.version]) -%}
  {%- set ran = ['create table ' ~ objs.fanout ~ ' engine = Null ' ~ vcmt._load_table_comment() ~ ' as select ' ~ events
      ~ ', _vcmt_sign, toUInt32(0) as _vcmt_shard from ' ~ objs.batch ~ ' limit 0'] -%}
  {%- for i in range(k) -%}
    {%- do ran.append('create materialized view ' ~ vcmt._load_view(objs.fanout, i) ~ ' to '
        ~ vcmt._all_shards(objs, 'stage') ~ ' as select ' ~ events ~ ', _vcmt_sign as ' ~ vcmt._quote(cfg.sign)
        ~ ' from ' ~ objs.fanout ~ ' where _vcmt_shard = ' ~ i) -%}
  {%- endfor -%}
  {%- for sql in ran -%}
    {%- call statement('vcmt_fanout') -%}{{ sql }}{%- endcall -%}
  {%- endfor -%}
  {{ return(ran) }}
{% endmacro %}
