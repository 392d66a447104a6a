from dbt.adapters.spark.connections import SparkConnectionManager


class VcmtSparkConnectionManager(SparkConnectionManager):
    TYPE = "vcmt_spark"
