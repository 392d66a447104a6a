"""Apply fuzz streams through vcmt_upsert on chDB and compare with the oracle."""

from __future__ import annotations

import argparse
import copy
import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vcmt_lab import invariants
from vcmt_lab.dbt_project import DbtProject, Engine
from vcmt_lab.fuzz import downstream as fuzz_downstream
from vcmt_lab.fuzz.streams import (
    MODEL_SPECS,
    ModelSpec,
    Stream,
    generate_stream,
    is_truncate,
    python_policy,
    to_events,
)
from vcmt_lab.oracle import Oracle, apply_order
from vcmt_lab.paths import REPO_ROOT

# Session settings of the fuzz project's profile that would change what vcmt
# computes if it did not pin them on its own statements. (`async_insert` is
# pinned too, but chDB never starts its async-insert queue, so it cannot be
# exercised here.)
HOSTILE_PROFILE_SETTINGS = {
    "join_use_nulls": 1,
    "aggregate_functions_null_for_empty": 1,
    "transform_null_in": 1,
    "insert_deduplicate": 1,
    "deduplicate_blocks_in_dependent_materialized_views": 1,
    "optimize_on_insert": 1,
}


@dataclass
class StreamResult:
    seed: int
    model: str
    path: str
    events: int
    virtual_shards: int = 1
    full_refreshes: int = 0
    problems: list[str] = field(default_factory=list)
    # A lake stream's deliveries by kind: late files, duplicates, failed loads, killed staging jobs.
    lake: dict[str, int] = field(default_factory=dict)
    # Steps after which the downstream models were run and compared with the oracle; batches loaded by two
    # overlapping runs.
    downstream_runs: int = 0
    overlapping_loads: int = 0
    # Runs of the downstream incremental model made to fail, before a run that must read on.
    downstream_failures: int = 0


# Applies a whole stream's steps in one dbt invocation: each step's rows through
# vcmt.load_stage (the external writers' loader), then its merge control.
APPLY_STEPS_MACRO = """
{% macro fuzz_apply_steps(model, steps) %}
  {%- for step in steps -%}
    {%- do vcmt.load_stage(model, step.sql) -%}
    {%- for statement in step.after -%}{%- do run_query(statement) -%}{%- endfor -%}
  {%- endfor -%}
{% endmacro %}
"""


def setup_models(project: DbtProject, specs: tuple[ModelSpec, ...] = MODEL_SPECS) -> None:
    """One vcmt_upsert model per spec, reading the current batch from `<name>_src` under `dbt run`;
    the external writer's steps wait in `<name>_steps`."""
    project.write("macros/fuzz_apply_steps.sql", APPLY_STEPS_MACRO)
    for spec in specs:
        cols = ", ".join(f"`{c}` {t}" for c, t in spec.all_columns.items())
        project.command(f"create table if not exists `{spec.name}_src` ({cols}) engine = MergeTree order by tuple()")
        project.command(
            f"create table if not exists `{spec.name}_steps` ({cols}, _fz_step UInt32) "
            "engine = MergeTree order by _fz_step"
        )
        write_model(project, spec, virtual_shards=1)
    project.dbt("run", "--select", " ".join(s.name for s in specs))


def sharding_key(spec: ModelSpec) -> str:
    """The `sharding_key` of `spec`'s model on a cluster: a hash of its key columns."""
    return "cityHash64(" + ", ".join(f"`{k}`" for k in spec.keys) + ")"


def _on_cluster(project: DbtProject) -> str:
    """` on cluster <name>` for statements that must reach every node of the project's cluster, else ''."""
    return f" on cluster `{project.engine.cluster}`" if project.engine.cluster else ""


