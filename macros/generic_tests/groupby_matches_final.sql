{% test groupby_matches_final(model, group_by, metrics=[], tolerance=0.000000001,
    sign=none) %}{{ return(adapter.dispatch('test_groupby_matches_final', 'vcmt')(model, group_by, metrics, tolerance,
    sign)) }}{% endtest %}

{#- The promise of a VCMT table: a sign-weighted GROUP BY without FINAL equals
    the same aggregation over the collapsed state. It breaks when a cancel row
    does not copy the state it cancels (FINAL drops the pair, the sums keep
    the difference) or when a state is never cancelled. Every group is
    compared, those whose rows net to sign 0 too: a group FINAL does not have
    counts as 0 with metrics 0, so a bad cancel row in a group its key has
    left still shows. Only Float sums, which depend on the order rows are
    added in, get the tolerance; Int and Decimal sums are exact. Groups are
    joined on their text form so NULL group values match each other. -#}
{% macro default__test_groupby_matches_final(model, group_by, metrics, tolerance, sign) %}
  {#- At parse time dbt renders the test only to find its dependencies; the
      graph and the tables are not there yet, and an error would stop the
      whole project instead of this one test. -#}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set name = 'groupby_matches_final' -%}
  {%- set relation = vcmt._vcmt_test_relation(name, model) -%}
  {%- set s = vcmt._quote(vcmt._vcmt_test_args(name, model, sign=sign, require_key=false).sign) -%}
  {%- set group_by = [group_by] if group_by is string else group_by -%}
  {%- if group_by is none or group_by is mapping or group_by | length == 0 -%}
    {{ exceptions.raise_compiler_error("vcmt.groupby_matches_final: argument `group_by` must be a non-empty list of "
        ~ "columns or expressions, e.g. ['status']; got `" ~ group_by ~ "`.") }}
  {%- endif -%}
  {%- set metrics = [metrics] if metrics is string else metrics or [] -%}
  {%- if metrics is mapping -%}
    {{ exceptions.raise_compiler_error("vcmt.groupby_matches_final: argument `metrics` must be a list of columns or "
        ~ "expressions, e.g. ['amount']; got `" ~ metrics ~ "`.") }}
  {%- endif -%}
  {%- if tolerance is not number or tolerance < 0 -%}
    {{ exceptions.raise_compiler_error("vcmt.groupby_matches_final: argument `tolerance` must be a number >= 0; got `"
        ~ tolerance ~ "`.") }}
  {%- endif -%}
  {%- set groups = [] -%}
  {%- for g in group_by -%}{%- do groups.append(vcmt._vcmt_test_quote(g)) -%}{%- endfor -%}
  {%- set group_list = groups | join(', ') -%}
  {%- set measures = [] -%}
  {%- for m in metrics -%}{%- do measures.append(vcmt._vcmt_test_quote(m)) -%}{%- endfor -%}
  {%- set sql -%}
with vcmt_groupby as (
    select
        tuple({{ group_list }}) as vcmt_group,
        toString(vcmt_group) as vcmt_group_key,
        1 as vcmt_present,
        sum({{ s }}) as vcmt_count
        {%- for m in measures %},
        sum(({{ m }}) * {{ s }}) as vcmt_metric_{{ loop.index }}
        {%- endfor %}
    from {{ relation }}
    group by {{ group_list }}
),
vcmt_final as (
    select
        tuple({{ group_list }}) as vcmt_group,
        toString(vcmt_group) as vcmt_group_key,
        1 as vcmt_present,
        count() as vcmt_count
        {%- for m in measures %},
        sum({{ m }}) as vcmt_metric_{{ loop.index }}
        {%- endfor %}
    from {{ relation }} final
    where {{ s }} = 1
    group by {{ group_list }}
)
select
    {%- for g in group_by %}
    tupleElement(if(gb.vcmt_present = 1, gb.vcmt_group, fin.vcmt_group), {{ loop.index }})
      as {{ vcmt._quote(g | trim) }},
    {%- endfor %}
    if(gb.vcmt_present = 1, gb.vcmt_count, null) as groupby_count,
    if(fin.vcmt_present = 1, fin.vcmt_count, null) as final_count
    {%- for m in metrics %},
    if(gb.vcmt_present = 1, gb.vcmt_metric_{{ loop.index }}, null) as {{ vcmt._quote('groupby_' ~ (m | trim)) }},
    if(fin.vcmt_present = 1, fin.vcmt_metric_{{ loop.index }}, null) as {{ vcmt._quote('final_' ~ (m | trim)) }}
    {%- endfor %}
from vcmt_groupby as gb
full outer join vcmt_final as fin on gb.vcmt_group_key = fin.vcmt_group_key
where not (
    if(gb.vcmt_present = 1, gb.vcmt_count, 0) = if(fin.vcmt_present = 1, fin.vcmt_count, 0)
    {%- for m in measures %}
    {%- set a = 'if(gb.vcmt_present = 1, coalesce(gb.vcmt_metric_' ~ loop.index ~ ', 0), 0)' %}
    {%- set b = 'if(fin.vcmt_present = 1, coalesce(fin.vcmt_metric_' ~ loop.index ~ ', 0), 0)' %}
    and if(position(toTypeName(gb.vcmt_metric_{{ loop.index }}), 'Float') > 0,
           {{ vcmt._vcmt_test_same(a, b, tolerance) }}, {{ vcmt._vcmt_test_same(a, b) }})
    {%- endfor %}
)
  {%- endset -%}
  {{ return(vcmt._vcmt_test_sql(model, sql)) }}
{% endmacro %}
