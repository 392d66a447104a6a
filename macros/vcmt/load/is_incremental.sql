{#- True when the model's target exists and this is not a full refresh: the
    SELECT may then read only new input (see `vcmt.watermark()`).
    dbt's own is_incremental() is false for every materialization but
    `incremental`, hence this one. -#}
{% macro is_incremental() %}
  {{ return(adapter.dispatch('is_incremental', 'vcmt')()) }}
{% endmacro %}

{% macro default__is_incremental() %}
  {%- if not execute -%}{{ return(false) }}{%- endif -%}
  {%- set relation = adapter.get_relation(database=this.database, schema=this.schema, identifier=this.identifier) -%}
  {{ return(relation is not none and not should_full_refresh()) }}
{% endmacro %}
