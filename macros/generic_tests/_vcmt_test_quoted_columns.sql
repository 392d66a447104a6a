{#- Column names as a quoted, comma-separated SQL list (`a`, `b`). -#}
{% macro _vcmt_test_quoted_columns(names) %}
  {%- set quoted = [] -%}
  {%- for name in names -%}{%- do quoted.append(vcmt._quote(name)) -%}{%- endfor -%}
  {{ return(quoted | join(', ')) }}
{% endmacro %}
