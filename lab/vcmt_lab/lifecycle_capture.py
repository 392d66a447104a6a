"""Capture the lifecycle's fast-test fixtures from real runs (issue 58, tests/lifecycle).

    python -m vcmt_lab.lifecycle_capture [--only NAME ...] [--list] [--out DIR] [--work DIR]
    make capture-lifecycle ARGS="--only swap_split"

Each scenario drives real engines (the embedded one, a node served over HTTP, the two-node lab cluster) with the
slow tests' own scenario code (tests/materialization: Scenario, test_sharded's node lost at an ON CLUSTER statement
of a --full-refresh), up to a run that must build, load, recover or reconcile. Right before that run it records
what the run will observe (`vcmt._log_observation`), the adapter's answers and the columns the model's SELECT gives
(`wanted`); then it runs it and records every statement it sent, in order, from dbt's debug log (dbt-clickhouse
logs each one before it sends it: `On <connection>: <sql>`), without dbt's query comment, and what vcmt logged.
Each capture is one JSON file, tests/lifecycle/captured/<name>.json.

What varies between two captures of the same scenario is normalised so that a capture again changes nothing but
what vcmt does: invocation ids and times become fixed ones in the same order (a newer generation stays newer),
each node's host and port become `localhost:900<n>`, catalog rows are sorted, a load's own duration and a released
lock's silence are zeroed. Schemas are fixed per engine. What a slow machine makes a run send stays as sent: a
lock renewal (macros/vcmt/load/lock.sql `_renew_lock`) comes and goes with the run's pace.

It takes minutes (the cluster's scenarios most of them); not part of make test, its fixtures are committed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vcmt_lab.clickhouse_cluster import Cluster, two_shard_cluster
from vcmt_lab.clickhouse_server import served_node
from vcmt_lab.dbt_project import DbtProject, DbtRun, Engine
from vcmt_lab.paths import REPO_ROOT

OUT = REPO_ROOT / "tests" / "lifecycle" / "captured"
WORK = REPO_ROOT / ".local" / "lifecycle_capture"
ENGINES = ("chdb", "http", "cluster")

# A run-operation of the capture project: what `vcmt._log_observation` logs, then the adapter's answers and the
# target columns of the model's SELECT as the materialization computes them (vcmt_upsert.sql: `_target_columns`).
CAPTURE_MACRO = """
{% macro vcmt_capture(model, rebuild, select_sql) %}
  {%- do vcmt._log_observation(model, rebuild) -%}
  {%- set node = graph.nodes.values() | selectattr('resource_type', 'equalto', 'model')
      | selectattr('name', 'equalto', model) | first -%}
  {%- set cfg = vcmt._read_config(node.config) -%}
  {{ log('vcmt_capture ' ~ tojson({'adapter_type': adapter.type(), 'cluster': vcmt._cluster_name(),
      'local_suffix': adapter.get_clickhouse_local_suffix(), 'can_exchange': adapter.can_exchange(node.schema, 'table'),
      'wanted': vcmt._target_columns(cfg, adapter.get_column_schema_from_query(select_sql))}), info=true) }}
{% endmacro %}
"""
# dbt-clickhouse logs each statement right before it sends it (dbt/adapters/clickhouse/connections.py).
_SENT = re.compile(r"^dbt_clickhouse adapter: On (?P<connection>[^:]+): (?P<sql>.*)\.\.\.$", re.S)
_QUERY_COMMENT = re.compile(r"^\s*/\*.*?\*/", re.S)


@dataclass(frozen=True)
class Capture:
    """A point of a scenario where a run is captured: `args` (after `run --select <model>`), whether the run
    rebuilds (a first run or a --full-refresh: `rebuild` of vcmt._log_observation), whether it must succeed."""

    name: str
    description: str
    args: tuple[str, ...] = ()
    rebuild: bool = False
    expect_pass: bool = True


@dataclass(frozen=True)
class ScenarioSpec:
    engine: str
    model: str
    # The names of the captures `steps` yields, in order (for --list and --only, without running anything).
    captures: tuple[str, ...]
    # Drives the project up to each capture point; yields them in order.
    steps: Callable[[DbtProject, Cluster | None, str], Iterator[Capture]]


# -- scenarios: the slow tests' own steps (tests/materialization) ------------------------------------------------


def _slow_tests(module: str) -> Any:
    """A module of tests/materialization (imported once the repository is on the path: main)."""
    return importlib.import_module(f"tests.materialization.{module}")


def _package_root() -> Path:
    """The package captured: the tests' (tests/conftest.py PACKAGE_ROOT; VCMT_PACKAGE_ROOT names another checkout)."""
    return importlib.import_module("tests.conftest").PACKAGE_ROOT


