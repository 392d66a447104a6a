{#- The chdb adapter dispatches `chdb__` first and then falls back to
    dbt-clickhouse's `clickhouse__` implementations. It overrides only what the
    embedded engine cannot do. -#}

{#- The engine has no users or roles: `grants` are skipped with a warning
    instead of failing on ACCESS_DENIED or UNKNOWN_ROLE. Each GRANT a server
    would run is still parsed by the engine (which needs no users), so a
    privilege a server refuses fails here too, not only in production. -#}
{% macro chdb__apply_grants(relation, grant_config, should_revoke=True) %}
  {%- if grant_config -%}
    {%- set grants = [] -%}
    {%- for privilege, grantees in grant_config.items() -%}
      {%- do grants.append((privilege, get_grant_sql(relation, privilege, [grantees] if grantees is string else grantees) | trim)) -%}
    {%- endfor -%}
    {%- set probes = [] -%}
    {%- for privilege, sql in grants -%}
      {%- do probes.append("formatQueryOrNull('" ~ sql | replace('\\', '\\\\') | replace("'", "\\'") ~ "') is null") -%}
    {%- endfor -%}
    {%- set refused = run_query('select ' ~ probes | join(', ')).rows[0] -%}
    {%- for i in range(grants | length) if refused[i] | int == 1 -%}
      {{ exceptions.raise_compiler_error("grants: `" ~ grants[i][0] ~ "` on " ~ relation ~ " is not a valid grant: ClickHouse cannot parse `" ~ grants[i][1] ~ "`, and a server would refuse it. Use a ClickHouse privilege (select, insert, alter, ...). On type: chdb grants are checked, not applied.") }}
    {%- endfor -%}
    {%- do adapter.skip_grants(relation, grant_config) -%}
  {%- endif -%}
{% endmacro %}
