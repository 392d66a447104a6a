{#- Quote plain column names; leave anything else as SQL. Arguments such as
    `group_by` and `metrics` accept expressions (`toDate(created_at)`,
    `amount * 100`), which must reach the query unquoted. -#}
{% macro _vcmt_test_quote(column_or_expression) %}
  {%- set text = column_or_expression | trim -%}
  {%- if modules.re.match('^[A-Za-z_][A-Za-z0-9_]*$', text) -%}
    {{ return(vcmt._quote(text)) }}
  {%- endif -%}
  {{ return(text) }}
{% endmacro %}
