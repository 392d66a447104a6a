"""A load killed half-way: the next run succeeds, and the target ends exact.

dbt runs in child processes on their own chDB data directory (one process may
hold a chDB path at a time), and one of them is killed with SIGKILL while it
applies its rounds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PACKAGE_ROOT
from vcmt_lab.dbt_project import DbtProject

# The same tests on the embedded engine and on a served node over HTTP (tests/conftest.py).
pytestmark = pytest.mark.engines("chdb", "http")

KEYS = 40
VERSIONS = 6  # one round per version under a SQL policy (built-in ones fold)
KILL_AT_ROUND = 3
TIMEOUT = 240


def _dbt_cli(project: DbtProject, *args: str) -> list[str]:
    dbt = Path(sys.executable).with_name("dbt")
    return [str(dbt), *args, "--project-dir", str(project.root), "--profiles-dir", str(project.root)]


def _dbt(project: DbtProject, *args: str) -> str:
    done = subprocess.run(
        _dbt_cli(project, *args),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "DO_NOT_TRACK": "1"},
    )
    assert done.returncode == 0, f"dbt {' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    return done.stdout


# dbt's own command line (the `dbt` script runs the same), as a terminal starts it: Ctrl-C raises KeyboardInterrupt.
# A process inherits an ignored signal, and Python installs its Ctrl-C handler only if SIGINT is not ignored at
# start: `make test` started in the background (`nohup ... &`: SIGHUP, SIGINT and SIGQUIT ignored) passed that on
# to the dbt it started, which never saw the test's SIGINT (its /proc status, SigIgn 0x81001007). It also prints
# every thread's stack on SIGUSR1, a signal the embedded engine leaves alone (it takes SIGABRT over).
_DBT_WITH_STACKS = (
    "import faulthandler, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "faulthandler.register(signal.SIGUSR1, all_threads=True); "
    "from dbt.cli.main import cli; sys.argv[0] = 'dbt'; sys.exit(cli())"
)


def _start_debug_run(project: DbtProject) -> subprocess.Popen:
    """`dbt run --debug`, which logs each statement before it sends it, in its own process."""
    return subprocess.Popen(
        [sys.executable, "-c", _DBT_WITH_STACKS, *_dbt_cli(project, "run", "--debug")[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "DO_NOT_TRACK": "1"},
    )


def _why_still_running(proc: subprocess.Popen) -> str:
    """A dbt process that outlived its wait: its signal masks (blocked, ignored, pending, caught), then every
    thread's stack, which SIGUSR1 has it print; then it is killed."""
    status = Path(f"/proc/{proc.pid}/status").read_text()
    masks = " ".join(line for line in status.splitlines() if line.startswith(("Sig", "ShdPnd")))
    proc.send_signal(signal.SIGUSR1)
    time.sleep(2)
    proc.kill()
    out, _ = proc.communicate(timeout=TIMEOUT)
    return f"{masks}\n{out}"


def _kill_during_round(project: DbtProject, round_no: int) -> str:
    """Start `dbt run` and SIGKILL it as soon as it logs the INSERT of round `round_no`."""
    proc = _start_debug_run(project)
    deadline = time.monotonic() + TIMEOUT
    seen = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if f"_vcmt_round = {round_no}" in line:
                proc.send_signal(signal.SIGKILL)
                break
            assert time.monotonic() < deadline, "dbt run never reached the round to kill"
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"dbt finished before round {round_no}:\n{''.join(seen)[-3000:]}"
    return "".join(seen)


