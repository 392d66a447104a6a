{#- Rows where projection `name` and the base table answer its query
    differently: a group only one side returns, or a value that differs
    (numbers within `tolerance`, since pre-aggregated float sums are added in
    another order). Column types come from DESCRIBE so only Float values get
    the tolerance: Int and Decimal sums are exact. -#}
{% macro _vcmt_test_projection_diff(relation, name, query, tolerance) %}
  {%- set parts = vcmt._vcmt_test_projection_parts(query) -%}
  {%- set described = run_query(
      "describe table (select " ~ parts.select_list ~ " from " ~ relation
      ~ (" group by " ~ parts.group_by if parts.group_by else "") ~ ")") -%}
  {%- set same = [] -%}
  {%- for column in described.rows -%}
    {%- set a = 'tupleElement(proj.vcmt_row, ' ~ loop.index ~ ')' -%}
    {%- set b = 'tupleElement(base.vcmt_row, ' ~ loop.index ~ ')' -%}
    {%- set numeric = modules.re.search('Float', column[1]) is not none -%}
    {%- do same.append(vcmt._vcmt_test_same(a, b, tolerance if numeric else none)) -%}
  {%- endfor -%}
select
    {{ vcmt._sql_string(name) }} as projection_name,
    toString(if(proj.vcmt_present = 1, proj.vcmt_group, base.vcmt_group)) as group_key,
    proj.vcmt_present = 1 as in_projection,
    base.vcmt_present = 1 as in_base,
    if(proj.vcmt_present = 1, toString(proj.vcmt_row), '') as projection_row,
    if(base.vcmt_present = 1, toString(base.vcmt_row), '') as base_row
from ({{ vcmt._vcmt_test_projection_side(relation, parts, true) }}) as proj
full outer join ({{ vcmt._vcmt_test_projection_side(relation, parts, false) }}) as base
    on proj.vcmt_group_key = base.vcmt_group_key
where not (
    coalesce(proj.vcmt_present = 1 and base.vcmt_present = 1, false)
    and {{ same | join('\n    and ') }}
)
{% endmacro %}
