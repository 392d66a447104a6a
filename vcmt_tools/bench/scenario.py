"""The bench run: build with dbt, clone, sample every approach R times, check results."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vcmt_tools.bench import sql
from vcmt_tools.bench.anchors import ANCHORS
from vcmt_tools.bench.checks import Checks, check_upsert_state, normalized
from vcmt_tools.bench.engine import Engine, Timing, ViewStats, measured
from vcmt_tools.bench.steps import Steps
from vcmt_tools.bench.tables import BIG_BATCH, EVENTS, MODEL, MODEL_SQL, PLAIN, Batch, Shape, Tables
from vcmt_tools.dbt_project import DbtProject

Say = Callable[[str], None]


class BenchFailure(Exception):
    """Setup failed (dbt could not build the model, the loader SQL was not found...)."""


@dataclass(frozen=True)
class BatchFacts:
    events: int
    distinct_keys: int
    partitions: int
    keys: str


@dataclass
class DbtBreakdown:
    """Where one `dbt run` spent its time, from the engine's query_log."""

    wall_ms: float
    loader_insert_ms: float
    other_sql_ms: float
    statements: int

    @property
    def overhead_ms(self) -> float:
        return self.wall_ms - self.loader_insert_ms - self.other_sql_ms


@dataclass
class Outcome:
    shape: Shape
    repeat: int
    steps: Steps = field(default_factory=Steps)
    checks: Checks = field(default_factory=Checks)
    # SQL as the materialization generated it and dbt ran it, and each anchor's statement.
    sql: dict[str, str] = field(default_factory=dict)
    batches: dict[str, BatchFacts] = field(default_factory=dict)
    dbt_runs: list[DbtBreakdown] = field(default_factory=list)
    dbt_statements: list[tuple[str, float]] = field(default_factory=list)
    loader_views: dict[str, list[list[ViewStats]]] = field(default_factory=dict)
    report_results: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    target_parts: int = 0
    setup_ms: float = 0.0


