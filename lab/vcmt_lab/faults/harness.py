"""The fault-injection harness of the load lock (docs/design.md#one-load-at-a-time).

A schedule is one fault at one named statement of a `dbt run` of a model on a
served node (over HTTP or native) or on the lab's two-node cluster, while
another load of the same model starts:

1. the model is built from a first batch; a second batch lands in its source;
2. a `dbt run` starts with the fault (vcmt_lab.faults.inject): `pause` stops
   it right before that statement, `kill` kills it there, `cut` cuts its
   connections while that statement runs;
3. once the fault has happened, the other load (`dbt run`, `vcmt.load_stage`
   or `dbt run --full-refresh`) starts and runs to its end; a paused run is
   then resumed and runs to its end;
4. a last `dbt run` (the scheduler's rerun), which must succeed;
5. the model must equal the oracle: sum(sign) in {0, 1} per key and per
   (key, version), GROUP BY equals FINAL, each key's live row the one its
   latest event says, and every run that reported success recorded its
   load in `<model>__loads`, but for a run that ended before a
   `--full-refresh` that succeeded: its record went with the `__loads` the
   full refresh replaced, whose oldest record is the full refresh's own
   (`unrecorded_loads`).

On the cluster (a project whose engine names it, vcmt_lab.clickhouse_cluster)
the model is sharded (SHARDING_KEY), its source is on every node, the faulted
run goes through the first node's entry and the other load through the
second node's (`through_other_node`): what proves that loads through
different nodes are serialised. The checks read the model through its
Distributed table and `__loads` on every node.

The statements are enumerated from a clean run's own log (their names are
stable: vcmt_lab.faults.inject.statement_label), so a new statement of the
loader is in the sweep without a change here. The lease is shortened to
LEASE_S (the project var `vcmt_lock_lease_s`) so that a takeover takes
seconds, not half a minute.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vcmt_cli.processes import free_port
from vcmt_lab import invariants
from vcmt_lab.dbt_project import DbtProject
from vcmt_lab.faults.inject import sent_statements
from vcmt_lab.oracle import Event, Oracle

LEASE_S = 3
# The name of a load's claim of its model's lock (vcmt_lab.faults.inject.statement_label).
# The claim of the model's lock: `m__lock`, or on a sharded model `m_local__lock` (named after its local table).
CLAIMS = ("insert m__lock acquired#", "insert m_local__lock acquired#")
# A holder renews at a step of its load once silent for max(lease // 5, 1) s (macros/vcmt/load/lock.sql): the
# enumerating run and a run faulted at a renewal wait longer before each statement (VCMT_FAULT_RENEW_WAIT), so that
# each renews at every step and `insert m__lock renewed#n` names the same statement in both, whatever the machine's
# speed.
RENEW_WAIT_S = max(LEASE_S // 5, 1) + 0.5
STEP_TIMEOUT_S = 300.0
KEYS = 600
FAULTS = ("pause", "kill", "cut")
OTHERS = ("run", "load", "full-refresh")
# Each shape takes one of the loader's paths (docs/design.md#fold-or-rounds, #virtual-shards).
SHAPES = {
    "fold": (
        "{{ config(materialized='vcmt_upsert', unique_key='id', lock_timeout=120) }}\n"
        "select id, amount, _version, sign from src"
    ),
    "rounds": (
        "{{ config(materialized='vcmt_upsert', unique_key='id', merge={'amount': 'sum'}, lock_timeout=120) }}\n"
        "select id, amount, _version, sign from src"
    ),
    # The fold on two virtual shards: its batch, then its fan-out (docs/design.md#virtual-shards).
    "shards": (
        "{{ config(materialized='vcmt_upsert', unique_key='id', virtual_shards=2, lock_timeout=120) }}\n"
        "select id, amount, _version, sign from src"
    ),
}
MERGE = {"fold": {}, "rounds": {"amount": "sum"}, "shards": {}}
# What a profile can set to hide a running statement from another load, were the lock to look for it in the
# statement's text (docs/design.md#one-load-at-a-time): its text cut to its first character (the lowest
# `log_queries_cut_to_length` that cuts; 0 cuts nothing), and a `log_comment` of its own.
HIDING_PROFILE = {"log_comment": "hidden", "log_queries_cut_to_length": 1}
# A sharded model on the cluster: the same shapes, its rows spread over the shards by key.
SHARDING_KEY = "cityHash64(id)"


def on_cluster(project: DbtProject) -> str | None:
    """The cluster the project's ClickHouse target names (its models sharded), or None."""
    return project.engine.cluster


