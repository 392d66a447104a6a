"""Which chDB data directory a `type: chdb` profile opens, checked in dbt subprocesses.

chDB allows one engine path per process, so every scenario here that needs a
path other than the session's runs dbt in another OS process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import clickhouse_connect
import yaml
from dbt.adapters.chdb.client import engine_locked_message

# The `dbt` entry point installed next to this interpreter.
DBT = Path(sys.executable).with_name("dbt")

TABLE_MODEL = "{{ config(materialized='table', order_by='id') }} select toUInt32(number) as id from numbers(3)"


def _write_project(root: Path, chdb_path: str) -> Path:
    """A package-free dbt project: one table model, a test that it has 3 rows, a test of custom_settings."""
    (root / "models").mkdir(parents=True)
    (root / "tests").mkdir()
    project = {"name": "chdb_path", "version": "1.0", "config-version": 2, "profile": "chdb_path"}
    target = {
        "type": "chdb",
        "path": chdb_path,
        "schema": "sub",
        "threads": 1,
        "custom_settings": {"max_threads": 3},
    }
    profile = {"chdb_path": {"target": "chdb", "outputs": {"chdb": target}}}
    (root / "dbt_project.yml").write_text(yaml.safe_dump(project))
    (root / "profiles.yml").write_text(yaml.safe_dump(profile))
    (root / "models" / "three.sql").write_text(TABLE_MODEL)
    (root / "tests" / "three_has_3_rows.sql").write_text(
        "select n from (select count() as n from {{ ref('three') }}) where n != 3"
    )
    (root / "tests" / "custom_settings_reach_engine.sql").write_text(
        "select getSetting('max_threads') as max_threads where max_threads != 3"
    )
    return root


def _start_dbt(root: Path, command: str) -> subprocess.Popen:
    # A developer's DBT_TARGET, DBT_PROFILES_DIR, ... must not redirect the subprocess.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env.update(DBT_USE_COLORS="false", DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    return subprocess.Popen(
        [str(DBT), command, "--project-dir", str(root), "--profiles-dir", str(root)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    output, _ = proc.communicate(timeout=180)
    return proc.returncode, output


def test_second_process_on_held_path_fails_with_one_line(tmp_path, chdb_path):
    """`dbt debug` and `dbt run` on a path this process holds exit non-zero with one line naming it."""
    root = _write_project(tmp_path / "proj", str(chdb_path))
    holder = clickhouse_connect.get_client(interface="chdb", path=str(chdb_path))
    try:
        assert holder.command("select 1") == 1
        runs = {command: _start_dbt(root, command) for command in ("debug", "run")}
        results = {command: _finish(proc) for command, proc in runs.items()}
    finally:
        holder.close()

    expected = engine_locked_message(os.path.abspath(chdb_path))
    for command, (returncode, output) in results.items():
        assert returncode != 0, f"dbt {command} succeeded:\n{output}"
        assert expected in [line.strip() for line in output.splitlines()], f"dbt {command}:\n{output}"
        assert "Traceback" not in output
        # The engine's own lock message goes to fd 2; the adapter folds it into the line above.
        assert "Cannot lock file" not in output


def test_memory_path_builds_and_tests_model(tmp_path):
    """`path: ':memory:'` builds and tests a model, applies custom_settings, and creates no data directory."""
    root = _write_project(tmp_path / "proj", ":memory:")
    returncode, output = _finish(_start_dbt(root, "build"))
    assert returncode == 0, output
    assert "PASS=3 WARN=0 ERROR=0" in output
    assert not (root / ":memory:").exists()