def write_model(
    project: DbtProject,
    spec: ModelSpec,
    virtual_shards: int,
    where: str = "",
    source: str | None = None,
    changes: bool = False,
) -> None:
    """The model of `spec`, reading `<name>_src` (rows matching `where`), or the SELECT `source`; each stream sets
    its own `virtual_shards`, and `changes` with downstream models. On a cluster the model is sharded by its key."""
    config = {
        "unique_key": list(spec.keys),
        "merge": spec.merge,
        "delete_mode": spec.delete_mode,
        "insert_settings": spec.insert_settings,
        "virtual_shards": virtual_shards,
        "changes": changes,
    }
    if project.engine.cluster:
        config["sharding_key"] = sharding_key(spec)
    config.update(
        {
            k: v
            for k, v in (
                ("truncate_when", spec.truncate_when),
                ("unavailable_column", spec.unavailable_column),
                ("partition_by", spec.partition_by),
                ("indexes", list(spec.indexes)),
                ("order_by", list(spec.order_by)),
            )
            if v
        }
    )
    if spec.partition_by:
        config["settings"] = {"index_granularity": 16}
    args = ", ".join(f"{k}={v!r}" for k, v in config.items())
    select = source or f"select * from `{spec.name}_src`{where}"
    project.model(spec.name, f"{{{{ config(materialized='vcmt_upsert', {args}) }}}}\n{select}")


def _reset(project: DbtProject, spec: ModelSpec, target: str) -> None:
    """Empty `spec`'s model (its target table is `target`) and inputs, on every node of a cluster."""
    on_cluster = _on_cluster(project)
    project.command(f"system start merges{on_cluster} `{target}`")
    # Every table that stores something: the model's own (whatever vcmt.objects names them) and the fuzz inputs;
    # not the load lock's (its claims are deduplicated against the generations it has seen: macros/vcmt/load/lock.sql).
    tables = project.client.query(
        "select name from system.tables where database = currentDatabase()"
        " and engine not in ('MaterializedView', 'Null') and not match(name, '__lock(_[0-9]+)?$')"
        " and (name in ({m:String}, {src:String}, {steps:String}) or startsWith(name, {helpers:String}))",
        parameters={
            "m": spec.name,
            "src": f"{spec.name}_src",
            "steps": f"{spec.name}_steps",
            "helpers": f"{spec.name}__",
        },
    ).result_rows
    for (name,) in tables:
        # The fuzz inputs exist on the first node only.
        project.command(f"truncate table if exists `{name}`{on_cluster}")


def _apply_batch(
    project: DbtProject, spec: ModelSpec, rows: list[dict[str, Any]], *extra: str, expect_pass: bool = True
) -> None:
    """One batch through `dbt run`: the model reads `<name>_src`."""
    project.command(f"truncate table `{spec.name}_src`")
    if rows:
        names = list(spec.all_columns)
        project.client.insert(f"{spec.name}_src", [[r[c] for c in names] for r in rows], column_names=names)
    project.dbt("run", "--select", spec.name, *extra, expect_pass=expect_pass)


def _overlapping_loads(project: DbtProject, spec: ModelSpec, rows: list[dict[str, Any]], expected: Oracle) -> list[str]:
    """The batch `rows` loaded by a `dbt run` in its own process and, at once, by one in this process; the
    downstream incremental model runs here until the other process has ended (each run reads the loads that
    have ended when it compiles), then once more. Its totals must then be the oracle's."""
    project.command(f"truncate table `{spec.name}_src`")
    if rows:
        names = list(spec.all_columns)
        project.client.insert(f"{spec.name}_src", [[r[c] for c in names] for r in rows], column_names=names)
    other = project.dbt_process("overlap", "run", "--select", spec.name)
    project.dbt("run", "--select", spec.name)
    totals = fuzz_downstream.totals_name(spec)
    while other.poll() is None:
        project.dbt("run", "--select", totals)
    out = other.communicate()[0]
    if other.returncode != 0:
        return [f"the overlapping load failed: {out[-2000:]}"]
    project.dbt("run", "--select", totals)
    return fuzz_downstream.check_downstream(project, spec, expected)


