{% test single_live_version(model, unique_key=none, version=none, sign=none) %}{{ return(adapter.dispatch('test_single_live_version', 'vcmt')(model, unique_key, version, sign)) }}{% endtest %}

{#- A version is live while its signs sum above zero. Two live versions of one
    key mean a state row was never cancelled: FINAL then returns both rows and
    every sign-weighted aggregate counts the key twice. -#}
{% macro default__test_single_live_version(model, unique_key, version, sign) %}
  {#- At parse time dbt renders the test only to find its dependencies; the
      graph and the tables are not there yet, and an error would stop the
      whole project instead of this one test. -#}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set args = vcmt._vcmt_test_args('single_live_version', model, unique_key, version, sign) -%}
  {%- set keys = vcmt._column_list(args.unique_key) -%}
  {%- set v = vcmt._quote(args.version) -%}
  {%- set s = vcmt._quote(args.sign) -%}
select
    {{ keys }},
    count() as live_versions,
    arraySort(groupArray(vcmt_live_version)) as versions
from (
    select {{ keys }}, {{ v }} as vcmt_live_version
    from {{ model }}
    group by {{ keys }}, {{ v }}
    having sum({{ s }}) > 0
) as vcmt_live
group by {{ keys }}
having count() > 1
{% endmacro %}
