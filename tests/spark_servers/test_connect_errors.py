"""`method: connect` fails fast and says what to fix when no Spark Connect server answers (no server needed)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.conftest import make_project
from vcmt_lab.spark_local_cluster import free_port


def test_unreachable_spark_connect_server_fails_within_connect_timeout(
    tmp_path: Path, chdb_path: Path, lab_dir: Path
) -> None:
    port = free_port()  # nothing listens there
    proj = make_project(
        tmp_path / "proj", "connect_errors", chdb_path, lab_dir, spark_servers={"connect": ("127.0.0.1", port)}
    )
    started = time.monotonic()
    run = proj.dbt("debug", expect_pass=False, target="spark_connect")
    assert time.monotonic() - started < 60
    assert f"no Spark Connect server answered at 127.0.0.1:{port} within connect_timeout=10s" in run.log, run.log
    assert "fix host and port in the profile" in run.log
