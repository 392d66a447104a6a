{#- The highest value of the model's `watermark` column loaded so far, as a SQL
    literal, or `default` when nothing was loaded yet. Recorded per run in
    `<model>__loads`, so it also covers input that was skipped as stale. It
    never moves backwards: an empty run records nothing, and a backfill of
    older values through `vcmt.load_stage` keeps the highest.

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
    {{ exceptions.raise_compiler_error("vcmt.watermark(): model `" ~ this.identifier ~ "` sets no `watermark` config; set watermark='<input column>' (e.g. '_batch_id').") }}
  {%- endif -%}
  {%- set objs = vcmt.objects(this.incorporate(type='table'), config.get('sharding_key')) -%}
  {%- if not vcmt._relation_exists(objs.loads) or should_full_refresh() -%}
    {{ return(fallback) }}
  {%- endif -%}
  {%- set value = vcmt._recorded_watermark(objs) -%}
  {%- if value is none -%}{{ return(fallback) }}{%- endif -%}
  {{ return(value if modules.re.match('^-?[0-9]+(\\.[0-9]+)?$', value) else vcmt._sql_string(value)) }}
{% endmacro %}
