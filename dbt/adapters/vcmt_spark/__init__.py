"""dbt adapter plugin `type: vcmt_spark`: dbt-spark, plus Python models on `method: session`.

dbt-spark submits Python models only to Databricks (dbt-spark issue #415).
This plugin subclasses its adapter and adds one submission method, `session`,
that runs the model's code on the SparkSession dbt-spark already uses for SQL.
Everything else (SQL models, materializations, macros) is dbt-spark's.
"""

from dbt.adapters.base import AdapterPlugin
from dbt.adapters.vcmt_spark.connections import VcmtSparkConnectionManager  # noqa: F401
from dbt.adapters.vcmt_spark.credentials import VcmtSparkCredentials
from dbt.adapters.vcmt_spark.impl import VcmtSparkAdapter
from dbt.include import vcmt_spark

Plugin = AdapterPlugin(
    adapter=VcmtSparkAdapter,  # type: ignore[arg-type]
    credentials=VcmtSparkCredentials,
    include_path=vcmt_spark.PACKAGE_PATH,
    dependencies=["spark"],
)