def model_sql(project: DbtProject, shape: str) -> str:
    """The shape's model, sharded by SHARDING_KEY on a cluster."""
    sql = SHAPES[shape]
    if on_cluster(project):
        sql = sql.replace("unique_key='id',", f"unique_key='id', sharding_key='{SHARDING_KEY}',", 1)
    return sql


@dataclass(frozen=True)
class Schedule:
    shape: str
    fault: str
    statement: str  # name#n, as vcmt_lab.faults.inject logs it
    other: str
    keys: int = KEYS
    # pause only: the other load is stopped right before its first stage INSERT, after it took the lock over;
    # then the paused load goes on and, once it runs a stage INSERT (or has ended), so does the other one: the
    # two loads' writes meet, as when a holder wakes up in the middle of the next load's INSERT.
    overlap: bool = False

    def __str__(self) -> str:
        overlap = " (overlapping its INSERT)" if self.overlap else ""
        return f"{self.shape}: {self.fault} at {self.statement}, then {self.other}{overlap}"


@dataclass
class Outcome:
    schedule: Schedule
    exact: bool
    reached: bool
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    outputs: dict[str, tuple[int, str]] = field(default_factory=dict)  # process -> (exit code, output)


def _batches(shape: str, keys: int = KEYS) -> list[list[tuple[int, int, int, int]]]:
    """(id, n, _version, sign) rows of the two batches: inserts; then updates, deletes, new keys and, for
    the rounds shape, several events per key."""
    first = [(k, k % 7, 1, 1) for k in range(keys)]
    second = []
    for k in range(keys + keys // 4):
        if k % 4 == 1 and k < keys:
            second.append((k, 0, 2, -1))
        else:
            second.append((k, k % 5 + 1, 2, 1))
            if shape == "rounds" and k % 2 == 0:
                second.append((k, 3, 3, 1))
    return [first, second]


def expected_rows(shape: str, keys: int = KEYS) -> dict[int, tuple[int, int]]:
    """id -> (n, _version) of every live key once both batches are applied (vcmt_lab.oracle)."""
    oracle = Oracle(["amount"], merge=MERGE[shape])
    for batch in _batches(shape, keys):
        oracle.apply_batch(Event((k,), v, s, {"amount": n}) for k, n, v, s in batch)
    return {key[0]: (row["amount"], version) for key, (version, row) in oracle.live_rows().items()}


def _node_clients(project: DbtProject) -> list[Any]:
    """A client per node in the project's schema: the served node's own, or each cluster node's."""
    own = project.client  # creates the schema (on every node of a cluster)
    if not on_cluster(project):
        return [own]
    return [node.client(project.schema) for node in project.engine.node.nodes]


def _close(project: DbtProject, clients: list[Any]) -> None:
    for client in clients:
        if client is not project.client:
            client.close()


def _insert(project: DbtProject, rows: list[tuple[int, int, int, int]]) -> None:
    """Into the source on every node: a load reads it on the node it runs on."""
    clients = _node_clients(project)
    try:
        for client in clients:
            client.command("insert into src values " + ", ".join(f"({k}, {n}, {v}, {s})" for k, n, v, s in rows))
    finally:
        _close(project, clients)


def prepare(project: DbtProject, shape: str, keys: int = KEYS) -> None:
    """The model built from the first batch, the second landed in its source; nothing else in the schema (on
    every node of a cluster)."""
    clients = _node_clients(project)
    try:
        for client in clients:
            for (name,) in client.query(
                "select name from system.tables where database = currentDatabase() "
                "order by engine = 'MaterializedView' desc"
            ).result_rows:
                client.command(f"drop table if exists `{name}` sync")
            client.command(
                "create table src (id UInt64, amount Int64, _version UInt64, sign Int8) engine = MergeTree order by id"
            )
    finally:
        _close(project, clients)
    first, second = _batches(shape, keys)
    _insert(project, first)
    project.vars = {**project.vars, "vcmt_lock_lease_s": LEASE_S}
    project.model("m", model_sql(project, shape))
    project.dbt("run", "--select", "m")
    _insert(project, second)


def inject_program() -> list[str]:
    """The command that runs dbt under vcmt_lab.faults.inject (with the same arguments as `dbt`)."""
    return [sys.executable, "-m", "vcmt_lab.faults.inject"]


def process_state(pid: int) -> str:
    """A process's state letter from /proc (T: stopped), or `gone`."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0]
    except OSError:
        return "gone"


def wait_until_stopped(proc: subprocess.Popen, timeout: float = STEP_TIMEOUT_S) -> bool:
    """Wait (at most `timeout` s) until `proc` is stopped (SIGSTOP: a `pause` fault) or has ended; True if it
    is stopped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and process_state(proc.pid) != "T":
        time.sleep(0.05)
    return proc.poll() is None and process_state(proc.pid) == "T"


def _other_args(other: str) -> list[str]:
    if other == "load":
        return [
            "run-operation",
            "vcmt.load_stage",
            "--args",
            json.dumps({"model": "m", "sql": "select id, amount, _version, sign from src"}),
        ]
    return ["run", "--select", "m", *(["--full-refresh"] if other == "full-refresh" else [])]


def _finish(proc: subprocess.Popen, timeout: float = STEP_TIMEOUT_S) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return -999, (out or "") + "\n(timed out: killed)"
    return proc.returncode, out or ""


def _invocation(project: DbtProject, name: str) -> str | None:
    """The invocation id of process `name` (its run_results.json), if it wrote one."""
    path = project.root / f"target_{name}" / "run_results.json"
    try:
        return json.loads(path.read_text())["metadata"]["invocation_id"]
    except (OSError, ValueError, KeyError):
        return None


def enumerate_statements(project: DbtProject, shape: str) -> list[str]:
    """The named statements (name#n) an incremental `dbt run` of the shape's model sends from its lock
    on, in order."""
    prepare(project, shape)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "statements"
        proc = project.dbt_process(
            "enumerate",
            "run",
            "--select",
            "m",
            program=inject_program(),
            env={"VCMT_FAULT_LOG": str(log), "VCMT_FAULT_RENEW_WAIT": str(RENEW_WAIT_S)},
        )
        code, out = _finish(proc)
        if code != 0:
            raise AssertionError(f"the clean run failed:\n{out[-4000:]}")
        sent = sent_statements(log)
    # Before its lock a load only reads: its statements from its claim of the lock on are the ones to fault.
    first = next(i for i, name in enumerate(sent) if name.startswith(CLAIMS))
    return sent[first:]


@contextlib.contextmanager
def through_other_node(project: DbtProject, node: int = 1) -> Iterator[str | None]:
    """On a cluster: a profile output through node `node`'s own entry (Cluster.entry, as behind a load
    balancer), for the other load, while the `with` block runs; None (the default target) on a served node."""
    if not on_cluster(project):
        yield None
        return
    entry = project.engine.node.entry(node)
    try:
        yield target_on_port(project, f"via_node_{node}", entry.port)
    finally:
        entry.stop()


def run_schedule(project: DbtProject, schedule: Schedule, other_target: str | None = None) -> Outcome:
    """One schedule, from a freshly prepared model to the checks; the other load on `other_target` (on a
    cluster: another node's entry, `through_other_node`)."""
    prepare(project, schedule.shape, schedule.keys)
    outcome = Outcome(schedule, exact=False, reached=False)
    env: dict[str, str | None] = {"VCMT_FAULT": f"{schedule.fault}@{schedule.statement}"}
    if " renewed#" in schedule.statement:
        # Renewals are numbered as the enumerating run sent them, which renewed at every step (RENEW_WAIT_S); no
        # other statement's name or number depends on them.
        env["VCMT_FAULT_RENEW_WAIT"] = str(RENEW_WAIT_S)
    target = None
    if schedule.fault == "cut":
        # In front of the entry the faulted run uses: the node's port for its driver, or the cluster's first
        # node's entry (HTTP, Cluster.http_port); the statement's progress is watched over HTTP there too.
        node = project.engine.node
        server = node.http_port if project.engine.kind == "http" else node.tcp_port
        listen = free_port()
        env.update({"VCMT_FAULT_PROXY": f"{listen}:{server}", "VCMT_FAULT_HTTP_PORT": str(node.http_port)})
        target = target_on_port(project, "faulted", listen)
    sent = project.root / "target_faulted.statements"
    sent.unlink(missing_ok=True)
    env["VCMT_FAULT_LOG"] = str(sent)
    faulted = project.dbt_process("faulted", "run", "--select", "m", program=inject_program(), env=env, target=target)
    wait_until_stopped(faulted)
    results: dict[str, tuple[int, str]] = {}
    if faulted.poll() is not None:
        results["faulted"] = _finish(faulted)
    # Whether the faulted run had recorded its load before the other load started (ended, or paused past it).
    recorded_early = {"faulted"} if "insert m__loads#1" in sent_statements(sent) else set()
    outcome.reached = (
        f"vcmt fault: {schedule.fault} at" in (results.get("faulted", ("", ""))[1]) or process_state(faulted.pid) == "T"
    )
    if schedule.overlap and "faulted" not in results:
        _overlap(project, schedule, faulted, results, other_target)
    else:
        results["other"] = _finish(project.dbt_process("other", *_other_args(schedule.other), target=other_target))
    if "faulted" not in results:
        faulted.send_signal(signal.SIGCONT)
        results["faulted"] = _finish(faulted)
    outcome.notes += [f"{name}: exit {code}" for name, (code, _) in results.items()]
    outcome.outputs = results
    code, out = _finish(project.dbt_process("rerun", "run", "--select", "m"))
    if code != 0:
        outcome.problems.append("the rerun failed:\n" + out[-3000:])
    outcome.problems += _check(project, schedule, results, recorded_early)
    outcome.exact = not outcome.problems
    return outcome


def _overlap(
    project: DbtProject,
    schedule: Schedule,
    faulted: subprocess.Popen,
    results: dict[str, tuple[int, str]],
    other_target: str | None,
) -> None:
    """The other load, stopped before its first stage INSERT; the paused load resumed; the other one resumed
    once the paused one runs a stage INSERT or has ended (Schedule.overlap)."""
    other = project.dbt_process(
        "other",
        *_other_args(schedule.other),
        program=inject_program(),
        env={"VCMT_FAULT": "pause@insert m__stage#1"},
        target=other_target,
    )
    wait_until_stopped(other)
    deadline = time.monotonic() + STEP_TIMEOUT_S
    faulted.send_signal(signal.SIGCONT)
    while (
        time.monotonic() < deadline
        and faulted.poll() is None
        and not project.scalar(
            "select count() from system.processes where query_id != queryID() and position(query, 'insert into') > 0 "
            "and position(query, 'm__stage') > 0"
        )
    ):
        time.sleep(0.02)
    other.send_signal(signal.SIGCONT)
    results["other"] = _finish(other)


def target_on_port(project: DbtProject, name: str, port: int) -> str:
    """A profile output `name` like the ClickHouse target but on `port` (a faulted process's forwarder, another
    node's entry); returns `name`."""
    import yaml

    path = project.root / "profiles.yml"
    profiles = yaml.safe_load(path.read_text())
    outputs = profiles["vcmt_test"]["outputs"]
    outputs[name] = {**outputs[project.ch_target], "port": port}
    path.write_text(yaml.safe_dump(profiles, sort_keys=False))
    return name


def _check(
    project: DbtProject, schedule: Schedule, results: dict[str, tuple[int, str]], recorded_early: set[str] = frozenset()
) -> list[str]:
    problems = []
    query = project.query
    for finding in invariants.check(query, invariants.Target("m", ["id"]), ["amount"]):
        if not finding.ok:
            problems.append(f"{finding.name}: {finding.detail}")
    live = {i: (n, v) for i, n, v in query("select id, amount, _version from m final where sign = 1")}
    grouped = {
        i: (n, v)
        for i, n, v in query("select id, sum(amount * sign), max(_version) from m group by id having sum(sign) = 1")
    }
    expected = expected_rows(schedule.shape, schedule.keys)
    if live != expected:
        wrong = sorted(k for k in set(live) | set(expected) if live.get(k) != expected.get(k))
        problems.append(
            f"{len(wrong)} keys differ from the oracle, e.g. "
            + ", ".join(f"{k}: {live.get(k)} != {expected.get(k)}" for k in wrong[:5])
        )
    if grouped != live:
        problems.append("GROUP BY with sign arithmetic differs from FINAL")
    # On a cluster each node's `__loads` holds the records of the loads through it.
    cluster = on_cluster(project)
    loads = f"clusterAllReplicas('{cluster}', currentDatabase(), 'm__loads')" if cluster else "m__loads"
    recorded = [r[0] for r in query(f"select invocation_id from {loads} order by loaded_at, invocation_id")]
    ended = [(name, code, _invocation(project, name)) for name, (code, _) in results.items()]
    # The rerun took the lock last: the load tables of every earlier load (batch, fan-out and its views) are gone.
    tables = f"clusterAllReplicas('{cluster}', system.tables)" if cluster else "system.tables"
    left = sorted(
        {
            name
            for (name,) in query(
                f"select name from {tables} where database = currentDatabase() "
                "and (startsWith(name, 'm__batch') or startsWith(name, 'm__fanout'))"
            )
        }
    )
    if left:
        problems.append(f"load tables left after the rerun: {left}")
    return problems + unrecorded_loads(schedule.other, ended, recorded, recorded_early)


def unrecorded_loads(
    other: str, ended: list[tuple[str, int, str | None]], recorded: list[str], recorded_early: set[str] = frozenset()
) -> list[str]:
    """What `<model>__loads` (its invocation ids, oldest first) lacks or holds wrongly, given the processes'
    (name, exit code, invocation id) in the order they ended (the rerun's record is not asked for).

    Every run that reported success recorded its load. But a `--full-refresh` (the other load) builds a new
    `__loads` that holds its own record first and then those of later loads only: so when the faulted run
    ended before the full refresh started and the full refresh succeeded, the faulted run's record is gone and
    the full refresh's is the oldest; when the full refresh failed, nothing was swapped and the faulted run's
    record is there. The same holds for a run in `recorded_early`, which had written its record before the
    full refresh started (paused after it, e.g. right before its release) and ended after it."""
    problems = []
    codes = {name: (code, invocation) for name, code, invocation in ended}
    refreshed = other == "full-refresh" and codes.get("other", (1, None))[0] == 0
    for position, (name, code, invocation) in enumerate(ended):
        if code != 0 or invocation is None:
            continue
        rebuilt_after = name != "other" and (position == 0 or name in recorded_early) and refreshed
        if rebuilt_after and invocation in recorded:
            problems.append(f"{name} ended before the --full-refresh, whose rebuilt __loads still holds its record")
        elif rebuilt_after and recorded[:1] != [codes["other"][1]]:
            problems.append(f"the --full-refresh's record is not the oldest of the __loads it rebuilt: {recorded}")
        elif not rebuilt_after and invocation not in recorded:
            problems.append(f"{name} reported success but recorded no load")
    return problems