def _query(chdb_path: Path, schema: str, sql: str) -> list[list]:
    """Rows of `sql` from a child process (this process may hold another chDB path)."""
    code = (
        "import json, sys, clickhouse_connect\n"
        "c = clickhouse_connect.get_client(interface='chdb', path=sys.argv[1], database=sys.argv[2])\n"
        "print(json.dumps([list(r) for r in c.query(sys.argv[3]).result_rows], default=str))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(chdb_path), schema, sql], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _load_tables(chdb_path: Path) -> dict[str, int]:
    """How many objects of each load table's name (`m__batch_<n>`; `m__fanout_<n>` and its views) exist."""
    rows = _query(
        chdb_path,
        "crash",
        "select splitByChar('_', name)[3], count() from system.tables where database = 'crash' "
        "and (startsWith(name, 'm__batch') or startsWith(name, 'm__fanout')) group by 1",
    )
    return dict(rows)


@pytest.mark.parametrize("shards", [1, 2])
def test_kill_between_rounds_then_rerun_is_exact(tmp_path, lab_dir, shards):
    """0.1.0 left `m__batch` behind: every later run failed with TABLE_ALREADY_EXISTS. The killed load's batch
    table (`m__batch_<n>`) is dropped by the next load; on virtual shards its fan-out too (`m__fanout_<n>` and
    its views, views first). Tables merely named like an older load's, of the same engines, are left alone:
    vcmt drops only the load tables its comment marks as its own."""
    chdb_path = tmp_path / "chdb"
    project = DbtProject(
        root=tmp_path / "proj", package_root=PACKAGE_ROOT, chdb_path=chdb_path, schema="crash", lab_dir=lab_dir
    )
    rows = ["id,x,_version"]
    for v in range(1, VERSIONS + 1):
        rows += [f"{k},{k * 10 + v},{v}" for k in range(1, KEYS + 1)]
    project.seed("events", "\n".join(rows))
    project.model(
        "m",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id', merge={'x': '{old} + {new}'},
                  virtual_shards=SHARDS) }}
        select id, x, _version from {{ ref('events') }}
    """.replace("SHARDS", str(shards)),
    )
    _dbt(project, "deps")
    _dbt(project, "seed")
    _kill_during_round(project, KILL_AT_ROUND)

    assert _load_tables(chdb_path) == ({"batch": 1} if shards == 1 else {"batch": 1, "fanout": 1 + shards})
    # What the killed run applied is whole: no key is half-updated.
    assert _query(
        chdb_path, "crash", "select count() from (select id, sum(sign) s from m group by id having s not in (0, 1))"
    ) == [[0]]

    # Tables merely named like an older load's, of the same engines (a user's, another model's): never dropped.
    decoys = {"m__batch_0": "(a Int8) engine = MergeTree order by a", "m__fanout_0": "(a Int8) engine = Null"}
    for name, body in decoys.items():
        _query(chdb_path, "crash", f"create table {name} {body}")

    _dbt(project, "run")  # recovers: drops the killed load's batch table (and fan-out), applies what is missing
    _dbt(project, "run")  # replays the same input: applies nothing twice, the running sum included
    expected = [[k, sum(k * 10 + v for v in range(1, VERSIONS + 1)), VERSIONS] for k in range(1, KEYS + 1)]
    assert _query(chdb_path, "crash", "select id, x, _version from m final where sign = 1 order by id") == expected
    assert _load_tables(chdb_path) == {"batch": 1, "fanout": 1}
    assert _query(
        chdb_path, "crash", "select name from system.tables where database = 'crash' and name like 'm\\_\\_%\\_0'"
    ) == [[name] for name in sorted(decoys)]
    grouped = _query(chdb_path, "crash", "select sum(x * sign), sum(sign) from m")
    assert grouped == [[sum(r[1] for r in expected), KEYS]]


# Slow only in the load's INSERT (its insert_settings mark it), 40 us a row on one thread: a block of 65000 rows sleeps
# under the engine's 3 s limit per block.
SLOW_INSERT = """
{{ config(materialized='vcmt_upsert', unique_key='id', insert_settings={'max_block_size': 65000, 'max_threads': 1}) }}
select id, n, _version from src where sleepEachRow(if(getSetting('max_block_size') = 65000, 0.00004, 0)) = 0
"""


def test_ctrl_c_during_a_load_ends_dbt_and_keeps_a_killed_loads_guarantees(tmp_path, lab_dir):
    """Issue 60: Ctrl-C (SIGINT) during a load's INSERT. dbt cancels its connections by closing them, which on
    chDB waited for the running statement to end: dbt went on for as long as the INSERT ran (here ten minutes),
    then failed. The adapter now stops the statement: dbt exits at once, the INSERT applied nothing, the lock
    stays held as a killed load's does, and the next run takes it over after the lease and loads exact."""
    chdb_path = tmp_path / "chdb"
    project = DbtProject(
        root=tmp_path / "proj", package_root=PACKAGE_ROOT, chdb_path=chdb_path, schema="crash", lab_dir=lab_dir
    )
    _query(chdb_path, "default", "create database crash")
    _query(chdb_path, "crash", "create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    _query(chdb_path, "crash", "insert into src select number, 1, 1 from numbers(300)")
    project.model("m", SLOW_INSERT)
    _dbt(project, "deps")
    _dbt(project, "run")
    _query(chdb_path, "crash", "insert into src select number % 300, 2, 2 from numbers(15000000)")  # 600 s

    proc = _start_debug_run(project)
    seen = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the INSERT's SETTINGS clause, logged right before it is sent
            seen.append(line)
            if "max_block_size = 65000" in line:
                break
        time.sleep(3)  # the INSERT runs
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"dbt still ran {TIMEOUT} s after Ctrl-C; its log:\n{''.join(seen)[-4000:]}\n"
                f"{_why_still_running(proc)[-12000:]}"
            )
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(seen) + out
    assert proc.returncode == 2 and "Exited because of keyboard interrupt" in out, out[-3000:]
    assert "QUERY_WAS_CANCELLED" in out, out[-3000:]
    # Nothing of the batch was applied, and the lock is still the interrupted load's, as a killed one's.
    assert _query(chdb_path, "crash", "select n, _version, count() from m final where sign = 1 group by 1, 2") == [
        [1, 1, 300]
    ]
    # The lock's newest generation (macros/vcmt/load/lock.sql): claimed by the interrupted load, never released.
    ((holder, released),) = _query(
        chdb_path,
        "crash",
        "select anyIf(holder, kind = 'acquired'), countIf(kind = 'released') from m__lock "
        "where gen = (select max(gen) from m__lock)",
    )
    assert holder.startswith("vcmt load by dbt invocation ") and holder.split()[-3] in out and released == 0, holder

    project.model("m", SLOW_INSERT.replace("'max_block_size': 65000, ", ""))
    rerun = _dbt(project, "run", "--vars", '{"vcmt_lock_lease_s": 2}')
    assert f"took over the lock of {holder}" in rerun, rerun[-3000:]
    assert _query(chdb_path, "crash", "select n, _version, count() from m final where sign = 1 group by 1, 2") == [
        [2, 2, 300]
    ]
