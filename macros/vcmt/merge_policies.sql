{% macro _validate_merge_policy(column, policy, keys, version, sign) %}
  {%- set builtins = ['replace', 'keep', 'greatest', 'least', 'sum', 'coalesce'] -%}
  {%- if column in keys or column in [version, sign] -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `merge` cannot set a policy for `" ~ column ~ "`: key, version and sign columns are never merged.") }}
  {%- endif -%}
  {%- if policy is not string or (policy not in builtins and '{old}' not in policy and '{new}' not in policy) -%}
    {{ exceptions.raise_compiler_error("vcmt_upsert: `merge` for column `" ~ column ~ "` must be one of " ~ builtins ~ " or a SQL expression using {old} and {new} (e.g. '{old} + {new}'); got `" ~ policy ~ "`.") }}
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
    {%- set combined = 'if(isNull(' ~ new ~ '), ' ~ old ~ ', if(isNull(' ~ old ~ '), ' ~ new ~ ', ' ~ policy ~ '(' ~ old ~ ', ' ~ new ~ ')))' -%}
  {%- elif policy == 'sum' -%}
    {%- set combined = 'if(isNull(' ~ new ~ '), ' ~ old ~ ', if(isNull(' ~ old ~ '), ' ~ new ~ ', ' ~ old ~ ' + ' ~ new ~ '))' -%}
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
