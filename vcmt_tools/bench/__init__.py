"""`make bench` / `python -m vcmt_tools.bench`: vcmt_upsert against plain INSERT and the reference SQL.

One run on the embedded engine: build the target with the DDL the
materialization generates (a throwaway dbt project), clone it into identical
tables, time INSERT, UPSERT (loader SQL and whole `dbt run`), the reference
article's transform and the report query three ways, check correctness, profile
the transform's pieces and write `bench/results/latest.{md,png}`.
"""
