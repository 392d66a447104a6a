"""Overlapping loads of one model never corrupt it (docs/design.md#one-load-at-a-time).

Real `dbt run` and `vcmt.load_stage` processes against a served node, started
at staggered times, load the same keys; a load killed while it holds the
lock; and the lock's refusals, on both engines.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import make_project
from vcmt_cli.load_stage import LoadError
from vcmt_lab.dbt_project import DbtProject
from vcmt_lab.faults.harness import HIDING_PROFILE, inject_program, wait_until_stopped

TIMEOUT = 300
KEYS = 3000
MODEL = (
    "{{ config(materialized='vcmt_upsert', unique_key='id', merge={'n': 'sum'}, lock_timeout=240) }}\n"
    "select id, n, _version from src"
)


def _start(project: DbtProject, name: str, *args: str) -> subprocess.Popen:
    return project.dbt_process(name, *args)


def _last_statement(proc: subprocess.Popen) -> str:
    """The last statement a failed dbt process ran, from its log."""
    log = Path(proc.args[proc.args.index("--log-path") + 1]) / "dbt.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\nlast statements:\n" + text[-6000:]


def _assert_exact(project: DbtProject, expected: dict[int, tuple[int, int]]) -> None:
    """sum(sign) in {0, 1} per key, GROUP BY = FINAL, and each key's state is the oracle's."""
    bad = project.query("select id, sum(sign) as s from m group by id having s not in (0, 1) limit 5")
    assert bad == [], f"keys with sum(sign) outside {{0, 1}}: {bad}"
    grouped = project.query(
        "select id, sum(n * sign), max(_version) from m group by id having sum(sign) = 1 order by id"
    )
    final = project.query("select id, n, _version from m final where sign = 1 order by id")
    assert [(i, n) for i, n, _ in grouped] == [(i, n) for i, n, _ in final]
    assert {i: (n, v) for i, n, v in final} == expected


@pytest.mark.engines("http")
def test_staggered_runs_and_loads_of_one_model_never_corrupt_it(project):
    """Each batch: a `dbt run` stopped right before its first stage INSERT (holding the lock), then three
    more loads started at staggered times; once all three wait for it, it goes on. Every load succeeds."""
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.model("m", MODEL)
    project.vars = {"vcmt_lock_lease_s": 600}  # the stopped holder is never taken over here
    project.dbt("run")  # the model's objects (and the package installed)
    rng = random.Random(29)
    expected: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    waits = 0
    for batch in range(1, 3):
        rows = [(k, rng.randint(-5, 9), batch * 10 + j) for k in range(KEYS) for j in range(3)]
        project.command("insert into src values " + ", ".join(f"({k}, {n}, {v})" for k, n, v in rows))
        for k, n, v in rows:
            expected[k][0] += n
            expected[k][1] = max(expected[k][1], v)
        holder = project.dbt_process(
            f"b{batch}p0",
            "run",
            "--select",
            "m",
            program=inject_program(),
            env={"VCMT_FAULT": "pause@insert m__stage#1"},
        )
        deadline = time.monotonic() + TIMEOUT
        assert wait_until_stopped(holder, TIMEOUT), holder.communicate()[0][-3000:]
        procs = [holder]
        for i, kind in enumerate(["run", "load", "run"], start=1):
            time.sleep(rng.uniform(0, 0.8))
            if kind == "run":
                procs.append(_start(project, f"b{batch}p{i}", "run", "--select", "m"))
            else:
                procs.append(
                    _start(
                        project,
                        f"b{batch}p{i}",
                        "run-operation",
                        "vcmt.load_stage",
                        "--args",
                        json.dumps({"model": "m", "sql": "select id, n, _version from src"}),
                    )
                )
        # Each waiting load polls with `select sleep(1)`: all three wait once three sleeps run at a time.
        while (
            time.monotonic() < deadline
            and project.scalar(
                "select count() from system.processes where current_database = currentDatabase() "
                "and query_id != queryID() and position(query, concat('select sle', 'ep(1)')) > 0"
            )
            < 3
        ):
            time.sleep(0.05)
        holder.send_signal(signal.SIGCONT)
        for proc in procs:
            out, _ = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, out[-4000:] + _last_statement(proc)
            waits += "waiting for another load of this model" in out
        _assert_exact(project, {k: tuple(v) for k, v in expected.items()})
    # The loads did overlap: the three of each batch waited.
    assert waits >= 6, waits
    # The lock is one table, its generations rows; the 0.4 lock's sentinel generation beside it.
    locks = project.query(
        "select name from system.tables where database = currentDatabase() and name like 'm\\_\\_lock%' order by name"
    )
    assert locks == [("m__lock",), ("m__lock_999999999999999999",)], locks


@pytest.mark.engines("http")
def test_a_run_that_waited_for_another_load_reads_only_what_that_load_left(project):
    """Issue 60: a run that waited for another load of its model read that load's batch again (`100 events
    read ... 100 skipped`): dbt rendered its `vcmt.watermark()` when it compiled the model, before the run took
    the lock. The watermark is now read by each statement of the load when it runs, under the lock."""
    project.command(
        "create table src (id UInt64, n Int64, _version UInt64, _batch_id UInt64) engine = MergeTree order by id"
    )
    project.command("insert into src select number, 1, 1, 1 from numbers(100)")
    project.model(
        "m",
        "{{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id', lock_timeout=240) }}\n"
        "select id, n, _version, _batch_id from src\n"
        "{% if vcmt.is_incremental() %} where _batch_id > {{ vcmt.watermark() }} {% endif %}",
    )
    project.dbt("run")
    project.command("insert into src select number, 2, 2, 2 from numbers(100)")
    # The first run holds the lock, stopped before it loads batch 2; the second, compiled meanwhile, waits.
    first = project.dbt_process(
        "first", "run", "--select", "m", program=inject_program(), env={"VCMT_FAULT": "pause@insert m__stage#1"}
    )
    assert wait_until_stopped(first, TIMEOUT), first.communicate()[0][-3000:]
    second = _start(project, "second", "run", "--select", "m")
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and not project.scalar(
        "select count() from system.processes where current_database = currentDatabase() "
        "and query_id != queryID() and position(query, concat('select sle', 'ep(1)')) > 0"
    ):
        time.sleep(0.05)
    first.send_signal(signal.SIGCONT)
    out1, _ = first.communicate(timeout=TIMEOUT)
    out2, _ = second.communicate(timeout=TIMEOUT)
    assert first.returncode == 0 and second.returncode == 0, out1[-3000:] + out2[-3000:]
    assert "waiting for another load of this model" in out2, out2[-3000:]
    assert project.query("select events, watermark from m__loads order by loaded_at") == [
        (100, "1"),
        (100, "2"),
        (0, None),
    ]
    _assert_exact(project, {k: (2, 2) for k in range(100)})


@pytest.mark.engines("http")
def test_a_load_killed_holding_the_lock_blocks_the_next_only_for_the_lease(project):
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src select number, 1, 1 from numbers(100)")
    # Slow SELECT: the killed run's statement goes on on the server for a while, the lock kept alive by it.
    project.model("m", MODEL.replace("from src", "from src where sleepEachRow(0.02) = 0"))
    project.dbt("parse")  # installs the package
    killed = _start(project, "killed", "run", "--select", "m")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if project.query(
            "select query_id from system.processes where startsWith(Settings['log_comment'], 'vcmt load by') "
            "and query_id != queryID()"
        ):
            break
        time.sleep(0.1)
    else:
        killed.kill()
        pytest.fail("the run never took the lock")
    killed.send_signal(signal.SIGKILL)
    killed.wait(30)
    started = time.monotonic()
    proc = _start(project, "next", "run", "--select", "m")
    out, _ = proc.communicate(timeout=TIMEOUT)
    took = time.monotonic() - started
    assert proc.returncode == 0, out[-4000:]
    assert (
        "waiting for another load of this model" in out and "took over the lock of vcmt load by dbt invocation" in out
    )
    assert took < 120, took
    _assert_exact(project, {k: (1, 1) for k in range(100)})


@pytest.mark.engines("chdb", "http")
def test_a_live_holder_is_waited_for_and_a_silent_one_taken_over(project):
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src values (1, 5, 1)")
    project.model("m", MODEL.replace("lock_timeout=240", "lock_timeout=2"))
    project.dbt("run")
    project.command("insert into src values (1, 2, 2)")
    # Another load's claim of the next generation, just now.
    project.command(
        "insert into m__lock (gen, holder, kind, what) "
        "select max(gen) + 1, 'vcmt load by dbt invocation other', 'acquired', 'dbt run' from m__lock"
    )
    run = project.dbt("run", expect_pass=False)
    assert "another load of this model is running (dbt run; vcmt load by dbt invocation other; since" in run.log
    assert "waited 2 s (`lock_timeout` = 2). Nothing was changed." in run.log
    assert project.query("select n, _version from m final where sign = 1") == [(5, 1)]
    # The same holder, silent for longer than the lease (1 s here) and with nothing running: taken over.
    project.vars = {"vcmt_lock_lease_s": 1}
    time.sleep(2)
    run = project.dbt("run")
    assert "took over the lock of vcmt load by dbt invocation other (dbt run, silent for" in run.log
    assert project.query("select n, _version from m final where sign = 1") == [(7, 2)]


@pytest.mark.engines("chdb")
def test_lock_timeout_must_be_a_number_of_seconds(project):
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.model("m", MODEL.replace("lock_timeout=240", "lock_timeout='5m'"))
    run = project.dbt("run", expect_pass=False)
    assert "`lock_timeout` must be a number of seconds (0 or more)" in run.log and "got `5m`" in run.log


@pytest.mark.engines("http")
def test_no_profile_setting_hides_a_running_load(tmp_path, chdb_path, lab_dir, engine):
    """Each of a load's writes names its load in its `log_comment` (macros/vcmt/ddl/settings.sql
    `_holder_settings`), which the server shows uncut in system.processes whatever the profile sets: a load
    that waits sees the other load's long INSERT and waits instead of taking the lock over. A profile that cut
    the statement's text to one character let the second load take over while the INSERT still wrote (the
    lock once looked for the name in the text), as a `log_comment` of the profile's or the model's once did.
    The INSERT (12 s) outlasts the lease the test sets (2 s; a lock goes by the var:
    test_a_live_holder_is_waited_for_and_a_silent_one_taken_over) and the two idle polls a takeover needs several
    times over: only the statement's `log_comment` keeps the waiting load from taking the lock over."""
    project = make_project(
        tmp_path / "proj", "hiding_profile", chdb_path, lab_dir, engine=engine, custom_settings=HIDING_PROFILE
    )
    lease_s, insert_s = 2, 12
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src select number, 1, 1 from numbers(300)")
    project.vars = {"vcmt_lock_lease_s": lease_s}
    # The fold: one stage INSERT that reads the slow SELECT, on one thread (40 us a row: a block of 65409 rows,
    # the most there is, sleeps under the server's 3 s limit per block). A statement reads its pause once, as it
    # starts, from `slow`: emptied once the first load's INSERT runs, the second load reads the same rows at full
    # speed.
    per_row_s = 0.00004
    project.command("create table slow (x UInt8) engine = MergeTree order by tuple()")
    project.command("insert into slow values (1)")
    slow = (
        "{{ config(materialized='vcmt_upsert', unique_key='id', lock_timeout=" + str(3 * insert_s) + ", "
        "insert_settings={'max_threads': 1}) }}\n"
        f"select id, n, _version from src where sleepEachRow((select {per_row_s} * count() from slow)) = 0"
    )
    project.model("m", slow)
    project.dbt("run")
    # The batch: the 300 keys again, repeated (exact duplicates fold into one event): rows for insert_s seconds.
    project.command(f"insert into src select number % 300, 2, 2 from numbers({int(insert_s / per_row_s)})")
    # The second load stops right before it first reads the lock's rows (vcmt_lab.faults.inject), and goes on
    # once the first load's INSERT runs: it meets that INSERT whatever its own start-up took.
    second = project.dbt_process(
        "second",
        "run",
        "--select",
        "m",
        program=inject_program(),
        env={"VCMT_FAULT": "pause@select m__lock#1"},
    )
    deadline = time.monotonic() + 120
    assert wait_until_stopped(second, 120), second.communicate()[0][-3000:]
    first = _start(project, "first", "run", "--select", "m")
    # The statement's text is cut to nothing by the profile: the first load's stage INSERT is the one INSERT that
    # runs with the model's insert_settings.
    running = (
        "select count() from system.processes where query_kind = 'Insert' and Settings['max_threads'] = '1' "
        "and query_id != queryID()"
    )
    # Rows read: past its analysis, so it read its pause before `slow` is emptied.
    while time.monotonic() < deadline and not project.scalar(running + " and read_rows > 0"):
        time.sleep(0.05)
    project.command("truncate table slow")
    second.send_signal(signal.SIGCONT)
    started = time.monotonic()
    while time.monotonic() < started + TIMEOUT and project.scalar(running):
        time.sleep(0.2)
    ran_s = time.monotonic() - started
    out1, _ = first.communicate(timeout=TIMEOUT)
    out2, _ = second.communicate(timeout=TIMEOUT)
    assert first.returncode == 0 and second.returncode == 0, out1[-3000:] + out2[-3000:]
    assert "took over the lock" not in out2 and "waiting for another load of this model" in out2, out2[-3000:]
    # Timed from the second load's start, a block or so after the INSERT began: at least three leases.
    assert ran_s > 3 * lease_s, f"the first load's INSERT ran {ran_s:.0f} s after the second load went on"
    _assert_exact(project, {k: (2, 2) for k in range(300)})
    project.close()


@pytest.mark.engines("chdb")
def test_a_model_whose_name_is_not_ascii_takes_and_releases_its_lock(project):
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src values (1, 5, 1)")
    project.model("commandes_été", MODEL.replace("lock_timeout=240", "lock_timeout=2"))
    project.dbt("run")
    project.command("insert into src values (1, 2, 2)")
    project.dbt("run")
    assert project.query("select n, _version from `commandes_été` final where sign = 1") == [(7, 2)]
    locks = project.query(
        "select name from system.tables where database = currentDatabase() and name like '%lock%' order by name"
    )
    assert locks == [("commandes_été__lock",), ("commandes_été__lock_999999999999999999",)], locks
    assert project.query("select gen, kind from `commandes_été__lock` where kind != 'renewed' order by gen, kind") == [
        (1, "acquired"),
        (1, "released"),
        (2, "acquired"),
        (2, "released"),
    ]


@pytest.mark.engines("http")
def test_a_full_refresh_taken_over_before_its_swap_never_swaps(project, tmp_path):
    """Issue 39: a `--full-refresh` stopped past its lease after loading its new tables, before it swaps them
    in, is taken over by a run that loads newer events into the model. Resumed, it must not swap its (now
    stale) tables in: the swap is DDL, which no WHERE can fence, so it checks the lock right before each
    statement of the swap and fails. The model keeps the newer run's events."""
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src select number, 1, 1 from numbers(100)")
    project.model("m", MODEL)
    project.vars = {"vcmt_lock_lease_s": 2}
    project.dbt("run")
    # The statement a full refresh sends first in its swap, named as the harness names it.
    log = tmp_path / "statements.log"
    clean = project.dbt_process(
        "clean",
        "run",
        "--full-refresh",
        program=inject_program(),
        env={"VCMT_FAULT_LOG": str(log)},
    )
    assert clean.wait(timeout=TIMEOUT) == 0, clean.communicate()[0][-3000:]
    labels = log.read_text(encoding="utf-8").splitlines()
    swap = next(label for label in labels if label.startswith("exchange "))

    holder = project.dbt_process(
        "holder",
        "run",
        "--full-refresh",
        program=inject_program(),
        env={"VCMT_FAULT": f"pause@{swap}"},
    )
    assert wait_until_stopped(holder, TIMEOUT), holder.communicate()[0][-3000:]
    project.command("insert into src select number, 5, 2 from numbers(50)")
    newer = project.dbt("run")  # takes the silent holder's lock over
    assert "took over the lock of" in newer.log, newer.log[-3000:]
    # No table of the holder's is swapped in yet: the newer run drops its staging objects (a rollback,
    # docs/design.md#a-full-refresh-interrupted-on-some-nodes).
    assert "vcmt_upsert m: a --full-refresh stopped before it swapped any table in" in newer.log, newer.log[-3000:]
    holder.send_signal(signal.SIGCONT)
    out, _ = holder.communicate(timeout=TIMEOUT)
    assert holder.returncode != 0, out[-3000:]
    # Stopped right before its first EXCHANGE (its lock checked just before): that EXCHANGE finds its new table
    # gone, and nothing of it is swapped in.
    assert "no longer holds the lock" in out or "m__vcmt_new__tombstones` doesn't exist" in out, out[-3000:]
    _assert_exact(project, {k: ((1 + 5, 2) if k < 50 else (1, 1)) for k in range(100)})


