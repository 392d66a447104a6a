{#- Virtual shards (docs/design.md#virtual-shards): a load's stage INSERTs
    run as K concurrent INSERTs, each holding its own keys (a range of the
    folded batch's keys, or a hash class of a round's), so no two shards
    share a key. One INSERT cannot do it: ClickHouse runs the materialized
    views of an INSERT in one stream whatever `max_insert_threads` says. -#}

{#- The `virtual_shards` config: a whole number of shards from 1 to 64;
    unset is 1 (off). Refused otherwise, before any DDL. Off by default:
    on 2 idle cores two shards gained 1.24x, under load they lost
    (docs/design.md#virtual-shards). -#}
{% macro _validate_virtual_shards(value, cfg=none, opt=none, who='vcmt_upsert') %}
  {%- set fix = " Fix it in the model's config, e.g. virtual_shards=2 (unset or 1: off)." -%}
  {%- if value is string -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `virtual_shards` must be a number, not the string `'" ~ value
        ~ "'`." ~ fix) }}
  {%- endif -%}
  {%- if value is not number or value is boolean or value != (value | int) or value < 1 or value > 64 -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `virtual_shards` must be a whole number of parallel streams from "
        ~ "1 to 64; got `" ~ value ~ "`." ~ fix) }}
  {%- endif -%}
  {{ return(value | int) }}
{% endmacro %}


{#- The condition that keeps shard `i` of `k` of a round's keys: a stable
    hash of the key columns modulo k. The stage INSERTs read the loader's normalised (cast)
    events, so one key has one spelling and one shard. none with one shard:
    the step's one INSERT as it always was. -#}
{% macro _shard_condition(cfg, i, k) %}
  {%- if k <= 1 -%}{{ return(none) }}{%- endif -%}
  {{ return('cityHash64(' ~ vcmt._column_list(cfg.key_columns) ~ ') % ' ~ k ~ ' = ' ~ i) }}
{% endmacro %}


{#- The condition that keeps shard `i` of `k` of a folded batch of `n` events
    numbered in key order (`_vcmt_pos`): one range of positions, so each
    shard holds a range of keys and its lookup reads only the granules of
    that range (1.24x at K = 2 against 1.01x with the hash). Each key is one
    event there, so the ranges partition the keys; a position past `n` (a
    source that grew since `n` was counted) falls to the last shard, so no
    event is ever left out. -#}
{% macro _range_shard_condition(i, k, n) %}
  {{ return('least(intDiv(_vcmt_pos * ' ~ k ~ ', ' ~ ([n, 1] | max) ~ '), ' ~ (k - 1) ~ ') = ' ~ i) }}
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