def _run_downstream(project: DbtProject, spec: ModelSpec, mode: str, first: bool, fail: str | None) -> list[str]:
    """The downstream models' runs after a step of the model's: on the first step (the stream's model was reset)
    both are rebuilt; after a full refresh the incremental model, once it has read something, must fail naming
    its --full-refresh, which then rebuilds it (the online aggregate was rebuilt by the model's run). With
    `fail`, a run of the incremental model fails first, "while reading" (nothing changed) or "after its swap"
    (its new table in place), and the next one must read on from where it stands."""
    totals, online = fuzz_downstream.totals_name(spec), fuzz_downstream.online_name(spec)
    if first:
        project.dbt("run", "--select", totals, online, "--full-refresh")
        return []
    problems = []
    if mode == "full_refresh":
        read = project.scalar(f"select count() from `{totals}`") > 0
        refused = project.dbt("run", "--select", totals, expect_pass=not read)
        if read and f"dbt run --full-refresh --select {totals}" not in refused.log:
            problems.append(f"after the model's full refresh, {totals} did not name its --full-refresh")
        project.dbt("run", "--select", totals, "--full-refresh")
        return problems
    if fail:
        project.model(totals, fuzz_downstream.totals_sql(spec, fail=fail))
        project.dbt("run", "--select", totals, expect_pass=False)
        project.model(totals, fuzz_downstream.totals_sql(spec))
    project.dbt("run", "--select", totals)
    return problems


def _apply_failing_full_refresh(
    project: DbtProject, spec: ModelSpec, rows: list[dict[str, Any]], virtual_shards: int, changes: bool = False
) -> None:
    """A `dbt run --full-refresh` whose source fails mid-load, once the new tables are built: the run fails and
    must leave the model as it was."""
    # Not foldable to a constant (`_version >= 0` on a UInt is): it must raise when rows are read, not at parse time.
    fail = "throwIf(toString(`_version`) != '', 'fuzz: the source failed')"
    write_model(project, spec, virtual_shards, where=f" where {fail} = 0", changes=changes)
    _apply_batch(project, spec, rows, "--full-refresh", expect_pass=False)
    write_model(project, spec, virtual_shards, changes=changes)


def _apply_steps(project: DbtProject, spec: ModelSpec, steps: list[tuple[list[dict[str, Any]], list[str]]]) -> None:
    """Every step through vcmt.load_stage, in one dbt invocation."""
    names = list(spec.all_columns)
    data = [[r[c] for c in names] + [i] for i, (rows, _) in enumerate(steps) for r in rows]
    if data:
        project.client.insert(f"{spec.name}_steps", data, column_names=[*names, "_fz_step"])
    args = {
        "model": spec.name,
        "steps": [
            {"sql": f"select * except (_fz_step) from `{spec.name}_steps` where _fz_step = {i}", "after": after}
            for i, (_, after) in enumerate(steps)
        ],
    }
    project.dbt("run-operation", "fuzz_apply_steps", "--args", json.dumps(args))


def crashed_part(rows: list[dict[str, Any]], spec: ModelSpec, rng: random.Random) -> list[dict[str, Any]]:
    """What a load killed half-way had applied: the batch's truncates (a load applies them first), then for some
    keys the first few of their events in apply order."""
    per_key: dict[tuple, list[dict[str, Any]]] = {}
    part = [row for row in rows if is_truncate(row, spec)]
    for event, row in zip(to_events(rows, spec), rows, strict=True):
        if not event.truncate:
            per_key.setdefault(event.key, []).append((event, row))
    for pairs in per_key.values():
        if rng.random() < 0.5:
            ordered = {id(e): r for e, r in pairs}
            applied = apply_order([e for e, _ in pairs])[: rng.randint(1, len(pairs))]
            part.extend(ordered[id(e)] for e in applied)
    return part


def _merge_statements(target: str, on_cluster: str, action: str, stopped: bool) -> tuple[list[str], bool]:
    """The merge control of table `target` after a batch, and whether merges are stopped afterwards."""
    if action == "stop_merges":
        return [f"system stop merges{on_cluster} `{target}`"], True
    if action == "start_merges":
        return [f"system start merges{on_cluster} `{target}`"], False
    if action == "optimize" and not stopped:
        return [f"optimize table `{target}`{on_cluster} final"], stopped
    return [], stopped


