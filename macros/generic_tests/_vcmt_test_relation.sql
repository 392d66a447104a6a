{#- The tested relation itself. Tests that read with FINAL or inspect the
    table's metadata cannot run on the `(select ... where ...)` subquery dbt
    passes when a test sets the `where` config. -#}
{% macro _vcmt_test_relation(test_name, model, argument='model') %}
  {%- if model is string -%}
    {{ exceptions.raise_compiler_error(
      "vcmt." ~ test_name ~ ": argument `" ~ argument ~ "` must be a table (a ref or a source), because the "
      ~ "test reads it with FINAL or from system tables; a `where` config turns it into a subquery. "
      ~ "Filter in a model instead; got `" ~ model ~ "`.") }}
  {%- endif -%}
  {{ return(model) }}
{% endmacro %}
