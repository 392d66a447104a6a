{#- A column argument as a list of names: accepts a list, one name, or the
    comma-separated string form dbt incremental configs allow ('a, b').
    Returns [] for none or empty input so callers can say what is missing. -#}
{% macro _vcmt_test_column_list(columns) %}
  {%- if columns is none -%}{{ return([]) }}{%- endif -%}
  {%- set raw = columns.split(',') if columns is string else columns | list -%}
  {%- set names = [] -%}
  {%- for c in raw if c is string and c | trim != '' -%}
    {%- do names.append(c | trim) -%}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}