def check_target(project: DbtProject, spec: ModelSpec, oracle: Oracle) -> list[str]:
    """Differences between the target and the oracle, and invariant violations, as readable lines."""
    problems = []
    keys = ", ".join(f"`{k}`" for k in spec.keys)
    cols = ", ".join(f"`{c}`" for c in spec.columns)
    rows = project.query(f"select {keys}, {cols}, _version from `{spec.name}` final where sign = 1")
    n = len(spec.keys)
    actual = {tuple(r[:n]): (r[-1], dict(zip(spec.columns, r[n:-1], strict=True))) for r in rows}
    expected = oracle.live_rows()
    for key in sorted(set(actual) | set(expected), key=repr):
        if actual.get(key) != expected.get(key):
            problems.append(f"key {key}: target {actual.get(key)} != oracle {expected.get(key)}")
    if len(rows) != len(actual):
        problems.append(f"FINAL returned {len(rows)} live rows for {len(actual)} keys")
    target = invariants.Target(f"`{spec.name}`", list(spec.keys))
    findings = invariants.check(project.query, target, list(spec.columns))
    problems += [f"{f.name}: {f.detail}" for f in findings if not f.ok]
    return problems


def run_stream(project: DbtProject, stream: Stream, path: str, downstream: bool = False) -> StreamResult:
    """`stream` through the stage writer or `dbt run` (`path`); with `downstream` (through `dbt run`), its model
    keeps a change feed, and its downstream models (vcmt_lab.fuzz.downstream) are run after each batch and
    compared with the oracle."""
    spec = stream.spec
    downstream = downstream and path == "dbt"
    write_model(project, spec, stream.virtual_shards, changes=downstream)
    # The table that merges: the model itself, or on a cluster each shard's local table.
    target = project.object_names(spec.name)["target"] if project.engine.cluster else spec.name
    on_cluster = _on_cluster(project)
    _reset(project, spec, target)
    oracle = Oracle(spec.columns, {c: python_policy(p) for c, p in spec.merge.items()}, spec.delete_mode)
    result = StreamResult(
        seed=stream.seed, model=spec.name, path=path, events=stream.events, virtual_shards=stream.virtual_shards
    )
    stopped = False
    rng = random.Random(f"faults/{stream.seed}")
    # Through `dbt run`, one batch mid-stream is a --full-refresh: the model is rebuilt from that batch alone. Half
    # the time a full refresh whose source fails mid-load runs first, and must change nothing. Drawn from their own
    # generator, so a seed's other faults stay as they were.
    refresh_rng = random.Random(f"full_refresh/{stream.seed}")
    refresh_at = refresh_rng.randrange(1, len(stream.batches)) if path == "dbt" and len(stream.batches) > 1 else -1
    # With downstream models on a served node, one batch is loaded by overlapping runs: not the first (the
    # downstream models are built after it) nor the full refresh's.
    overlapped = [i for i in range(1, len(stream.batches)) if i != refresh_at]
    overlap_at = (
        random.Random(f"overlap/{stream.seed}").choice(overlapped)
        if downstream and project.engine.served and overlapped
        else -1
    )
    # rows, merge statements after them, how they are applied: a plain run, "full_refresh" or
    # "failing_full_refresh", and the oracle the model must match after it (with `downstream`, or for a failing
    # full refresh, which must change nothing).
    steps: list[tuple[list[dict[str, Any]], list[str], str, Oracle | None]] = []
    for i, (rows, action) in enumerate(zip(stream.batches, stream.actions, strict=True)):
        if i == refresh_at and rows and refresh_rng.random() < 0.5:
            steps.append((rows, [], "failing_full_refresh", copy.deepcopy(oracle)))
        # A load killed half-way, then rerun in full. Exact only with versioned
        # deletes: an unconditional delete replayed after a later upsert of its
        # key removes it again (README "Guarantees and limits").
        if spec.delete_mode == "versioned" and rows and rng.random() < 0.15:
            part = crashed_part(rows, spec, rng)
            crashed = copy.deepcopy(oracle) if downstream else None
            if crashed:
                crashed.apply_batch(to_events(part, spec))
            steps.append((part, [], "run", crashed))
        statements, stopped = _merge_statements(target, on_cluster, action, stopped)
        mode = "run"
        if i == refresh_at:
            mode = "full_refresh"
            result.full_refreshes += 1
            oracle = Oracle(spec.columns, {c: python_policy(p) for c, p in spec.merge.items()}, spec.delete_mode)
        elif i == overlap_at:
            # Loaded by two `dbt run`s at once (one in its own process), the downstream model run meanwhile: the
            # loads take turns (the model's lock), so the batch is applied twice.
            mode = "overlapping"
            oracle.apply_batch(to_events(rows, spec))
        oracle.apply_batch(to_events(rows, spec))
        steps.append((rows, statements, mode, copy.deepcopy(oracle) if downstream else None))
        if rng.random() < 0.1:
            steps.append(([], [], "run", copy.deepcopy(oracle) if downstream else None))  # an empty run changes nothing
    if path == "writer":
        _apply_steps(project, spec, [(rows, statements) for rows, statements, _, _ in steps])
    else:
        if downstream:
            fuzz_downstream.write_downstream(project, spec)
            # Two of the incremental model's runs fail first: one while it reads, one after its swap.
            plain = [n for n, step in enumerate(steps) if n > 0 and step[2] == "run" and step[3] is not None]
            failing = dict(
                zip(
                    random.Random(f"downstream/{stream.seed}").sample(plain, min(2, len(plain))),
                    ["while reading", "after its swap"],
                    strict=False,
                )
            )
        for n, (rows, statements, mode, expected) in enumerate(steps):
            if mode == "failing_full_refresh":
                _apply_failing_full_refresh(project, spec, rows, stream.virtual_shards, changes=downstream)
                result.problems += [f"after a failing full refresh: {p}" for p in check_target(project, spec, expected)]
            elif mode == "overlapping":
                result.problems += [
                    f"after step {n} (overlapping loads): {p}"
                    for p in _overlapping_loads(project, spec, rows, expected)
                ]
                result.overlapping_loads += 1
            else:
                _apply_batch(project, spec, rows, *(["--full-refresh"] if mode == "full_refresh" else []))
            for statement in statements:
                project.command(statement)
            if downstream and expected is not None:
                problems = _run_downstream(project, spec, mode, first=n == 0, fail=failing.get(n))
                result.downstream_failures += n in failing
                problems += fuzz_downstream.check_downstream(project, spec, expected)
                result.problems += [f"after step {n} ({mode}): {p}" for p in problems]
                result.downstream_runs += 1
    project.command(f"system start merges{on_cluster} `{target}`")
    result.problems += check_target(project, spec, oracle)
    return result


