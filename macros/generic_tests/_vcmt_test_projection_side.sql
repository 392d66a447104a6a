{#- One side of the projection check: the projection's own query against the
    table, each result row as (group, row). `from_projection=false` adds
    `_part_offset >= 0`, always true, but a column no aggregating projection
    stores, so ClickHouse must read the base columns. A SETTINGS clause cannot
    do that here: inside a subquery it does not reach the query plan. -#}
{% macro _vcmt_test_projection_side(relation, parts, from_projection) %}
  {%- set keys = parts.group_by if parts.group_by else '' -%}
    select
        tuple({{ keys }}) as vcmt_group,
        toString(vcmt_group) as vcmt_group_key,
        1 as vcmt_present,
        tuple({{ parts.select_list }}) as vcmt_row
    from {{ relation }}
    {%- if not from_projection %}
    where _part_offset >= 0
    {%- endif %}
    {%- if parts.group_by %}
    group by {{ parts.group_by }}
    {%- endif %}
{% endmacro %}
