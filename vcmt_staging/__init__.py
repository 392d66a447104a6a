"""Python staging of Debezium change events on Spark (docs/staging.md).

`debezium` holds the decoding, as PySpark Column expressions only (no UDFs, no
SparkContext, so it runs on classic Spark and on Spark Connect); `topic` holds
`stage_topic`, the declared-columns API, and `stage_new_batches`, the body of
a Python staging model.
"""

from vcmt_staging.topic import record_staged, stage_new_batches, stage_topic, staged_batches

__all__ = ["record_staged", "stage_new_batches", "stage_topic", "staged_batches"]