def _lake_source_sql(spec: ModelSpec, fail: bool = False) -> str:
    """The model's SELECT over its staged lake dataset `<name>`, each file once (`new_files=true`), cast back to
    the spec's types (Parquet makes columns Nullable); with `fail`, one that fails once rows are read."""
    casts = ", ".join(f"cast(`{c}` as {t}) as `{c}`" for c, t in spec.all_columns.items())
    where = " where throwIf(toString(`_version`) != '', 'fuzz: the load failed') = 0" if fail else ""
    return f"select {casts} from {{{{ vcmt.lake_source('{spec.name}', new_files=true) }}}}{where}"


def run_lake_stream(project: DbtProject, stream: Stream, lake: Path) -> StreamResult:
    """A stream delivered as Parquet files into `_batch_id=<N>/` folders of the lake and read by `dbt run` with
    `vcmt.lake_source(..., new_files=true)`: each batch cut into one to three files that land late (after later
    batches were loaded) or in the same run, some delivered twice (a retried sink task), some runs failing after
    their claim, a killed staging job's uncommitted files beside them, one full refresh mid-stream. The oracle
    applies, per run, exactly the files that had landed since the last successful run, as one batch."""
    spec = stream.spec
    result = StreamResult(
        seed=stream.seed, model=spec.name, path="lake", events=stream.events, virtual_shards=stream.virtual_shards
    )
    rng = random.Random(f"lake/{stream.seed}")
    dataset = lake / "staged" / spec.name
    shutil.rmtree(dataset, ignore_errors=True)
    dataset.mkdir(parents=True)
    project.vars = {**project.vars, "vcmt_lake_root": str(lake)}
    _reset(project, spec, spec.name)
    project.command(f"drop table if exists `{spec.name}__lake_files`")
    names = list(spec.all_columns)
    # Every file to deliver: (batch, rows), a batch's rows cut into one to three files in order.
    files: list[tuple[int, list[dict[str, Any]]]] = []
    for batch, rows in enumerate(stream.batches, start=1):
        cuts = sorted(rng.sample(range(1, len(rows)), min(len(rows) - 1, rng.randint(0, 2)))) if len(rows) > 1 else []
        for start, end in zip([0, *cuts], [*cuts, len(rows)], strict=True):
            files.append((batch, rows[start:end]))
            if rng.random() < 0.1:
                files.append((batch, rows[start:end]))  # delivered twice
                result.lake["duplicate files"] = result.lake.get("duplicate files", 0) + 1
    # A file of batch b lands before run b - 1, or up to three runs late; batch 1's on time (a mart over a dataset
    # with no file yet is refused, docs/staging.md).
    runs = len(stream.batches) + 3
    landing = [
        min(runs - 1, batch - 1 + (rng.randint(1, 3) if batch > 1 and rng.random() < 0.3 else 0)) for batch, _ in files
    ]
    result.lake["late files"] = sum(when > batch - 1 for when, (batch, _) in zip(landing, files, strict=True))
    refresh_at = rng.randrange(1, runs) if runs > 1 else -1
    oracle = Oracle(spec.columns, {c: python_policy(p) for c, p in spec.merge.items()}, spec.delete_mode)
    landed: list[int] = []
    pending: list[int] = []
    for run in range(runs):
        for n, when in enumerate(landing):
            if when == run:
                batch, rows = files[n]
                _land_file(project, spec, dataset / f"_batch_id={batch}" / f"part-{n:05d}.parquet", rows, names)
                landed.append(n)
                pending.append(n)
        if rng.random() < 0.15:
            # A staging job killed mid-write: its files are under Spark's uncommitted folders, never read.
            junk = dataset / "_temporary" / "0" / f"_temporary_attempt_{run}" / f"_batch_id={run + 1}"
            junk.mkdir(parents=True, exist_ok=True)
            (junk / "part-00000.parquet").write_bytes(b"PAR1 killed mid-write")
            result.lake["killed staging jobs"] = result.lake.get("killed staging jobs", 0) + 1
        if any(files[n][1] for n in pending) and rng.random() < 0.15:
            # A load that fails after its claim: it has loaded nothing, and the next run reads its files.
            write_model(project, spec, stream.virtual_shards, source=_lake_source_sql(spec, fail=True))
            project.dbt("run", "--select", spec.name, expect_pass=False)
            result.lake["failed loads"] = result.lake.get("failed loads", 0) + 1
        write_model(project, spec, stream.virtual_shards, source=_lake_source_sql(spec))
        if run == refresh_at:
            project.dbt("run", "--select", spec.name, "--full-refresh")
            result.full_refreshes += 1
            oracle = Oracle(spec.columns, {c: python_policy(p) for c, p in spec.merge.items()}, spec.delete_mode)
            read = landed
        else:
            project.dbt("run", "--select", spec.name)
            read = pending
        oracle.apply_batch(to_events([row for n in read for row in files[n][1]], spec))
        pending = []
    result.problems += check_target(project, spec, oracle)
    # Each landed file recorded once as loaded: the full refresh's claims replace the earlier loads' record.
    claimed = project.query(
        f"select count(), uniqExact(path) from `{spec.name}__lake_files` where path != '' and "
        f"invocation_id in (select invocation_id from `{spec.name}__loads`)"
    )[0]
    if tuple(claimed) != (len(landed), len(landed)):
        result.problems.append(f"{claimed[0]} loaded claims of {claimed[1]} files, {len(landed)} files landed")
    return result