@pytest.mark.engines("http")
def test_a_full_refresh_killed_between_its_exchanges_is_finished_by_the_next_run(project):
    """A `--full-refresh` killed between two EXCHANGEs of its swap (its helpers swapped in, not its table): every
    table is of one generation or the other, the rebuild loaded. `vcmt.load_stage` then refuses, loading nothing
    and holding no lock: its events would land in the old table, which the finish swaps out. The next run
    finishes the swap, drops the staging objects and loads; the model is the rebuild plus the new events
    (docs/design.md#a-full-refresh-interrupted-on-some-nodes). Without it the run loaded into the old table with
    the rebuild's helpers, and every `m__vcmt_new*` object stayed."""
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src select number, 1, 1 from numbers(100)")
    project.model(
        "m",
        "{{ config(materialized='vcmt_upsert', unique_key='id', lock_timeout=240) }}\nselect id, n, _version from src",
    )
    project.vars = {"vcmt_lock_lease_s": 2}  # the killed refresh's lock lapses at once
    project.dbt("run")
    project.command("truncate table src")
    project.command("insert into src select number, 3, 2 from numbers(50)")
    killed = project.dbt_process(
        "killed",
        "run",
        "--full-refresh",
        program=inject_program(),
        env={"VCMT_FAULT": "kill@exchange m__vcmt_new#1"},
    )
    out, _ = killed.communicate(timeout=TIMEOUT)
    assert killed.returncode != 0 and "vcmt fault: kill at exchange m__vcmt_new#1" in out, out[-3000:]
    with pytest.raises(LoadError) as refused:
        project.load_rows("m", [{"id": 1, "n": 9, "_version": 9}])
    message = " ".join(str(refused.value).split())
    assert (
        "vcmt.load_stage m: a --full-refresh (`vcmt generation " in message
        and "Nothing was loaded. Run `dbt run --select m` first" in message
    ), message
    project.vars = {"vcmt_lock_lease_s": 600}  # a lock left held would now hold the next run for 10 minutes
    project.command("insert into src select number, 4, 3 from numbers(0, 100, 2)")
    run = project.dbt("run")
    assert "waiting for another load" not in run.log, run.log[-3000:]
    assert (
        "vcmt_upsert m: a --full-refresh" in run.log
        and "its swap is finished on every node (exchanging m, m__stage, then" in " ".join(run.log.split())
    ), run.log[-3000:]
    assert not project.query(
        "select name from system.tables where database = currentDatabase() and position(name, 'vcmt_new') > 0"
    )
    _assert_exact(project, {k: ((4, 3) if k % 2 == 0 else (3, 2)) for k in range(100) if k < 50 or k % 2 == 0})
    # Finished, the model takes external loads again.
    project.load_rows("m", [{"id": 1, "n": 9, "_version": 9}])
    assert project.query("select n, _version from m final where sign = 1 and id = 1") == [(9, 9)]