class Scenario:
    def __init__(self, engine: Engine, project: DbtProject, shape: Shape, repeat: int, say: Say) -> None:
        self.engine = engine
        self.project = project
        self.tables = Tables(engine)
        self.out = Outcome(shape=shape, repeat=repeat)
        self.loader_sql = ""
        self.say = say

    # -- setup -------------------------------------------------------------------
    def setup(self) -> None:
        started = time.perf_counter()
        t, shape = self.tables, self.out.shape
        t.create_database()
        self.project.write(
            "models/sources.yml",
            f"""
            version: 2
            sources: [{{name: bench, schema: {t.db}, tables: [{{name: {EVENTS}}}]}}]
            """,
        )
        self.project.model(MODEL, MODEL_SQL)
        self.say("dbt deps + first dbt run (empty input): the materialization creates the model's objects")
        self._dbt_run("dbt run (create objects)")
        self.out.sql["Target DDL, as the materialization created it"] = str(
            self.engine.scalar(f"show create table {t.target}")
        )
        self.out.sql["The transform view, as the materialization created it"] = self._view_sql(MODEL + "__transform")
        t.stop_merges(MODEL)
        self.say(
            f"bulk-loading {shape.rows:,} base rows into `base` (same DDL as the target) with version 0, "
            "sign 1: fresh keys, so a valid VCMT state without the transform"
        )
        t.build_base(shape)
        t.build_batches(shape)
        t.clone(PLAIN)
        for anchor in ANCHORS:
            anchor.create(t)
            self.out.sql[f"Anchor: {anchor.label}"] = anchor.insert(t)
        for batch in shape.batches():
            facts = self._batch_facts(batch)
            self.out.batches[batch.size] = facts
            self.say(
                f"{batch.size} batch: {facts.events:,} events on {facts.distinct_keys:,} distinct keys "
                f"({facts.distinct_keys / facts.events:.0%}, {batch.keys}) in {facts.partitions} of "
                f"{t.partitions('base')} partitions"
            )
        self.say("warm-up dbt run on the batch, to capture the loader's stage INSERT as dbt ran it")
        t.restore(MODEL)
        t.load_events(BIG_BATCH)
        since = time.time()
        self._dbt_run("dbt run (warm-up)")
        self.loader_sql = self._loader_sql(since)
        self.out.sql["The loader's stage INSERT, as dbt ran it (the vcmt sample)"] = self.loader_sql
        self.out.setup_ms = (time.perf_counter() - started) * 1000

    def _dbt_run(self, what: str) -> None:
        try:
            self.project.dbt("run", "--select", MODEL)
        except AssertionError as exc:
            raise BenchFailure(f"{what} failed: {str(exc)[-4000:]}") from exc

    def _view_sql(self, name: str) -> str:
        return str(
            self.engine.scalar(
                f"select as_select from system.tables where database = '{self.tables.db}' and name = '{name}'"
            )
        )

    def _loader_sql(self, since: float) -> str:
        stage = f"`{self.tables.db}`.`{MODEL}__stage`"
        inserts = [q for q, _ in self.engine.dbt_queries(since) if f"insert into {stage}" in q]
        if len(inserts) != 1:
            raise BenchFailure(f"expected one INSERT into {stage} in the dbt run, found {len(inserts)}")
        return inserts[0]

    def _batch_facts(self, batch: Batch) -> BatchFacts:
        events, keys, parts = self.engine.rows(
            f"select count(), uniqExact(id), uniqExact(id % 20) from {self.tables.q(batch.table)}"
        )[0]
        return BatchFacts(int(events), int(keys), int(parts), batch.keys)

    # -- samples -----------------------------------------------------------------
    def _sample(self, key: str, label: str, group: str, statement: str, repeat: int) -> Timing:
        timing = self.engine.timed(f"{key}#{repeat}", statement)
        self.out.steps.step(key, label, group).timings.append(timing)
        return timing

    def _plain_insert(self, rows: str | None = None) -> str:
        source = self.tables.q(rows) if rows else self.tables.events
        return f"insert into {self.tables.q(PLAIN)} select * from {source}"

    def _round(self, r: int, batch: Batch) -> None:
        """Both plain INSERTs, the vcmt loader and every anchor, each on a freshly restored table,
        in an order that rotates per repeat."""
        n, size = batch.events, batch.size
        approaches = [
            (f"{size}_insert", f"plain INSERT of {n:,} new keys in key order (the article's INSERT)", PLAIN,
             self._plain_insert(batch.fresh)),
            (f"{size}_insert_rows", f"plain INSERT of the batch's {n:,} rows ({batch.keys})", PLAIN,
             self._plain_insert()),
            (f"{size}_vcmt", f"UPSERT {n:,} events: vcmt loader stage INSERT", MODEL, self.loader_sql),
        ]  # fmt: skip
        approaches += [(f"{size}_{a.key}", f"UPSERT {n:,} events: {a.label}", a.key, a.insert(self.tables))
                       for a in ANCHORS]  # fmt: skip
        shift = r % len(approaches)
        for key, label, table, statement in approaches[shift:] + approaches[:shift]:
            self.tables.restore(table)
            timing = self._sample(key, label, size, statement, r)
            self.say(f"  {label}: {timing.wall_ms:,.0f} ms")
        t = self.tables
        if r == 0:
            events, base = t.q(batch.table), t.q("base")
            check_upsert_state(self.engine, self.out.checks, f"vcmt loader, {size} batch", t.target, base, events)
            for a in ANCHORS:
                check_upsert_state(self.engine, self.out.checks, f"{a.key}, {size} batch", t.q(a.key), base, events,
                                   guard=a.exact)  # fmt: skip
        self.out.loader_views.setdefault(size, []).append(self.engine.view_stats(f"{size}_vcmt#{r}"))

    def _dbt_round(self, r: int) -> None:
        """The whole `dbt run` of the model reading the batch, target restored first."""
        t = self.tables
        t.restore(MODEL)
        since = time.time()
        with measured(f"big_dbt#{r}") as out:
            self._dbt_run("dbt run")
        timing = out[0]
        self.out.steps.step(
            "big_dbt", f"UPSERT {self.out.shape.batch:,} events: whole `dbt run`", "big"
        ).timings.append(timing)
        queries = self.engine.dbt_queries(since)
        stage = f"insert into `{t.db}`.`{MODEL}__stage`"
        loader = sum(ms for q, ms in queries if stage in q)
        other = sum(ms for q, ms in queries if stage not in q)
        self.out.dbt_runs.append(DbtBreakdown(timing.wall_ms, loader, other, len(queries)))
        self.out.dbt_statements = queries
        self.say(f"  whole dbt run: {timing.wall_ms:,.0f} ms (stage INSERT {loader:,.0f} ms)")
        if r == 0:
            check_upsert_state(
                self.engine, self.out.checks, "dbt run, big batch", t.target, t.q("base"), t.q(BIG_BATCH)
            )

    def measure(self) -> None:
        t = self.tables
        for r in range(self.out.repeat):
            for batch in self.out.shape.batches():
                self.say(f"repeat {r + 1}/{self.out.repeat}: {batch.size} batch of {batch.events:,} ({batch.keys})")
                t.load_events(batch.table)
                self._round(r, batch)
                if batch.size == "big":
                    self._dbt_round(r)

    # -- report query -----------------------------------------------------------------
    def report_queries(self) -> None:
        """The report query three ways on the target after one batch, then after OPTIMIZE FINAL."""
        t = self.tables
        t.restore(MODEL)
        t.load_events(BIG_BATCH)
        self.engine.command(self.loader_sql)
        self.say("correctness guard on the whole target after one batch (every key)")
        check_upsert_state(
            self.engine, self.out.checks, "vcmt target", t.target, t.q("base"), t.q(BIG_BATCH), whole_table=True
        )
        self.out.target_parts = t.parts(MODEL)
        self._report_round("report", f"after one batch ({self.out.target_parts} parts)")
        self.say("OPTIMIZE FINAL on the target (one part per partition), then the report query again")
        self.engine.command(f"system start merges {t.target}")
        self.engine.command(f"optimize table {t.target} final")
        self.engine.command(f"system stop merges {t.target}")
        self._report_round("optimized", "after OPTIMIZE FINAL")

    def _report_round(self, group: str, state: str) -> None:
        t = self.tables
        queries = [
            (f"{group}_final", f"FINAL where sign = 1, {state}", sql.report_final(t.target)),
            (f"{group}_group_by", f"GROUP BY sign arithmetic, {state}", sql.report_group_by(t.target)),
            (f"{group}_projection", f"aggregating projection, {state}", sql.report_projection(t.target)),
        ]
        results: dict[str, list[tuple[str, int, int]]] = {}
        for r in range(self.out.repeat):
            for key, label, statement in queries:
                timing, rows = self.engine.timed_rows(f"{key}#{r}", statement)
                self.out.steps.step(key, label, group).timings.append(timing)
                results[key] = normalized(rows)
        for key, label, _ in queries:
            self.say(f"  {label}: {self.out.steps[key].wall_ms:,.0f} ms")
        self.out.report_results.update(results)
        first = results[queries[0][0]]
        same = all(v == first for v in results.values())
        self.out.checks.add(
            f"report query {state}: FINAL == GROUP BY == projection",
            same,
            "identical" if same else "; ".join(f"{k}: {v}" for k, v in results.items()),
        )

    def finish(self) -> None:
        self.out.steps.attach_memory(self.engine.engine_memory(self.out.steps.tags()))


def median_views(runs: list[list[ViewStats]]) -> list[tuple[str, float, int]]:
    """Per view over the samples: (view, median duration ms, max peak memory)."""
    names: dict[str, list[ViewStats]] = {}
    for run in runs:
        for v in run:
            names.setdefault(v.view, []).append(v)
    return [
        (re.sub(r"^.*?\.", "", name), statistics.median(v.duration_ms for v in vs), max(v.peak_memory for v in vs))
        for name, vs in names.items()
    ]
