{#- The package's one data test: it warns (dbt's WARN= counts it) when dbt's or a package's generic tests on
    a vcmt_upsert model read the stored rows, because dbt_project.yml lacks the dispatch line of the README's
    "dbt's own tests and downstream models"; its rows name each such test and the line
    (macros/generic_tests/dispatch_hint.sql). Runs on ClickHouse targets only. -#}
{{ config(severity='warn', enabled=target.type in ['chdb', 'clickhouse']) }}
{{ vcmt._tests_reading_stored_rows_sql() }}
