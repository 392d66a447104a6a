{#- Query settings that change what the loader or the transform computes, and
    the value each must have. A profile's custom_settings or a model's
    `insert_settings` can set any of them for the session; every statement
    vcmt runs repeats them in its own SETTINGS clause, which wins over the
    session. See docs/design.md#pinned-settings.

    - join_use_nulls / join_default_strictness / any_join_distinct_right_table_keys:
      the transform's lookups are LEFT JOINs whose "no match" must read as a
      default row, not NULL (with NULLs every new key looks like "skip").
    - aggregate_functions_null_for_empty / transform_null_in: the tombstone
      lookup and the run report aggregate and filter with plain semantics.
    - *_overflow_mode, limit, offset, additional_*_filter(s): a limit that
      "breaks" instead of throwing, or a filter added to every read, would
      truncate the lookup or the loaded events without an error.
    - use_query_cache: the run report and the watermark must read fresh data.
    - input_format_allow_errors_*: a file read by vcmt.load_stage must not skip
      the rows it cannot parse (a lost delete).
    - final: the stats read the model's SELECT as written. -#}
{% macro _pinned_query_settings() %}
  {%- set pinned = {
      'join_use_nulls': 0,
      'join_default_strictness': 'ALL',
      'any_join_distinct_right_table_keys': 0,
      'aggregate_functions_null_for_empty': 0,
      'transform_null_in': 0,
      'limit': 0,
      'offset': 0,
      'additional_result_filter': '',
      'additional_table_filters': {},
      'use_query_cache': 0,
      'final': 0,
      'input_format_allow_errors_num': 0,
      'input_format_allow_errors_ratio': 0,
  } -%}
  {%- for name in ['read_overflow_mode', 'read_overflow_mode_leaf', 'result_overflow_mode', 'set_overflow_mode',
                   'join_overflow_mode', 'distinct_overflow_mode', 'sort_overflow_mode', 'transfer_overflow_mode',
                   'timeout_overflow_mode', 'timeout_overflow_mode_leaf', 'group_by_overflow_mode'] -%}
    {%- do pinned.update({name: 'throw'}) -%}
  {%- endfor -%}
  {{ return(pinned) }}
{% endmacro %}


{#- Settings of every INSERT into a stage, on top of the query settings above.
    - insert_deduplicate / deduplicate_blocks_in_dependent_materialized_views:
      two rounds, or a rerun, may carry identical blocks that must not be
      dropped as duplicates.
    - async_insert: buffered inserts can be flushed together, which would put
      one key twice into one insert block of the transform.
    - materialized_views_ignore_errors: a failing transform must fail the load,
      not drop its rows.
    - optimize_on_insert: the transform never writes both signs of one
      (key, version) in a block, so collapsing on insert only costs time.
    - do_not_merge_across_partitions_select_final: the transform's FINAL lookup
      may stay within partitions, since a cancel row lands in its old row's
      partition.
    - query_plan_execute_functions_after_sorting / optimize_read_in_order: the
      fold INSERT sorts its whole input before the first block reaches the
      stage, and every cast (and so every cast error) must happen before that
      sort, so a bad value fails the load before anything is applied.
    - distributed_foreground_insert (formerly insert_distributed_sync): a
      sharded model's INSERT into its Distributed stage returns only once
      every shard has applied its part, so the run report and the next round
      see it (docs/design.md#sharded-clusters); no effect on other tables.
    - load_balancing: `in_order`, so a sharded model's loads reach the same
      replica of each shard while it is up: the tombstones and other helper
      tables are not replicated (docs/design.md#sharded-clusters).
    - insert_shard_id: 0, so a sharded model's rows go where its sharding key
      sends them; another value sends every row to that one shard. -#}
{% macro _pinned_insert_settings() %}
  {%- set pinned = vcmt._pinned_query_settings() -%}
  {%- do pinned.update({
      'insert_deduplicate': 0,
      'deduplicate_blocks_in_dependent_materialized_views': 0,
      'async_insert': 0,
      'materialized_views_ignore_errors': 0,
      'optimize_on_insert': 0,
      'do_not_merge_across_partitions_select_final': 1,
      'query_plan_execute_functions_after_sorting': 0,
      'optimize_read_in_order': 0,
      'distributed_foreground_insert': 1,
      'load_balancing': 'in_order',
      'insert_shard_id': 0,
  }) -%}
  {{ return(pinned) }}
{% endmacro %}


{#- A model's `insert_settings` may tune the loader's INSERTs (threads, block
    sizes, ...) but may not change a pinned setting: refused before any DDL. -#}
{% macro _validate_insert_settings(settings, cfg=none, opt=none, who='vcmt_upsert') %}
  {%- if settings is not mapping -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `insert_settings` must be a dict of ClickHouse settings, e.g. "
        ~ "{'max_insert_threads': 2}; got `" ~ settings ~ "`.") }}
  {%- endif -%}
  {%- if 'log_comment' in settings -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `insert_settings` cannot set `log_comment`: vcmt sets it on "
        ~ "every statement of a load to the load's name, by which another load of the model sees that this one "
        ~ "still runs (see docs/design.md#one-load-at-a-time). Remove it from `insert_settings`.") }}
  {%- endif -%}
  {%- set pinned = vcmt._pinned_insert_settings() -%}
  {%- for name, value in settings.items() if name in pinned and (value | string) != (pinned[name] | string) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `insert_settings` cannot set `" ~ name ~ "` to `" ~ value
        ~ "`: vcmt pins it to `" ~ pinned[name] ~ "` because another value changes which events are applied (see "
        ~ "docs/design.md#pinned-settings). Remove it from `insert_settings`.") }}
  {%- endfor -%}
  {{ return(settings) }}
{% endmacro %}


