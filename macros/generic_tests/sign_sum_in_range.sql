{% test sign_sum_in_range(model, unique_key=none, version=none, sign=none,
    per_version=true) %}{{ return(adapter.dispatch('test_sign_sum_in_range', 'vcmt')(model, unique_key, version, sign,
    per_version)) }}{% endtest %}

{#- A key whose signs do not sum to 0 (deleted) or 1 (present) has a state row
    without its cancel, a cancel without its state, or a duplicate. The per
    (key, version) check (on by default) adds what the per-key sum can hide: a
    duplicated state row offset by a cancel stamped with another version
    (+1, +1, -1 sums to 1 per key). -#}
{% macro default__test_sign_sum_in_range(model, unique_key, version, sign, per_version) %}
  {#- At parse time dbt renders the test only to find its dependencies; the
      graph and the tables are not there yet, and an error would stop the
      whole project instead of this one test. -#}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set args = vcmt._vcmt_test_args('sign_sum_in_range', model, unique_key, version, sign) -%}
  {%- if per_version not in [true, false] -%}
    {{ exceptions.raise_compiler_error("vcmt.sign_sum_in_range: argument `per_version` must be true or false; got `"
        ~ per_version ~ "`.") }}
  {%- endif -%}
  {%- set keys = vcmt._column_list(args.unique_key) -%}
  {%- set v = vcmt._quote(args.version) -%}
  {%- set s = vcmt._quote(args.sign) -%}
select
    'key' as check_level,
    {{ keys }},
    null as {{ v }},
    sum({{ s }}) as sign_sum
from {{ model }}
group by {{ keys }}
having sum({{ s }}) not in (0, 1)
{%- if per_version %}
union all
select
    'key_version' as check_level,
    {{ keys }},
    {{ v }},
    sum({{ s }}) as sign_sum
from {{ model }}
group by {{ keys }}, {{ v }}
having sum({{ s }}) not in (0, 1)
{%- endif %}
{% endmacro %}
