"""`customers` from the MySQL connector (topic mysql.shop.customers, no schemas): every landed line, typed.

No schema in the lines: the declared types decide (`lifetime_value` is Decimal bytes at scale 2,
`birth_date` days since 1970-01-01). docs/staging.md
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
        flavour="mysql",
        key=["customer_id"],
        columns={
            "customer_id": "bigint",
            "name": "string",
            "email": "string",
            "tier": "string",
            "lifetime_value": "decimal(12,2)",
            "birth_date": "date",
        },
    )