def _land_file(project: DbtProject, spec: ModelSpec, path: Path, rows: list[dict[str, Any]], names: list[str]) -> None:
    """`rows` as one Parquet file at `path`, written by the engine from `<name>_src`."""
    project.command(f"truncate table `{spec.name}_src`")
    if rows:
        project.client.insert(f"{spec.name}_src", [[r[c] for c in names] for r in rows], column_names=names)
    path.parent.mkdir(parents=True, exist_ok=True)
    project.command(f"insert into function file('{path}', 'Parquet') select * from `{spec.name}_src`")


def run_campaign(
    project: DbtProject,
    streams: int,
    events: int,
    seed: int,
    dbt_every: int = 10,
    progress: Callable[[int, StreamResult], None] | None = None,
    indices: list[int] | None = None,
    lake_every: int = 0,
    max_batches: int | None = None,
    downstream: bool = False,
) -> list[StreamResult]:
    """Run streams `seed + i` for i in `indices` (default: all of range(streams)).

    Every `dbt_every`-th stream goes through `dbt run` instead of the stage writer; on the embedded engine
    without a cluster, every `lake_every`-th (0: none) is delivered as lake files instead (`run_lake_stream`).
    `max_batches` delivers each stream's events in that many batches at most (generate_stream). With
    `downstream` (not on a cluster), each stream through `dbt run` also runs its model's downstream models after
    each batch and compares them with the oracle (vcmt_lab.fuzz.downstream).
    """
    indices = indices if indices is not None else list(range(streams))
    # The models of the shapes these streams use (a stream's seed picks its shape).
    used = {(seed + i) % len(MODEL_SPECS) for i in indices}
    setup_models(project, tuple(spec for n, spec in enumerate(MODEL_SPECS) if n in used))
    results = []
    for i in indices:
        stream_seed = seed + i
        spec = MODEL_SPECS[stream_seed % len(MODEL_SPECS)]
        # Drawn from the stream's own seed, so every model shape goes through `dbt run` too.
        path = "dbt" if dbt_every and random.Random(f"path/{stream_seed}").random() < 1 / dbt_every else "writer"
        stream = generate_stream(stream_seed, spec, events, max_batches)
        lake = (
            lake_every
            and project.engine.kind == "chdb"
            and not project.engine.cluster
            and random.Random(f"lake path/{stream_seed}").random() < 1 / lake_every
        )
        if lake:
            result = run_lake_stream(project, stream, project.root.parent / "lake")
        else:
            result = run_stream(project, stream, path, downstream=downstream and not project.engine.cluster)
        results.append(result)
        if progress:
            progress(i, result)
    return results


