{#- Virtual shards (docs/design.md#virtual-shards): a load's stage INSERTs
    run as K concurrent INSERTs, shard i holding the keys whose hash modulo K
    is i, so no two shards share a key. One INSERT cannot do it: ClickHouse
    runs the materialized views of an INSERT in one stream whatever
    `max_insert_threads` says. -#}

{#- Batches of at least this many events get one shard per core by default. -#}
{% macro _virtual_shards_min_events() %}{{ return(100000) }}{% endmacro %}


{#- The `virtual_shards` config: none (the default, by batch size) or a whole
    number of shards >= 1. Refused otherwise, before any DDL. -#}
{% macro _validate_virtual_shards(value) %}
  {%- if value is none -%}{{ return(none) }}{%- endif -%}
  {%- if value is not number or value is boolean or value != (value | int) or value < 1 or value > 64 -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `virtual_shards` must be a whole number of parallel streams from 1 to 64 (1 turns virtual shards off), or left unset for the default (one per core for batches of "
        ~ vcmt._virtual_shards_min_events() ~ " events or more, else 1); got `" ~ value ~ "`. Fix it in the model's config, e.g. virtual_shards=2.") }}
  {%- endif -%}
  {{ return(value | int) }}
{% endmacro %}


{#- K for a load of `events` events: the configured value, else one shard per
    core the engine uses (its max_threads) for a large batch, else 1. Only
    the embedded engine (type: chdb) runs shards concurrently; on a server
    they run one after another, so the default there is 1. -#}
{% macro _virtual_shards_for(cfg, events) %}
  {%- if cfg.virtual_shards is not none -%}{{ return(cfg.virtual_shards) }}{%- endif -%}
  {%- if events < vcmt._virtual_shards_min_events() or adapter.type() != 'chdb' -%}{{ return(1) }}{%- endif -%}
  {{ return([run_query("select toUInt64(getSetting('max_threads'))").rows[0][0] | int, 64] | min) }}
{% endmacro %}


{#- The condition that keeps shard `i` of `k`'s keys: a stable hash of the
    key columns modulo k. The stage INSERTs read the loader's normalised (cast)
    events, so one key has one spelling and one shard. none with one shard:
    the step's one INSERT as it always was. -#}
{% macro _shard_condition(cfg, i, k) %}
  {%- if k <= 1 -%}{{ return(none) }}{%- endif -%}
  {{ return('cityHash64(' ~ vcmt._column_list(cfg.key_columns) ~ ') % ' ~ k ~ ' = ' ~ i) }}
{% endmacro %}


{#- Run the stage INSERTs of one step, one per shard: concurrently on the
    embedded engine, in turn elsewhere. -#}
{% macro _run_sharded(statements) %}
  {%- if statements | length > 1 and adapter.type() == 'chdb' -%}
    {%- do adapter.run_concurrently(statements) -%}
  {%- else -%}
    {%- for sql in statements -%}
      {%- call statement('vcmt_load') -%}{{ sql }}{%- endcall -%}
    {%- endfor -%}
  {%- endif -%}
{% endmacro %}
