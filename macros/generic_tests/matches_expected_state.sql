{% test matches_expected_state(model, expected, compare_columns=none, tolerance=0, unique_key=none,
    sign=none) %}{{ return(adapter.dispatch('test_matches_expected_state', 'vcmt')(model, expected, compare_columns,
    tolerance, unique_key, sign)) }}{% endtest %}

{#- The table's current state (FINAL, sign = 1) against an expected relation,
    row by row on the key: `missing` (expected, not in the table), `extra` (in
    the table, not expected) and `different` (same key, other values).
    Expected values are cast to the table's column types, because seeds infer
    their own types and a join on Int64 = UInt64 has no common type. Float and
    Decimal columns may differ by `tolerance` (default 0: exact). -#}
{% macro default__test_matches_expected_state(model, expected, compare_columns, tolerance, unique_key, sign) %}
  {#- At parse time dbt renders the test only to find its dependencies; the
      graph and the tables are not there yet, and an error would stop the
      whole project instead of this one test. -#}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set name = 'matches_expected_state' -%}
  {%- set relation = vcmt._vcmt_test_relation(name, model) -%}
  {%- set expected = vcmt._vcmt_test_relation(name, expected, 'expected') -%}
  {%- set args = vcmt._vcmt_test_args(name, model, unique_key=unique_key, sign=sign) -%}
  {%- set keys = args.unique_key -%}
  {%- set s = vcmt._quote(args.sign) -%}
  {%- if tolerance is not number or tolerance < 0 -%}
    {{ exceptions.raise_compiler_error("vcmt.matches_expected_state: argument `tolerance` must be a number >= 0; got `"
        ~ tolerance ~ "`.") }}
  {%- endif -%}
  {%- set types = vcmt._types_by_name(vcmt._catalog_columns(relation)) -%}
  {%- set expected_names = vcmt._catalog_columns(expected) | map(attribute='name') | list -%}
  {%- if compare_columns is none -%}
    {%- set compare_columns = [] -%}
    {%- for c in expected_names if c not in keys
        and c != args.sign -%}{%- do compare_columns.append(c) -%}{%- endfor -%}
  {%- else -%}
    {%- set compare_columns = vcmt._column_names(compare_columns, 'vcmt.matches_expected_state', 'compare_columns') -%}
  {%- endif -%}
  {%- for c in keys + compare_columns -%}
    {%- if c not in types or c not in expected_names -%}
      {{ exceptions.raise_compiler_error(
        "vcmt.matches_expected_state: column `" ~ c ~ "` (argument `"
            ~ ('unique_key' if c in keys else 'compare_columns')
        ~ "`) must exist in both the tested table " ~ types.keys() | list ~ " and argument `expected` "
        ~ expected_names ~ ".") }}
    {%- endif -%}
  {%- endfor -%}
  {%- set outputs = [] -%}
  {%- for c in keys -%}
    {%- do outputs.append('if(t.vcmt_present = 1, t.' ~ vcmt._quote(c) ~ ', e.' ~ vcmt._quote(c) ~ ') as '
        ~ vcmt._quote(c)) -%}
  {%- endfor -%}
  {%- for c in compare_columns -%}
    {%- do outputs.append('if(t.vcmt_present = 1, t.' ~ vcmt._quote(c) ~ ', null) as ' ~ vcmt._quote(c)) -%}
    {%- do outputs.append('if(e.vcmt_present = 1, e.' ~ vcmt._quote(c) ~ ', null) as ' ~ vcmt._quote('expected_'
        ~ c)) -%}
  {%- endfor -%}
  {%- set joins = [] -%}
  {%- for c in keys -%}{%- do joins.append('t.' ~ vcmt._quote(c) ~ ' = e.' ~ vcmt._quote(c)) -%}{%- endfor -%}
  {%- set diff_sql -%}
with vcmt_target as (
    select
        {%- for c in keys + compare_columns %}
        {{ vcmt._quote(c) }},
        {%- endfor %}
        1 as vcmt_present
    from {{ relation }} final
    where {{ s }} = 1
),
vcmt_expected as (
    select
        {%- for c in keys + compare_columns %}
        cast({{ vcmt._quote(c) }}, {{ vcmt._sql_string(types.get(c, 'String')) }}) as {{ vcmt._quote(c) }},
        {%- endfor %}
        1 as vcmt_present
    from {{ expected }}
)
select
    multiIf(
        coalesce(t.vcmt_present, 0) = 0, 'missing',
        coalesce(e.vcmt_present, 0) = 0, 'extra',
        'different'
    ) as diff_kind,
    {{ outputs | join(',\n    ') }}
from vcmt_target as t
full outer join vcmt_expected as e on {{ joins | join(' and ') }}
where not (
    coalesce(t.vcmt_present = 1 and e.vcmt_present = 1, false)
    {%- for c in compare_columns %}
    {%- set numeric = modules.re.search('Float|Decimal', types.get(c, '')) is not none %}
    and {{ vcmt._vcmt_test_same('t.' ~ vcmt._quote(c), 'e.' ~ vcmt._quote(c), tolerance if numeric else none) }}
    {%- endfor %}
)
  {%- endset -%}
  {%- if vcmt._vcmt_test_reads_nothing(model) -%}{{ return(vcmt._vcmt_test_sql(model, diff_sql)) }}{%- endif -%}
  {%- do vcmt._log_first_differences(relation, diff_sql, keys, compare_columns) -%}
  {{ return(diff_sql) }}
{% endmacro %}


{#- dbt reports only how many rows a test returned: print the first few
    differences, so a failure says which keys and values differ. -#}
{% macro _log_first_differences(relation, diff_sql, keys, compare_columns, shown=5) %}
  {%- set found = run_query('select * from (' ~ diff_sql ~ ') as vcmt_diff limit ' ~ shown) -%}
  {%- if found.rows | length == 0 -%}{{ return(none) }}{%- endif -%}
  {%- set lines = [] -%}
  {%- for row in found.rows -%}
    {%- set key = [] -%}
    {%- for c in keys -%}{%- do key.append(c ~ '=' ~ row[loop.index]) -%}{%- endfor -%}
    {%- set values = [] -%}
    {%- for c in compare_columns -%}
      {%- set i = keys | length + 2 * loop.index - 1 -%}
      {%- do values.append(c ~ ' ' ~ ('NULL' if row[i] is none else row[i]) ~ ' (expected '
                           ~ ('NULL' if row[i + 1] is none else row[i + 1]) ~ ')') -%}
    {%- endfor -%}
    {%- do lines.append('  ' ~ row[0] ~ ' ' ~ key | join(', ') ~ (': ' ~ values | join(', ') if values else '')) -%}
  {%- endfor -%}
  {{ log('vcmt.matches_expected_state ' ~ relation ~ ': first differing rows (up to ' ~ shown ~ '):\n'
         ~ lines | join('\n'), info=true) }}
{% endmacro %}
