"""Fixtures of the CDC tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from vcmt_lab.dbt_project import spark_session_parameters


@pytest.fixture(scope="module")
def spark(lab_dir: Path):
    """The local SparkSession, built with the same parameters as dbt's `method: session`
    targets, so that later dbt runs in this process reuse it (Hive metastore included)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.enableHiveSupport()
    for key, value in spark_session_parameters(lab_dir).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
