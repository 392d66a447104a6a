{#- A ClickHouse string literal for a value that comes from names or query
    text (schema, table, projection name), escaped so a quote cannot end it. -#}
{% macro _vcmt_test_string_literal(text) %}
  {{ return("'" ~ (text | string | replace("\\", "\\\\") | replace("'", "\\'")) ~ "'") }}
{% endmacro %}