def _scenario(p: DbtProject, columns: dict[str, str], config: dict[str, Any], m: str, select: str | None = None):
    return _slow_tests("scenario").Scenario(p, columns, config, name=m, select=select)


def _first_then_steady(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """test_lifecycle's model: its first run, then a run with a batch of updates and nothing else to do."""
    s = _scenario(p, _slow_tests("test_lifecycle").COLS, {"unique_key": "id"}, m)
    s.insert_source([(1, 1, 1, 1), (2, 2, 1, 1)])
    yield Capture("first_run", "the model's first run: every object created, then loaded", rebuild=True)
    s.insert_source([(2, 20, 2, 1), (3, 3, 1, 1)])
    yield Capture("steady_state", "an ordinary run of an existing model with a batch of events: nothing to change")


def _full_refresh(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """test_lifecycle's full refresh: a second set of objects built beside the first, loaded, swapped in."""
    s = _scenario(p, _slow_tests("test_lifecycle").COLS, {"unique_key": "id"}, m)
    s.run_batch([(1, 1, 1, 1), (2, 2, 1, 1)])
    s.insert_source([(2, 7, 3, 1)])
    yield Capture("full_refresh", "--full-refresh of an existing model", args=("--full-refresh",), rebuild=True)


def _append_new_columns(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """test_lifecycle's append_new_columns: the SELECT returns a new column `y`."""
    s = _scenario(
        p,
        {**_slow_tests("test_lifecycle").COLS, "y": "String"},
        {"unique_key": "id", "on_schema_change": "append_new_columns"},
        m,
        select="`id`, `x`, `_version`, `sign`",
    )
    s.run_batch([(1, 1, 1, 1, "a"), (3, 7, 1, 1, "z")])
    s.write_model("`id`, `x`, `y`, `_version`, `sign`")
    s.insert_source([(1, 2, 2, 1, "b"), (2, 5, 1, 1, "c")])
    yield Capture("append_new_columns", "on_schema_change='append_new_columns': column y added to target and stage")


def _sync_drops_a_column(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """test_lifecycle's sync_all_columns model, whose SELECT stops returning `y`."""
    s = _scenario(
        p,
        {**_slow_tests("test_lifecycle").COLS, "y": "String"},
        {"unique_key": "id", "on_schema_change": "sync_all_columns"},
        m,
        select="`id`, `x`, `y`, `_version`, `sign`",
    )
    s.run_batch([(1, 1, 1, 1, "a")])
    s.write_model("`id`, `x`, `_version`, `sign`")
    s.insert_source([(1, 2, 2, 1, "b")])
    yield Capture(
        "sync_all_columns_drop", "on_schema_change='sync_all_columns': column y dropped from stage and target"
    )


def _sync_drops_a_projected_column(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """test_lifecycle_safety's column dropped with the projection that uses it (the projection goes first)."""
    t = _slow_tests("test_lifecycle_safety")
    config = {"unique_key": "id", "on_schema_change": "sync_all_columns", "projections": [t.BY_Y, t.BY_STATUS]}
    s = _scenario(p, t.COLS, config, m, select=t.WITH_Y)
    s.run_batch(t._rows(10, 1))
    s.write_model(t.WITHOUT_Y, projections=[t.BY_STATUS])
    s.insert_source(t._rows(10, 2))
    yield Capture(
        "sync_all_columns_projection",
        "on_schema_change='sync_all_columns': column y dropped; projection by_y, which uses it, dropped first",
    )


def _sync_retypes_a_projected_column(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """The same model, whose SELECT now returns y as Int32: the projection that reads y blocks the type change, so
    it is dropped first and rebuilt after."""
    t = _slow_tests("test_lifecycle_safety")
    config = {"unique_key": "id", "on_schema_change": "sync_all_columns", "projections": [t.BY_Y, t.BY_STATUS]}
    s = _scenario(p, t.COLS, config, m, select=t.WITH_Y)
    s.run_batch(t._rows(10, 1))
    s.write_model(t.WITH_Y.replace("`y`", "toInt32(`y`) as `y`"))
    s.insert_source(t._rows(10, 2))
    yield Capture(
        "sync_all_columns_retype",
        "on_schema_change='sync_all_columns': column y retyped Int64 -> Int32; projection by_y, which reads it, "
        "dropped before and added after",
    )


def _http_first_then_steady(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """The first and steady-state runs on a served node (dbt-clickhouse over HTTP)."""
    for capture in _first_then_steady(p, cluster, m):
        yield Capture(
            f"http_{capture.name}",
            capture.description + " (a served node, over HTTP)",
            capture.args,
            capture.rebuild,
            capture.expect_pass,
        )


_KEYED = {"id": "Int64", "a": "Int64", "_version": "UInt64"}


def _cluster_unsharded(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """A model without `sharding_key` on the cluster: its tables replicated ON CLUSTER, no Distributed table."""
    s = _scenario(p, _KEYED, {"unique_key": "id"}, m)
    s.insert_source([(i, i, 1) for i in range(20)])
    yield Capture("cluster_unsharded_first_run", "an unsharded model's first run on the two-node cluster", rebuild=True)


def _cluster_sharded(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """test_sharded's model (`sharding_key='cityHash64(id)'`): per-shard tables under Distributed ones."""
    s = _scenario(p, _KEYED, {"unique_key": "id", "sharding_key": "cityHash64(id)"}, m)
    s.insert_source([(i, i, 1) for i in range(20)])
    yield Capture("cluster_first_run", "a sharded model's first run on the two-node cluster", rebuild=True)
    s.insert_source([(i, i * 2, 2) for i in range(0, 20, 3)])
    yield Capture("cluster_steady_state", "an ordinary run of the sharded model: nothing to change")


def _lost_at(statement: str, name: str, description: str, before_refresh=None) -> Callable:
    """Steps of test_sharded's swap sweep: a sharded model whose --full-refresh lost the second node at `statement`
    (its label there, `{m}` the model; `before_refresh(p, cluster, m)` gives what to do before that refresh); the
    capture is the next ordinary run, which must roll back, finish, mend or refuse."""

    def steps(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
        refresh = before_refresh(p, cluster, m) if before_refresh else None
        _slow_tests("test_sharded")._lose_a_node_at(p, cluster, m, statement.format(m=m), 1, before_refresh=refresh)
        yield Capture(name, description)

    return steps


def _drop_truncates(p: DbtProject, cluster: Cluster, m: str) -> Callable[[], None]:
    """test_a_split_rename_is_mended: the model's truncates table dropped on every node before its --full-refresh."""
    return lambda: p.command(f"drop table {m}__truncates on cluster {cluster.name} sync")


def _mend_split_again(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """test_node_lost_while_a_split_swap_is_mended: the run mending a split loses the second node at the mend's own
    EXCHANGE; the next run mends again, from the mend's leftovers."""
    t = _slow_tests("test_sharded")
    t._lose_a_node_at(p, cluster, m, f"exchange {m}__vcmt_new_local", 1)
    t._lose_a_node_during(p, cluster, m, f"exchange {m}__vcmt_mend_local", 1)
    yield Capture("mend_split_again", "a split swap whose mend itself split: the next run mends again")


def _split_then_failed_refresh(p: DbtProject, cluster: Cluster | None, m: str) -> Iterator[Capture]:
    """test_a_full_refresh_that_drops_a_split_swaps_staging_then_fails...: a split swap, then a --full-refresh
    whose load fails after its build dropped the split's staging tables: two generations, nothing to mend from."""
    t = _slow_tests("test_sharded")
    t._lose_a_node_at(p, cluster, m, f"exchange {m}__vcmt_new_local", 1)
    p.model(m, t.SHARDED.format(extra="") + f"select id, a + throwIf(id = 3) as a, _version from {m}_src")
    p.dbt("run", "--select", m, "--full-refresh", expect_pass=False)
    p.model(m, t.SHARDED.format(extra="") + f"select id, a, _version from {m}_src")
    yield Capture(
        "swap_unswapped_mixed",
        "the failed --full-refresh's staging objects left (none swapped in) over nodes serving two generations: "
        "dropped, then the run is refused",
        expect_pass=False,
    )
    yield Capture("swap_mixed", "nodes serving two generations with no staging object left: refused", expect_pass=False)


SCENARIOS: list[ScenarioSpec] = [
    ScenarioSpec("chdb", "m_first", ("first_run", "steady_state"), _first_then_steady),
    ScenarioSpec("chdb", "m_refresh", ("full_refresh",), _full_refresh),
    ScenarioSpec("chdb", "m_append", ("append_new_columns",), _append_new_columns),
    ScenarioSpec("chdb", "m_drop", ("sync_all_columns_drop",), _sync_drops_a_column),
    ScenarioSpec("chdb", "m_sync", ("sync_all_columns_projection",), _sync_drops_a_projected_column),
    ScenarioSpec("chdb", "m_retype", ("sync_all_columns_retype",), _sync_retypes_a_projected_column),
    ScenarioSpec("http", "m_first", ("http_first_run", "http_steady_state"), _http_first_then_steady),
    ScenarioSpec("cluster", "m_unsharded", ("cluster_unsharded_first_run",), _cluster_unsharded),
    ScenarioSpec("cluster", "m_sharded", ("cluster_first_run", "cluster_steady_state"), _cluster_sharded),
    # test_sharded's swap sweep (REFRESH_STATEMENTS, _outcome): one case of each outcome.
    ScenarioSpec(
        "cluster",
        "m_unswapped",
        ("swap_unswapped",),
        _lost_at(
            "create {m}__vcmt_new__stage",
            "swap_unswapped",
            "a --full-refresh that lost the second node at its last CREATE: staging objects on the first node only, "
            "none swapped in (rolled back)",
        ),
    ),
    ScenarioSpec(
        "cluster",
        "m_resumable",
        ("swap_resumable",),
        _lost_at(
            "create {m}",
            "swap_resumable",
            "a --full-refresh that lost the second node after every EXCHANGE, at its Distributed table's replacement: "
            "every node serves the rebuild (finished)",
        ),
    ),
    ScenarioSpec(
        "cluster",
        "m_split",
        ("swap_split",),
        _lost_at(
            "exchange {m}__vcmt_new_local",
            "swap_split",
            "a --full-refresh whose EXCHANGE of the local target ran on the first node only: a split swap (mended)",
        ),
    ),
    ScenarioSpec(
        "cluster",
        "m_rename",
        ("swap_split_rename",),
        _lost_at(
            "rename {m}__vcmt_new__truncates",
            "swap_split_rename",
            "a --full-refresh whose RENAME of a table the model lacked ran on the first node only: a split swap "
            "(mended with a placeholder)",
            before_refresh=_drop_truncates,
        ),
    ),
    ScenarioSpec("cluster", "m_mend", ("mend_split_again",), _mend_split_again),
    ScenarioSpec("cluster", "m_mixed", ("swap_unswapped_mixed", "swap_mixed"), _split_then_failed_refresh),
]


# -- recording ------------------------------------------------------------------------------------------------------


def _select_of(p: DbtProject, m: str) -> str:
    """The model's SELECT: its file after the config line (Scenario.write_model, test_sharded's SHARDED)."""
    return (p.root / "models" / f"{m}.sql").read_text().split("\n", 1)[1]


def _logged(run: DbtRun, tag: str) -> dict[str, Any]:
    found = re.search(rf"^{tag} (\{{.*\}})$", run.log, flags=re.M)
    if not found:
        raise RuntimeError(f"the capture logged no `{tag}`:\n{run.log[-4000:]}")
    return json.loads(found.group(1))


def _observe(p: DbtProject, m: str, rebuild: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    args = json.dumps({"model": m, "rebuild": rebuild, "select_sql": _select_of(p, m)})
    run = p.dbt("run-operation", "vcmt_capture", "--args", args)
    return _logged(run, "vcmt_observation"), _logged(run, "vcmt_capture")


def _events_of(p: DbtProject, *args: str, expect_pass: bool) -> tuple[DbtRun, list[dict[str, Any]]]:
    """Run dbt with its debug log in JSON; the events this invocation appended to it."""
    log = p.root / "logs" / "dbt.log"
    start = log.stat().st_size if log.exists() else 0
    run = p.dbt(*args, "--log-format-file", "json", "--log-level-file", "debug", expect_pass=expect_pass)
    with log.open() as f:
        f.seek(start)
        return run, [json.loads(line) for line in f if line.strip()]


def _statements(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for e in events:
        sent = _SENT.match(e["info"]["msg"]) if e["info"]["name"] == "AdapterEventDebug" else None
        if sent:
            sql = _QUERY_COMMENT.sub("", sent.group("sql"), count=1).strip()
            out.append({"connection": sent.group("connection"), "sql": sql})
    return out


def _messages(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What the run logged through Jinja's log() (info and debug), and its errors."""
    kinds = {"JinjaLogInfo": "info", "JinjaLogDebug": "debug"}
    return [
        {"level": kinds.get(e["info"]["name"], e["info"]["level"]), "msg": e["info"]["msg"]}
        for e in events
        if e["info"]["name"] in kinds or e["info"]["level"] == "error"
    ]


def capture(p: DbtProject, engine: str, m: str, point: Capture) -> dict[str, Any]:
    """Observe, then run, the capture point `point` of model `m`."""
    observation, context = _observe(p, m, point.rebuild)
    args = ("run", "--select", m, *point.args)
    run, events = _events_of(p, *args, expect_pass=point.expect_pass)
    obs = observation["obs"]
    for key, order in (
        ("tables", ("name",)),
        ("nodes", ("node", "name")),
        ("projections", ("name",)),
        ("indexes", ("name",)),
    ):
        if obs.get(key):
            obs[key] = sorted(obs[key], key=lambda row, order=order: tuple(row[k] for k in order))
    if obs.get("lock") and obs["lock"]["released"]:
        obs["lock"]["silent_s"] = 0  # a released lock's silence decides nothing (lock.sql `_acquire_lock`)
    return {
        "scenario": point.name,
        "description": point.description,
        "engine": engine,
        "command": ["dbt", *args],
        "context": {
            "adapter_type": context["adapter_type"],
            "cluster": context["cluster"],
            "local_suffix": context["local_suffix"],
            "can_exchange": context["can_exchange"],
            "vars": dict(p.vars),
            "invocation_id": next(e["info"]["invocation_id"] for e in events),
        },
        "observation": observation,
        "wanted": context["wanted"],
        "success": run.success,
        "statements": _statements(events),
        "messages": _messages(events),
    }


# -- normalising what varies between captures ---------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_GENERATION_TIME = re.compile(r"\d{8}T\d{6}\.\d{6}Z")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?")
_BASE_TIME = datetime.datetime(2000, 1, 1)
# The only Float64 a run writes: the seconds its load took, in its `__loads` row (load/report.sql).
_LOAD_SECONDS = re.compile(r"cast\('\d+(?:\.\d+)?(?:e-?\d+)?', 'Float64'\)")


def _ordered(text: str, pattern: re.Pattern, fake: Callable[[int, str], str]) -> str:
    """Each distinct match replaced by fake(i, match), i its rank in sorted order: the fakes sort as the values did."""
    ranks = {v: i for i, v in enumerate(sorted(set(pattern.findall(text))), start=1)}
    return pattern.sub(lambda found: fake(ranks[found.group(0)], found.group(0)), text)


def _fake_datetime(i: int, value: str) -> str:
    fake = (_BASE_TIME + datetime.timedelta(seconds=i)).strftime("%Y-%m-%d %H:%M:%S")
    fraction = value[19:]
    return fake.replace(" ", value[10]) + (("." + "0" * (len(fraction) - 2) + "1") if fraction else "")


def normalise(fixture: dict[str, Any], ports: Sequence[int]) -> dict[str, Any]:
    """`fixture` with invocation ids, times and node addresses made the same in every capture."""
    text = json.dumps(fixture)
    seen: dict[str, str] = {}
    text = _UUID.sub(lambda f: seen.setdefault(f.group(0), f"00000000-0000-0000-0000-{len(seen) + 1:012d}"), text)
    text = _ordered(
        text,
        _GENERATION_TIME,
        lambda i, v: (_BASE_TIME + datetime.timedelta(seconds=i)).strftime("%Y%m%dT%H%M%S.000000Z"),
    )
    text = _ordered(text, _DATETIME, _fake_datetime)
    text = _LOAD_SECONDS.sub("cast('1.0', 'Float64')", text)
    # A node's label is `<host>:<tcp port>` (engine/catalog.sql `_node_label_sql`).
    host = re.escape(socket.gethostname())
    for n, port in enumerate(ports, start=1):
        text = re.sub(rf"{host}:{port}\b", f"localhost:{9000 + n}", text)
    text = re.sub(rf"{host}:(\d+)\b", r"localhost:\1", text)
    return json.loads(text)


# -- engines --------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _project(engine: str, work: Path) -> Iterator[tuple[DbtProject, Cluster | None, list[int]]]:
    """A capture project on `engine`, in a schema of its own, with the capture macro; the nodes' TCP ports."""
    with contextlib.ExitStack() as stack:
        cluster = None
        if engine == "chdb":
            kind, ports = Engine("chdb", chdb_path=work / "chdb"), []
        elif engine == "http":
            node = stack.enter_context(served_node(work / "node"))
            kind, ports = Engine("http", node=node), [node.tcp_port]
        else:
            cluster = stack.enter_context(two_shard_cluster(work / "cluster"))
            kind, ports = Engine("http", node=cluster, cluster=cluster.name), [n.tcp_port for n in cluster.nodes]
        p = DbtProject(
            work / f"project_{engine}", _package_root(), work / "chdb", f"vcmt_capture_{engine}", work, engine=kind
        )
        stack.callback(p.close)
        p.write("macros/vcmt_capture.sql", CAPTURE_MACRO)
        yield p, cluster, ports


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vcmt_lab.lifecycle_capture", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="captures to take again, by name or engine (with every capture of their scenarios); default: all",
    )
    parser.add_argument("--list", action="store_true", help="list the captures and their engines, then stop")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="where the fixtures go (default tests/lifecycle/captured)"
    )
    parser.add_argument("--work", type=Path, default=WORK, help="scratch folder, emptied first")
    args = parser.parse_args(argv)
    if str(REPO_ROOT) not in sys.path:  # the slow tests' scenario code (tests/materialization)
        sys.path.insert(0, str(REPO_ROOT))
    chosen = [s for s in SCENARIOS if not args.only or s.engine in args.only or set(s.captures) & set(args.only)]
    if args.list or not chosen:
        for s in SCENARIOS:
            print(f"{s.engine:8} {' '.join(s.captures)}")
        return 0 if args.list else 2
    shutil.rmtree(args.work, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for engine in ENGINES:
        specs = [s for s in chosen if s.engine == engine]
        if not specs:
            continue
        with _project(engine, args.work.resolve()) as (p, cluster, ports):
            for spec in specs:
                saved = dict(p.vars)
                try:
                    for point in spec.steps(p, cluster, spec.model):
                        if point.name not in spec.captures:
                            raise RuntimeError(f"{spec.model} yields {point.name}, not among {spec.captures}")
                        began = time.monotonic()
                        fixture = normalise(capture(p, engine, spec.model, point), ports)
                        path = args.out / f"{point.name}.json"
                        path.write_text(json.dumps(fixture, indent=1) + "\n")
                        print(
                            f"lifecycle_capture: {point.name} ({engine}): {len(fixture['statements'])} statements, "
                            f"{time.monotonic() - began:.0f} s -> {path}",
                            flush=True,
                        )
                finally:
                    p.vars = saved
    print(f"lifecycle_capture: done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
