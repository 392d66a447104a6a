{% test single_live_version(model, unique_key=none, version=none,
    sign=none) %}{{ return(adapter.dispatch('test_single_live_version', 'vcmt')(model, unique_key, version,
    sign)) }}{% endtest %}

{#- A version is live while its signs sum above zero. Two live versions of one
    key mean a state row was never cancelled: FINAL then returns both rows and
    every sign-weighted aggregate counts the key twice. A version whose signs
    sum outside {0, 1} (a doubled state row sums to 2, an orphan cancel to -1)
    is not one clean live version either: its key fails too. -#}
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
    countIf(vcmt_sign_sum > 0) as live_versions,
    arraySort(groupArrayIf(vcmt_version, vcmt_sign_sum > 0)) as versions,
    arraySort(groupArrayIf(vcmt_version, vcmt_sign_sum not in (0, 1))) as bad_versions
from (
    select {{ keys }}, {{ v }} as vcmt_version, sum({{ s }}) as vcmt_sign_sum
    from {{ model }}
    group by {{ keys }}, {{ v }}
    having sum({{ s }}) != 0
) as vcmt_versions
group by {{ keys }}
having countIf(vcmt_sign_sum > 0) > 1 or countIf(vcmt_sign_sum not in (0, 1)) > 0
{% endmacro %}