def run_share(args: argparse.Namespace, job: int, indices: list[int], started: float) -> list[StreamResult]:
    """One worker's share of a campaign, on its own chDB engine under `args.work/job<N>`; prints progress."""
    work = args.work / f"job{job}"
    node = None
    engine = None
    if getattr(args, "clickhouse", "chdb") == "server":
        # A served node per worker, over HTTP (type: clickhouse).
        from vcmt_lab.clickhouse_server import start_node

        node = start_node(work / "served_node")
        engine = Engine("http", node=node)
    project = DbtProject(
        root=work / "project",
        package_root=REPO_ROOT,
        chdb_path=work / "chdb",
        schema="vcmt_fuzz",
        lab_dir=work,
        custom_settings=HOSTILE_PROFILE_SETTINGS,
        engine=engine,
    )
    done = 0

    def progress(i: int, result: StreamResult) -> None:
        nonlocal done
        done += 1
        status = "ok" if not result.problems else f"MISMATCH ({len(result.problems)} problems)"
        if result.problems or done % 10 == 0 or done == 1:
            print(
                f"[job {job}: {done}/{len(indices)}] seed {result.seed} {result.model} via {result.path}: "
                f"{result.events} events, {result.virtual_shards} virtual shard(s) {status}  "
                f"({time.time() - started:.0f}s)",
                flush=True,
            )
        for line in result.problems[:5]:
            print(f"    {line}", flush=True)

    try:
        return run_campaign(
            project,
            args.streams,
            args.events,
            args.seed,
            args.dbt_every,
            progress,
            indices,
            lake_every=getattr(args, "lake_every", 0),
            max_batches=getattr(args, "max_batches", None),
            downstream=getattr(args, "downstream", False),
        )
    finally:
        project.close()
        if node:
            node.stop()
