"""`vcmt.lake_source` on a ClickHouse server (`type: clickhouse`): file() reads the server's own files under
its user_files_path, so a local lake root outside it is refused before anything is read, naming what the
server can read (docs/staging.md, "A lake on a ClickHouse server")."""

from __future__ import annotations

import shutil
import signal
import uuid
from pathlib import Path

import pytest

from vcmt_lab.dbt_project import DbtProject
from vcmt_lab.faults.harness import inject_program, wait_until_stopped

pytestmark = pytest.mark.engines("http")

MART = """
    {{ config(materialized='vcmt_upsert', unique_key='id') }}
    select id, x, toUInt64(_batch_id) as _version, toInt8(1) as sign from {{ vcmt.lake_source('stg_orders') }}
"""


def _stage(project: DbtProject, lake: Path) -> None:
    """One staged batch of `stg_orders` under `lake`, written by the node itself (it runs on this machine)."""
    folder = lake / "staged" / "stg_orders" / "_batch_id=1"
    folder.mkdir(parents=True)
    project.command(
        f"insert into function file('{folder / 'part-0.parquet'}', 'Parquet') "
        "select toInt32(number + 1) as id, toInt64(10 * (number + 1)) as x from numbers(2)"
    )


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


NEW_FILES_MART = """
    {{ config(materialized='vcmt_upsert', unique_key='id') }}
    select id, x, toUInt64(_batch_id) as _version, toInt8(1) as sign
    from {{ vcmt.lake_source('stg_orders', new_files=true) }}
"""


def _land(project: DbtProject, lake: Path, batch: int, ids: range) -> None:
    folder = lake / "staged" / "stg_orders" / f"_batch_id={batch}"
    folder.mkdir(parents=True, exist_ok=True)
    project.command(
        f"insert into function file('{folder / f'part-{ids.start}.parquet'}', 'Parquet') "
        f"select toInt32(number) as id, toInt64(10 * number) as x from numbers({ids.start}, {len(ids)})"
    )


def _labels(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines()


def test_a_file_landing_during_a_run_is_read_by_the_next_run_once(project: DbtProject, tmp_path: Path) -> None:
    """Issue 40, case 3: a run reads exactly the files it claimed under its lock. A file that lands between its
    claim and its read (here: while the run is stopped right after its claim) is not read by it, and is read by
    the next run, once. With the watermark's listing it was flagged as an amended batch instead."""
    user_files = Path(project.scalar("select value from system.server_settings where name = 'user_files_path'"))
    lake = user_files / f"vcmt_lake_{uuid.uuid4().hex[:8]}"
    created = next(p for p in reversed([lake, *lake.parents]) if not p.exists())
    try:
        project.vars = {"vcmt_lake_root": str(lake)}
        project.model("m", NEW_FILES_MART)
        _land(project, lake, 1, range(0, 2))
        project.dbt("run")
        # A clean run names its statements: the one right after the claim is where the next run stops.
        _land(project, lake, 2, range(2, 4))
        log = tmp_path / "statements.log"
        clean = project.dbt_process(
            "clean",
            "run",
            "--select",
            "m",
            program=inject_program(),
            env={"VCMT_FAULT_LOG": str(log)},
        )
        assert clean.wait(timeout=300) == 0, clean.communicate()[0][-3000:]
        labels = _labels(log)  # `<verb> <object>#<n-th such statement>`
        after = labels[next(i for i, label in enumerate(labels) if label.startswith("insert m__lake_files#")) + 1]

        _land(project, lake, 3, range(4, 6))
        paused = project.dbt_process(
            "paused",
            "run",
            "--select",
            "m",
            program=inject_program(),
            env={"VCMT_FAULT": f"pause@{after}"},
        )
        assert wait_until_stopped(paused, 300), paused.communicate()[0][-3000:]
        _land(project, lake, 4, range(6, 8))  # lands after the claim, before the read
        _land(project, lake, 2, range(8, 9))  # and a file added to a loaded batch
        paused.send_signal(signal.SIGCONT)
        out, _ = paused.communicate(timeout=300)
        assert paused.returncode == 0, out[-3000:]
        assert "1 file to read, not loaded before" in out, out[-3000:]
        assert project.query("select id from m final order by id") == [(i,) for i in range(6)]

        after_run = project.dbt("run")
        assert "2 files to read, not loaded before" in after_run.log, after_run.log[-3000:]
        assert project.query("select id from m final order by id") == [(i,) for i in range(9)]
        assert project.query("select count(), uniqExact(path) from m__lake_files where path != ''") == [(5, 5)]
        assert "0 files to read" in project.dbt("run").log
    finally:
        shutil.rmtree(created, ignore_errors=True)
