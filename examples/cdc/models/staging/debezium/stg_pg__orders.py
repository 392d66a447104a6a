"""`orders` from the PostgreSQL connector (topic pg.public.orders): every landed line, typed, with its kind.

Change rows feed fct_orders; truncates, tombstones, heartbeats, transaction markers and malformed lines
are rows of the same table (`_kind`, `_reason`, `_raw`). docs/staging.md
"""

from vcmt_staging import stage_new_batches


def model(dbt, session):
    dbt.config(
        materialized="incremental",
        incremental_strategy="insert_overwrite",
        file_format="parquet",
        partition_by=["_batch_id"],
    )
    # The topic's new batches only: those this table holds already are not read again.
    return stage_new_batches(
        dbt,
        session,
        topic_path=dbt.config.meta_get("topic_path"),
        flavour="postgres",
        key=["tenant_id", "order_id"],
        columns={
            "tenant_id": "int",
            "order_id": "bigint",
            "customer_id": "bigint",
            "status": "string",
            "amount": "decimal(12,2)",
            "note": "string",
            "created_at": "timestamp",
        },
    )
