"""`orders` from the PostgreSQL connector (topic pg.public.orders): every landed line, typed, with its kind.

Change rows feed fct_orders; truncates, tombstones, heartbeats, transaction markers and malformed lines
are rows of the same table (`_kind`, `_reason`, `_raw`). docs/staging.md
"""

from vcmt_tools.staging import stage_topic, staged_batches


def model(dbt, session):
    dbt.config(materialized="incremental", incremental_strategy="insert_overwrite", file_format="parquet",
               partition_by=["_batch_id"])
    # Batches this table holds already are never read again.
    done = staged_batches(session, str(dbt.this)) if dbt.is_incremental else []
    return stage_topic(
        session,
        topic_path=dbt.config.meta_get("topic_path"),
        flavour="postgres",
        key=["tenant_id", "order_id"],
        columns={"tenant_id": "int", "order_id": "bigint", "customer_id": "bigint", "status": "string",
                 "amount": "decimal(12,2)", "note": "string", "created_at": "timestamp"},
        exclude_batches=done,
    )
