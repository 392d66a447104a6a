from dataclasses import dataclass

from dbt.adapters.spark.connections import SparkCredentials


@dataclass
class VcmtSparkCredentials(SparkCredentials):
    """dbt-spark's credentials under the plugin's own type name; every field means what it means there."""

    @property
    def type(self) -> str:
        return "vcmt_spark"