{#- `settings k = v, ...` for a dict of settings (a string value quoted): the one
    renderer of a SETTINGS clause, for queries and tables alike. -#}
{% macro _settings_clause(settings) %}
  {#- The same few sets of settings end most statements of a run: each clause is rendered once per context
      (objects.sql, _memo). -#}
  {%- set memo = context._vcmt_memo if context is defined and context._vcmt_memo is defined
                  else vcmt._memo() -%}
  {%- set key = settings.items() | list | string -%}
  {%- if key in memo.settings -%}{{ return(memo.settings[key]) }}{%- endif -%}
  {%- set literals = vcmt._sql_string(settings.values() | list, each=true) -%}
  {%- set parts = [] -%}
  {%- for k, v in settings.items() -%}
    {%- do parts.append(k ~ ' = ' ~ (literals[loop.index0] if v is string else v)) -%}
  {%- endfor -%}
  {%- set clause = 'settings ' ~ parts | join(', ') if parts else '' -%}
  {%- do memo.settings.update({key: clause}) -%}
  {{ return(clause) }}
{% endmacro %}


{#- The SETTINGS clause of the loader's INSERTs: the user's `insert_settings`,
    then the pinned ones, then the name of the load (`holder_of`, its
    model's relation: _holder_settings). -#}
{% macro _stage_insert_settings(cfg, fanout=false, holder_of=none) %}
  {%- set settings = {} -%}
  {%- do settings.update(cfg.insert_settings) -%}
  {%- do settings.update(vcmt._pinned_insert_settings()) -%}
  {#- Through the fan-out, the views of virtual shards run at once (virtual_shards.sql). -#}
  {%- if fanout -%}{%- do settings.update({'parallel_view_processing': 1}) -%}{%- endif -%}
  {%- do settings.update(vcmt._holder_settings(holder_of)) -%}
  {{ return(vcmt._settings_clause(settings)) }}
{% endmacro %}


{#- The SETTINGS clause of vcmt's own reads (stats, watermark, lookups); with
    `holder_of`, a read under the lock of that relation's model, named as
    the load's (_holder_settings). -#}
{% macro _read_settings(holder_of=none) %}
  {%- set settings = vcmt._pinned_query_settings() -%}
  {%- do settings.update(vcmt._holder_settings(holder_of)) -%}
  {{ return(vcmt._settings_clause(settings)) }}
{% endmacro %}


{#- What names a statement as one of the load holding the lock of the model
    `relation` belongs to (none: no setting): its `log_comment`, which
    system.processes shows in `Settings` whatever the statement's length,
    `log_queries_cut_to_length` or the server's `query_masking_rules`
    (those cut and mask the statement's text only). The lock finds a
    holder's running statements by it (lock_reads.sql `_holder_statements`).
    A statement's own SETTINGS win over a profile's or session's; a model's
    `insert_settings` may not set it (_validate_insert_settings). -#}
{% macro _holder_settings(relation) %}
  {{ return({} if relation is none else {'log_comment': vcmt._lock_holder(relation)}) }}
{% endmacro %}
