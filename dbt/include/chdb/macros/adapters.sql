{#- The chdb adapter dispatches `chdb__` first and then falls back to
    dbt-clickhouse's `clickhouse__` implementations. It overrides only what the
    embedded engine cannot do. -#}

{#- The engine has no users or roles: `grants` are skipped with a warning
    instead of failing on ACCESS_DENIED or UNKNOWN_ROLE. -#}
{% macro chdb__apply_grants(relation, grant_config, should_revoke=True) %}
  {%- if grant_config -%}
    {%- do adapter.skip_grants(relation, grant_config) -%}
  {%- endif -%}
{% endmacro %}
