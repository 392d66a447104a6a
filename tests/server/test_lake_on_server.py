"""`vcmt.lake_source` on a ClickHouse server (`type: clickhouse`): file() reads the server's own files under
its user_files_path, so a local lake root outside it is refused before anything is read, naming what the
server can read (docs/staging.md, "A lake on a ClickHouse server")."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from vcmt_lab.dbt_project import DbtProject

pytestmark = pytest.mark.engines("http")

MART = """
    {{ config(materialized='vcmt_upsert', unique_key='id') }}
    select id, x, toUInt64(_batch_id) as _version, toInt8(1) as sign from {{ vcmt.lake_source('stg_orders') }}
"""


def _stage(project: DbtProject, lake: Path) -> None:
    """One staged batch of `stg_orders` under `lake`, written by the node itself (it runs on this machine)."""
    folder = lake / "staged" / "stg_orders" / "_batch_id=1"
    folder.mkdir(parents=True)
    project.command(f"insert into function file('{folder / 'part-0.parquet'}', 'Parquet') "
                    "select toInt32(number + 1) as id, toInt64(10 * (number + 1)) as x from numbers(2)")


def test_a_lake_outside_the_servers_user_files_path_is_refused(project: DbtProject, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _stage(project, lake)
    user_files = project.scalar("select value from system.server_settings where name = 'user_files_path'")
    project.vars = {"vcmt_lake_root": str(lake)}
    project.model("m", MART)
    refused = project.dbt("run", expect_pass=False)
    assert f"the lake root {lake} (var vcmt_lake_root) is a local path" in refused.log, refused.log[-3000:]
    assert f"only under its user_files_path, {user_files.rstrip('/')}/" in refused.log
    assert "s3://" in refused.log and "A lake on a ClickHouse server" in refused.log
    assert project.query(f"select name from system.tables where database = '{project.schema}'") == []


def test_a_lake_under_the_servers_user_files_path_is_read(project: DbtProject) -> None:
    user_files = Path(project.scalar("select value from system.server_settings where name = 'user_files_path'"))
    lake = user_files / f"vcmt_lake_{uuid.uuid4().hex[:8]}"
    # The folders this test creates (user_files_path itself may not exist yet), removed at the end.
    created = next(p for p in reversed([lake, *lake.parents]) if not p.exists())
    try:
        _stage(project, lake)
        project.vars = {"vcmt_lake_root": str(lake)}
        project.model("m", MART)
        project.dbt("run")
        assert project.query("select id, x from m final order by id") == [(1, 10), (2, 20)]
    finally:
        shutil.rmtree(created, ignore_errors=True)
