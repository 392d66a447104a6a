from __future__ import annotations

from typing import Any

from dbt.adapters.base import PythonJobHelper
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.spark.impl import SparkAdapter
from dbt.adapters.vcmt_spark.connections import VcmtSparkConnectionManager
from dbt.adapters.vcmt_spark.credentials import VcmtSparkConnectionMethod
from dbt.adapters.vcmt_spark.python_submissions import SessionPythonJobHelper


class VcmtSparkAdapter(SparkAdapter):
    """SparkAdapter with a `session` submission method for Python models.

    On `method: session` and `method: connect` it is the default, so a Python
    model needs no `submission_method` config; on other methods dbt-spark's
    Databricks helpers stay the default.
    """

    ConnectionManager = VcmtSparkConnectionManager

    @classmethod
    def type(cls) -> str:
        return "vcmt_spark"

    @classmethod
    def get_adapter_run_info(cls, config: Any) -> Any:
        # dbt derives the module name from the class name ("VcmtSparkAdapter" -> "vcmtspark"),
        # which is not this plugin's module: name it.
        from dataclasses import replace
        from importlib import import_module

        return replace(
            SparkAdapter.get_adapter_run_info(config),
            adapter_name="vcmt_spark",
            adapter_version=import_module("dbt.adapters.vcmt_spark.__version__").version,
        )

    @property
    def default_python_submission_method(self) -> str:
        if self.config.credentials.method in (VcmtSparkConnectionMethod.SESSION, VcmtSparkConnectionMethod.CONNECT):
            return "session"
        return super().default_python_submission_method

    @property
    def python_submission_helpers(self) -> dict[str, type[PythonJobHelper]]:
        return {**super().python_submission_helpers, "session": SessionPythonJobHelper}

    def generate_python_submission_response(self, submission_result: Any) -> Any:
        """The model's result: its staging's run summaries (SessionPythonJobHelper.submit) when it reported
        any, as the status line's message and run_results.json's adapter_response, else dbt-spark's "OK"."""
        if not (isinstance(submission_result, list) and submission_result):  # dbt-spark's helpers: no summary
            return self.connections.get_response(None)
        return AdapterResponse(_message="; ".join(submission_result), code="VCMT_STAGING")
