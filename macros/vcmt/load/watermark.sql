{#- The highest value of the model's `watermark` column loaded so far, or
    `default` when nothing was loaded yet. Recorded per run in
    `<model>__loads`, so it also covers input that was skipped as stale. It
    never moves backwards: an empty run records NULL, and a backfill of
    older values through `vcmt.load_stage` keeps the highest.

    dbt renders it when it compiles the model, before the run takes the
    model's lock, so once a value is recorded it renders as a scalar
    subquery that the engine evaluates when each statement starts, under the
    lock: a run that waited for another load reads above that load's
    watermark (docs/design.md#watermark). The subquery gives the recorded
    text, which the engine converts to the column's type where the column
    is compared with it: exact for every type (a number literal, as it
    rendered before, is read as a 64-bit number, wrong for UInt256, Int128
    and Float32 columns, and no match for a String one).

      {{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id') }}
      select ... from {{ source('lake', 'changes') }}
      {% if vcmt.is_incremental() %} where _batch_id > {{ vcmt.watermark() }} {% endif %}
-#}
{% macro watermark(default=none) %}
  {{ return(adapter.dispatch('watermark', 'vcmt')(default)) }}
{% endmacro %}

{% macro default__watermark(default=none) %}
  {%- set fallback = default if default is not none else 'null' -%}
  {%- if not execute -%}{{ return(fallback) }}{%- endif -%}
  {%- if config.get('watermark') is none -%}
    {{ exceptions.raise_compiler_error("vcmt.watermark(): model `" ~ this.identifier ~ "` sets no `watermark` config; "
        ~ "set watermark='<input column>' (e.g. '_batch_id').") }}
  {%- endif -%}
  {%- set objs = vcmt.objects(this.incorporate(type='table'), config.get('sharding_key')) -%}
  {%- if not vcmt._relation_exists(objs.loads) or should_full_refresh() -%}
    {{ return(fallback) }}
  {%- endif -%}
  {%- set value = vcmt._recorded_watermark(objs) -%}
  {%- if value is none -%}{{ return(fallback) }}{%- endif -%}
  {#- The value seen now stands in if the record is gone when the statement runs (a full refresh's empty load). -#}
  {{ return('ifNull((' ~ vcmt._recorded_watermark_sql(objs) ~ '), ' ~ vcmt._sql_string(value) ~ ')') }}
{% endmacro %}


{#- SQL for the watermark to record after loading a batch whose highest
    watermark value is `batch_max`: the greater of it and the highest recorded
    so far, compared as the column's type in the target (the type `batch_max`
    was read as), so a backfill of older batches never lowers it. A recorded
    value that no longer fits that type (the watermark moved to another
    column) is ignored. none when the batch had no rows: an empty run moves
    nothing. -#}
{% macro _next_watermark_sql(cfg, objs, columns, select_columns, batch_max) %}
  {%- if batch_max is none -%}{{ return(none) }}{%- endif -%}
  {%- set typed = (columns + select_columns) | selectattr('name', 'equalto', cfg.watermark) | first -%}
  {%- set scalar = vcmt._sql_string(vcmt._scalar_type(typed.data_type) or 'String') -%}
  {%- set batch = vcmt._sql_string(batch_max) -%}
  {%- set previous = '(' ~ vcmt._recorded_watermark_sql(objs) ~ ')' -%}
  {{ return('ifNull((select toString(max(_vcmt_x)) from (select arrayJoin([accurateCastOrNull(' ~ batch ~ ', ' ~ scalar
      ~ '), accurateCastOrNull('
            ~ previous ~ ', ' ~ scalar ~ ')]) as _vcmt_x)), ' ~ batch ~ ')') }}
{% endmacro %}


{#- The highest watermark recorded in `<model>__loads`, as text, or none.
    Every recorded value is the running maximum, so the latest one is it. -#}
{% macro _recorded_watermark(objs) %}
  {%- set rows = run_query(vcmt._recorded_watermark_sql(objs) ~ ' ' ~ vcmt._read_settings()).rows -%}
  {{ return(rows[0][0] if rows | length > 0 else none) }}
{% endmacro %}


{% macro _recorded_watermark_sql(objs) %}
  {{ return('select watermark from ' ~ vcmt._all_shards(objs, 'loads') ~ ' where watermark is not null order by '
      ~ 'loaded_at desc limit 1') }}
{% endmacro %}


{#- An aggregate: the highest value of `expr` as text, NULL over no rows
    (max() over nothing is the type's default, not "no value"). -#}
{% macro _highest_as_text(expr) %}
  {{ return('if(count() = 0, null, toString(max(' ~ expr ~ ')))') }}
{% endmacro %}