# The comment of a 0.4 lock generation table, as a 0.4 load wrote it (its holder); the table's rows record its events.
LEGACY_LOCK = "(holder String, kind String, what String, at DateTime64(3)) engine = MergeTree order by tuple()"


@pytest.mark.engines("chdb")
def test_a_model_loaded_by_0_4_waits_for_its_holder_then_retires_its_lock(project):
    """Until 0.4 the lock was a generation of tables `m__lock_<n>` (one CREATE per load). The first load by this
    version waits for a 0.4 load that holds one (`lock_timeout`), then creates the sentinel generation, which
    fences out every 0.4 load and which a 0.4 load waits for and names in its error (the upgrade); it drops the
    old generations and loads."""
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src values (1, 5, 1)")
    project.model("m", MODEL.replace("lock_timeout=240", "lock_timeout=2"))
    project.dbt("run")
    # The model as 0.4 left it: no lock table of this version, a 0.4 generation held by a load that runs now.
    project.command("drop table m__lock")
    project.command("drop table m__lock_999999999999999999")
    holder = "vcmt load by dbt invocation old-0-4 of 0123456789ab"
    project.command(f"create table m__lock_7 {LEGACY_LOCK} comment '{holder}'")
    project.command(f"insert into m__lock_7 select '{holder}', 'acquired', 'dbt run', now64(3)")
    project.command("insert into src values (1, 2, 2)")
    run = project.dbt("run", expect_pass=False)
    assert f"a load by vcmt 0.4 holds this model's lock ({holder}); waited 2 s" in run.log, run.log[-3000:]
    assert project.query("select n, _version from m final where sign = 1") == [(5, 1)]
    tables = "select name from system.tables where database = currentDatabase() and name like 'm\\_\\_lock%' order by 1"
    assert project.query(tables) == [("m__lock",), ("m__lock_7",)]
    # The 0.4 load ends: this version retires the old lock and loads.
    project.command(f"insert into m__lock_7 select '{holder}', 'released', 'dbt run', now64(3)")
    project.dbt("run")
    assert project.query("select n, _version from m final where sign = 1") == [(7, 2)]
    assert project.query(tables) == [("m__lock",), ("m__lock_999999999999999999",)]
    # What a 0.4 load reads as its lock's holder from now on: the highest generation of 18 digits at most, the
    # sentinel, whose comment names the upgrade; the next generation it would create has 19 digits, which it never
    # reads, so it waits for the sentinel and fails after its lock_timeout.
    comment = project.scalar(
        "select argMax(comment, toUInt64(substring(name, 9))) from system.tables where database = currentDatabase() "
        "and match(name, '^m__lock_[0-9]{1,18}$')"
    )
    assert comment.startswith("vcmt 0.5 or later loads this model: upgrade every process"), comment


@pytest.mark.engines("chdb")
def test_a_lock_whose_rows_were_deleted_is_refused_naming_the_fix(project):
    """A claim is written once per generation (its deduplication token names it): with the lock's rows deleted
    (TRUNCATE also forgets the tokens, a DELETE does not), a claim of generation 1 again is dropped as a repeat
    and no load could ever take the lock. The run says so and how to get out: drop the table, which the next run
    creates again."""
    project.command("create table src (id UInt64, n Int64, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src values (1, 5, 1)")
    project.model("m", MODEL)
    project.dbt("run")
    project.dbt("run")
    project.command("truncate table m__lock")
    project.dbt("run")
    project.command("delete from m__lock where 1")
    run = project.dbt("run", expect_pass=False)
    assert "the claim of generation 1 of this model's lock was dropped as a repeat of an earlier one" in run.log
    assert "drop that table (DROP TABLE" in run.log and "the next run creates it again" in run.log
    project.command("drop table m__lock")
    project.command("insert into src values (1, 2, 2)")
    project.dbt("run")
    assert project.query("select n, _version from m final where sign = 1") == [(7, 2)]
