{#- The chdb adapter adds no macros of its own: dbt resolves `chdb__` first and
    then falls back to dbt-clickhouse's `clickhouse__` implementations. -#}
