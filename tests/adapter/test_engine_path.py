"""Which chDB data directory a `type: chdb` profile opens, checked in dbt subprocesses.

chDB allows one engine path per process, so every scenario here that needs a
path other than the session's runs dbt in another OS process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import clickhouse_connect
import pytest
import yaml

from vcmt_lab.faults.harness import inject_program, wait_until_stopped
from vcmt_lab.faults.inject import sent_statements

# The `dbt` entry point installed next to this interpreter.
DBT = Path(sys.executable).with_name("dbt")

TABLE_MODEL = "{{ config(materialized='table', order_by='id') }} select toUInt32(number) as id from numbers(3)"


def _write_project(root: Path, chdb_path: str, **target_keys) -> Path:
    """A package-free dbt project: one table model, a test that it has 3 rows, a test of custom_settings;
    `target_keys` are added to its profile's target."""
    (root / "models").mkdir(parents=True)
    (root / "tests").mkdir()
    project = {"name": "chdb_path", "version": "1.0", "config-version": 2, "profile": "chdb_path"}
    target = {
        "type": "chdb",
        "path": chdb_path,
        "schema": "sub",
        "threads": 1,
        "custom_settings": {"max_threads": 3},
        **target_keys,
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


def _start_dbt(
    root: Path, command: str, program: list[str] | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """`dbt <command>` on the project at `root`; `program` runs instead of `dbt` (the fault harness's)."""
    # A developer's DBT_TARGET, DBT_PROFILES_DIR, ... must not redirect the subprocess.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    environment.update(DBT_USE_COLORS="false", DBT_SEND_ANONYMOUS_USAGE_STATS="false", **(env or {}))
    return subprocess.Popen(
        [*(program or [str(DBT)]), command, "--project-dir", str(root), "--profiles-dir", str(root)],
        cwd=root,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    output, _ = proc.communicate(timeout=180)
    return proc.returncode, output


def test_second_process_on_held_path_fails_with_one_line(tmp_path, chdb_path):
    """With `path_lock_timeout: 0`, `dbt debug` and `dbt run` on a path this process holds exit non-zero at
    once, with one line naming the path and this process."""
    root = _write_project(tmp_path / "proj", str(chdb_path), path_lock_timeout=0)
    holder = clickhouse_connect.get_client(interface="chdb", path=str(chdb_path))
    try:
        assert holder.command("select 1") == 1
        runs = {command: _start_dbt(root, command) for command in ("debug", "run")}
        results = {command: _finish(proc) for command, proc in runs.items()}
    finally:
        holder.close()

    held = f"chdb: the data directory '{os.path.abspath(chdb_path)}' is in use by process {os.getpid()} ("
    for command, (returncode, output) in results.items():
        assert returncode != 0, f"dbt {command} succeeded:\n{output}"
        lines = [line.strip() for line in output.splitlines() if held in line]
        assert len(lines) == 1 and "; waited 0 s (the profile's `path_lock_timeout` = 0)" in lines[0], output
        assert "Traceback" not in output and "waiting for it" not in output
        # The engine's own lock message goes to fd 2; the adapter folds it into the line above.
        assert "Cannot lock file" not in output


def test_a_second_dbt_process_waits_for_the_data_directory(tmp_path):
    """Issue 60: a second `dbt run` on a chDB path that another `dbt run` had open failed at once (exit 2),
    where the README says a second run waits. It waits (up to the profile's `path_lock_timeout`), says once
    which process holds the path, and runs once that process has ended."""
    root = _write_project(tmp_path / "proj", str(tmp_path / "chdb"))
    log = tmp_path / "statements.log"
    assert _finish(_start_dbt(root, "run", program=inject_program(), env={"VCMT_FAULT_LOG": str(log)}))[0] == 0
    # The first run stops right before its second statement: the engine is open once the first has run.
    first = _start_dbt(root, "run", program=inject_program(), env={"VCMT_FAULT": f"pause@{sent_statements(log)[1]}"})
    second = None
    try:
        assert wait_until_stopped(first, 180), _finish(first)[1]
        second = _start_dbt(root, "run")
        said = []
        assert second.stdout is not None
        for line in second.stdout:  # until it says it waits, or ends
            said.append(line)
            if "waiting for it to close it" in line:
                break
        first.send_signal(signal.SIGCONT)
        (code1, out1), (code2, out2) = _finish(first), _finish(second)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    out2 = "".join(said) + out2
    assert code1 == 0 and code2 == 0, out1[-3000:] + out2[-3000:]
    waiting = [line for line in out2.splitlines() if "waiting for it to close it" in line]
    assert len(waiting) == 1, out2
    assert (
        f"is in use by process {first.pid} (" in waiting[0]
        and "up to 600 s (the profile's `path_lock_timeout`)" in waiting[0]
    )
    assert "is free; going on after" in out2 and "PASS=1" in out2, out2


def test_memory_path_builds_and_tests_model(tmp_path):
    """`path: ':memory:'` builds and tests a model, applies custom_settings, and creates no data directory."""
    root = _write_project(tmp_path / "proj", ":memory:")
    returncode, output = _finish(_start_dbt(root, "build"))
    assert returncode == 0, output
    assert "PASS=3 WARN=0 ERROR=0" in output
    assert not (root / ":memory:").exists()


# 30 s on one thread: sleepEachRow sleeps a block of 1000 rows, 1 s, at a time (the engine allows 3 s a block).
SLOW_STATEMENT = "select sum(sleepEachRow(0.001)) from numbers(30000) settings max_block_size = 1000, max_threads = 1"


def test_a_cancel_stops_a_statement_the_engine_had_not_listed_yet(chdb_path, monkeypatch):
    """dbt cancels a connection (Ctrl-C, --fail-fast) from another thread, at any moment of a statement. A
    statement marked running but not yet listed by the engine (here it reaches the engine 1 s after it is
    marked) is not stopped by the first ask: the cancel asks again until the statement has returned. It ran
    to its end (30 s here, a load's INSERT minutes), and dbt waited for it, when the engine was asked once."""
    from dbt.adapters.chdb.client import ChdbClient
    from dbt.adapters.chdb.credentials import ChdbCredentials
    from dbt.adapters.clickhouse.httpclient import ChHttpClient
    from dbt_common.exceptions import DbtDatabaseError

    client = ChdbClient(ChdbCredentials(path=str(chdb_path), schema="cancel_race", database=""))
    reaches_engine = ChHttpClient.command

    def late(self, sql, **kwargs):
        time.sleep(1.0)
        return reaches_engine(self, sql, **kwargs)

    monkeypatch.setattr(ChHttpClient, "command", late)
    outcome: dict[str, object] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            outcome["result"] = client.command(SLOW_STATEMENT)
        except DbtDatabaseError as ex:
            outcome["error"] = str(ex)
        outcome["seconds"] = time.monotonic() - started

    statement = threading.Thread(target=run)
    statement.start()
    while client._running_on is None and statement.is_alive():
        time.sleep(0.01)
    time.sleep(0.2)  # marked running, still on its way to the engine
    assert client.stop_statement(wait_s=20) is True
    statement.join(timeout=40)
    assert not statement.is_alive()
    assert "QUERY_WAS_CANCELLED" in str(outcome.get("error")), outcome
    assert outcome["seconds"] < 10, outcome
    # The connection refuses every later statement.
    monkeypatch.undo()
    with pytest.raises(DbtDatabaseError, match="the connection was cancelled"):
        client.command("select 1")
    client.close()


def test_a_cancel_never_stops_a_statement_begun_after_the_cancelled_one_ended(chdb_path, monkeypatch):
    """The engine is asked to stop the statements of the OS thread that runs the cancelled one. If that statement
    ends just after the cancel saw it running, the same thread may start another (dbt reuses its threads): the ask
    must not reach that one. It is sent under the lock the statement's end takes, after checking it still runs.
    Here the statement ends at the cancel's first look at its deadline, right before the ask: no ask is sent."""
    from dbt.adapters.chdb import client as client_module
    from dbt.adapters.chdb.client import ChdbClient
    from dbt.adapters.chdb.credentials import ChdbCredentials
    from dbt.adapters.clickhouse.httpclient import ChHttpClient

    client = ChdbClient(ChdbCredentials(path=str(chdb_path), schema="cancel_after_end", database=""))
    release = threading.Event()

    def held(self, sql, **kwargs):  # the statement runs until released (nothing reaches the engine)
        release.wait(timeout=30)
        return "ok"

    monkeypatch.setattr(ChHttpClient, "command", held)
    statement = threading.Thread(target=client.command, args=("select 1",))
    statement.start()
    while client._running_on is None and statement.is_alive():
        time.sleep(0.01)
    assert client._running_on is not None

    class Clock:  # the cancel's second clock read (its deadline check) happens once the statement has ended
        reads = 0

        @classmethod
        def monotonic(cls) -> float:
            cls.reads += 1
            if cls.reads == 2:
                release.set()
                statement.join(timeout=30)
            return time.monotonic()

        sleep = staticmethod(time.sleep)

    asks = []
    monkeypatch.setattr(client_module, "time", Clock)
    monkeypatch.setattr(client_module, "stop_statements_of_thread", asks.append)
    assert client.stop_statement(wait_s=10) is True
    assert not statement.is_alive() and Clock.reads >= 2
    assert asks == [], f"asked the engine to stop the statements of thread {asks} after the statement had ended"
    client.close()
