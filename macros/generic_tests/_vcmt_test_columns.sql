{#- Column names and exact ClickHouse types of a relation, in table order.
    system.columns keeps the type string as the server spells it
    (LowCardinality, Nullable, Decimal scale), which casts and tolerance
    decisions need verbatim. -#}
{% macro _vcmt_test_columns(relation) %}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set found = run_query(
      "select name, type from system.columns where database = "
      ~ vcmt._sql_string(relation.schema) ~ " and table = "
      ~ vcmt._sql_string(relation.identifier) ~ " order by position") -%}
  {%- set columns = [] -%}
  {%- for row in found.rows -%}
    {%- do columns.append({'name': row[0], 'type': row[1]}) -%}
  {%- endfor -%}
  {{ return(columns) }}
{% endmacro %}
