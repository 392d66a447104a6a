{% macro _validate_merge_policy(column, policy, keys, version, sign) %}
  {%- set builtins = ['replace', 'keep', 'greatest', 'least', 'sum', 'coalesce'] -%}
  {%- if column in keys or column in [version, sign] -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `merge` cannot set a policy for `" ~ column ~ "`: key, "
        ~ "version and sign columns are never merged.") }}
  {%- endif -%}
  {%- if policy is not string or (policy not in builtins and '{old}' not in policy and '{new}' not in policy) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `merge` for column `" ~ column ~ "` must be one of " ~ builtins
        ~ " or a SQL expression using {old} and {new} (e.g. '{old} + {new}'); got `" ~ policy ~ "`.") }}
  {%- endif -%}
{% endmacro %}


{#- The value an accepted upsert writes for one column, given the stored row
    (`old`, absent when the key has no live row) and the event (`new`).
    greatest/least/sum ignore a NULL side so a partial update never wipes a value. -#}
{% macro merge_expression(policy, old, new, has_old) %}
  {{ return(adapter.dispatch('merge_expression', 'vcmt')(policy, old, new, has_old)) }}
{% endmacro %}

{% macro default__merge_expression(policy, old, new, has_old) %}
  {%- if policy == 'replace' -%}
    {%- set combined = new -%}
  {%- elif policy == 'keep' -%}
    {%- set combined = old -%}
  {%- elif policy in ['greatest', 'least'] -%}
    {%- set combined = 'if(isNull(' ~ new ~ '), ' ~ old ~ ', if(isNull(' ~ old ~ '), ' ~ new ~ ', ' ~ policy ~ '(' ~ old
        ~ ', ' ~ new ~ ')))' -%}
  {%- elif policy == 'sum' -%}
    {%- set combined = 'if(isNull(' ~ new ~ '), ' ~ old ~ ', if(isNull(' ~ old ~ '), ' ~ new ~ ', ' ~ old ~ ' + ' ~ new
        ~ '))' -%}
  {%- elif policy == 'coalesce' -%}
    {%- set combined = 'coalesce(' ~ new ~ ', ' ~ old ~ ')' -%}
  {%- else -%}
    {%- set combined = '(' ~ vcmt._user_sql(policy | replace('{old}', old) | replace('{new}', new)) ~ ')' -%}
  {%- endif -%}
  {%- if policy == 'replace' -%}
    {{ return(new) }}
  {%- endif -%}
  {{ return('if(' ~ has_old ~ ', ' ~ combined ~ ', ' ~ new ~ ')') }}
{% endmacro %}


{#- The aggregate that folds one column of a key's accepted upserts (all
    newer than its state, no delete between them, versions strictly
    increasing in `version`) into one upsert whose merge with the stored row
    gives what applying them one by one gives. none when the policy is not
    associative for this type: SQL policies; `sum` on anything but integers
    (float rounding depends on the order, Decimal may overflow half-way);
    `greatest`/`least` on floats (greatest() and max() disagree on NaN).
    NULL handling matches merge_expression: max/min/sum skip NULLs and give
    NULL only when every value is NULL. The tuple keeps argMax/argMin from
    skipping NULLs. See docs/design.md#hot-keys. -#}
{% macro _fold_aggregate(policy, column, data_type, version) %}
  {%- set scalar = vcmt._scalar_type(data_type) or '' -%}
  {%- set is_float = modules.re.match('^B?Float', scalar) is not none -%}
  {%- if policy == 'replace' -%}
    {{ return('argMax(tuple(' ~ column ~ '), ' ~ version ~ ').1') }}
  {%- elif policy == 'keep' -%}
    {{ return('argMin(tuple(' ~ column ~ '), ' ~ version ~ ').1') }}
  {%- elif policy == 'coalesce' -%}
    {{ return('argMaxIf(' ~ column ~ ', ' ~ version ~ ', isNotNull(' ~ column ~ '))') }}
  {%- elif policy in ['greatest', 'least'] and scalar and not is_float -%}
    {{ return(('max(' if policy == 'greatest' else 'min(') ~ column ~ ')') }}
  {%- elif policy == 'sum' and modules.re.match('^U?Int[0-9]+$', scalar) -%}
    {{ return('sum(' ~ column ~ ')') }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}
