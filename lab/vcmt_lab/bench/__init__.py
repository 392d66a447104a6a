"""`make bench` / `python -m vcmt_lab.bench`: vcmt_upsert against plain INSERT and the anchors.

One run on the embedded engine: build the target with a real `dbt run`, clone
it into identical tables, time plain INSERTs, the UPSERT (the loader's stage
INSERT as dbt ran it, and the whole `dbt run`), every anchor (anchors.py) and
the report query three ways, check every result, and write
`lab/bench/results/latest.{md,json,png}`.
"""
