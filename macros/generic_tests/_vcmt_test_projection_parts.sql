{#- Split an aggregating projection's query into its select list and its
    GROUP BY list (none when it aggregates the whole table). Projection queries
    have no FROM, so a test rebuilds `select <list> from <table> group by <keys>`
    from these parts. system.projections stores the query normalised, one
    `SELECT ... GROUP BY ...` line; the match is case-insensitive so a query
    taken from a model config works too. -#}
{% macro _vcmt_test_projection_parts(query) %}
  {%- set found = modules.re.match('(?is)^\\s*select\\s+(.+?)(?:\\s+group\\s+by\\s+(.+?))?\\s*;?\\s*$', query) -%}
  {%- if found is none -%}
    {{ exceptions.raise_compiler_error("vcmt.projection_matches_base: cannot read projection query `" ~ query
        ~ "`; expected `select ... [group by ...]`.") }}
  {%- endif -%}
  {{ return({'select_list': found.group(1), 'group_by': found.group(2)}) }}
{% endmacro %}
