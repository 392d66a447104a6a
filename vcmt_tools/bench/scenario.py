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
from vcmt_tools.bench.tables import BASE, BIG_BATCH, EVENTS, MODEL, MODEL_SQL, PLAIN, Batch, Shape, Tables
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
    loader_views: dict[str, list[list[ViewStats]]] = field(default_factory=dict)
    report_results: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
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
        self.project.write("models/sources.yml", f"""
            version: 2
            sources: [{{name: bench, schema: {t.db}, tables: [{{name: {EVENTS}}}]}}]
        """)  # fmt: skip
        self.project.model(MODEL, MODEL_SQL)
        self.say("dbt deps + first dbt run (empty input): the materialization creates the model's objects")
        self._dbt_run("dbt run (create objects)")
        self.out.sql["Target DDL, as the materialization created it"] = t.stored(MODEL, "create_table_query")
        self.out.sql["The transform view, as the materialization created it"] = t.stored(f"{MODEL}__transform")
        t.stop_merges(MODEL)
        self.say(f"bulk-loading {shape.rows:,} base rows (version 0, sign 1: a valid state) into `base`")
        t.build_base(shape)
        t.build_batches(shape)
        t.clone(PLAIN)
        anchor_ddl = {a.key: a.create(t) for a in ANCHORS}
        for batch in shape.batches():
            events, keys, parts = self.engine.rows(
                f"select count(), uniqExact(id), uniqExact(id % 20) from {t.q(batch.table)}"
            )[0]
            self.out.batches[batch.size] = BatchFacts(int(events), int(keys), int(parts), batch.keys)
            self.say(f"{batch.size} batch: {events:,} events on {keys:,} distinct keys in {parts} partitions")
        self.say("warm-up dbt run on the batch, to capture the loader's stage INSERT as dbt ran it")
        t.restore(MODEL)
        t.load_events(BIG_BATCH)
        since = time.time()
        self._dbt_run("dbt run (warm-up)")
        stage = f"insert into `{t.db}`.`{MODEL}__stage`"
        inserts = [q for q, _ in self.engine.dbt_queries(since) if stage in q]
        if len(inserts) != 1:
            raise BenchFailure(f"expected one INSERT into the stage in the dbt run, found {len(inserts)}")
        self.loader_sql = inserts[0]
        self.out.sql["The loader's stage INSERT, as dbt ran it (the vcmt sample)"] = self.loader_sql
        for a in ANCHORS:
            parts = [anchor_ddl[a.key], ";\n".join(_statements(a.insert(t))), *([a.report(t)] if a.report else [])]
            self.out.sql[f"Anchor: {a.label} (its objects, the timed statements, its report query)"] = ";\n\n".join(
                parts
            )
        self.out.setup_ms = (time.perf_counter() - started) * 1000

    def _dbt_run(self, what: str) -> None:
        try:
            self.project.dbt("run", "--select", MODEL)
        except AssertionError as exc:
            raise BenchFailure(f"{what} failed: {str(exc)[-4000:]}") from exc

    # -- samples -----------------------------------------------------------------
    def _round(self, r: int, batch: Batch) -> None:
        """Both plain INSERTs, the vcmt loader and every anchor, each on a freshly restored table,
        in an order that rotates per repeat."""
        t, n, size = self.tables, batch.events, batch.size
        approaches = [
            (f"{size}_insert", f"plain INSERT of {n:,} new keys in key order (the article's INSERT)", PLAIN,
             f"insert into {t.q(PLAIN)} select * from {t.q(batch.fresh)}"),
            (f"{size}_insert_rows", f"plain INSERT of the batch's {n:,} rows ({batch.keys})", PLAIN,
             f"insert into {t.q(PLAIN)} select * from {t.events}"),
            (f"{size}_vcmt", f"UPSERT {n:,} events: vcmt loader stage INSERT", MODEL, self.loader_sql),
            *[(f"{size}_{a.key}", f"UPSERT {n:,} events: {a.label}", a.key, a.insert(t)) for a in ANCHORS],
        ]  # fmt: skip
        shift = r % len(approaches)
        for key, label, table, statement in approaches[shift:] + approaches[:shift]:
            t.restore(table)
            timing = self._timed_all(f"{key}#{r}", statement)
            self.out.steps.step(key, label, size).timings.append(timing)
            self.say(f"  {label}: {timing.wall_ms:,.0f} ms")
        if r == 0:
            events, base = t.q(batch.table), t.q(BASE)
            check_upsert_state(self.engine, self.out.checks, f"vcmt loader, {size} batch", t.target, base, events)
            for a in ANCHORS:
                if a.report is None:  # the others are checked by their report query's answer
                    check_upsert_state(self.engine, self.out.checks, f"{a.key}, {size} batch", t.q(a.key), base,
                                       events, guard=a.exact)  # fmt: skip
        self.out.loader_views.setdefault(size, []).append(self.engine.view_stats(f"{size}_vcmt#{r}"))

    def _dbt_round(self, r: int) -> None:
        """The whole `dbt run` of the model reading the batch, target restored first."""
        t = self.tables
        t.restore(MODEL)
        since = time.time()
        with measured(f"big_dbt#{r}") as out:
            self._dbt_run("dbt run")
        wall = out[0].wall_ms
        self.out.steps.step("big_dbt", f"UPSERT {self.out.shape.batch:,} events: whole `dbt run`", "big").timings += out
        queries = self.engine.dbt_queries(since)
        stage = f"insert into `{t.db}`.`{MODEL}__stage`"
        loader = sum(ms for q, ms in queries if stage in q)
        self.out.dbt_runs.append(DbtBreakdown(wall, loader, sum(ms for _, ms in queries) - loader, len(queries)))
        self.say(f"  whole dbt run: {wall:,.0f} ms (stage INSERT {loader:,.0f} ms)")
        if r == 0:
            check_upsert_state(self.engine, self.out.checks, "dbt run, big batch", t.target, t.q(BASE), t.q(BIG_BATCH))

    def measure(self) -> None:
        for r in range(self.out.repeat):
            for batch in self.out.shape.batches():
                self.say(f"repeat {r + 1}/{self.out.repeat}: {batch.size} batch of {batch.events:,} ({batch.keys})")
                self.tables.load_events(batch.table)
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
            self.engine, self.out.checks, "vcmt target", t.target, t.q(BASE), t.q(BIG_BATCH), whole_table=True
        )
        self._report_round("report", f"after one batch ({t.parts(MODEL)} parts)")
        self._anchor_reports()
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
                timing, rows = self.engine.timed(f"{key}#{r}", statement, want_rows=True)
                self.out.steps.step(key, label, group).timings.append(timing)
                results[key] = normalized(rows)
        for key, label, _ in queries:
            self.say(f"  {label}: {self.out.steps[key].wall_ms:,.0f} ms")
        self.out.report_results.update(results)
        same = all(v == results[queries[0][0]] for v in results.values())
        detail = "identical" if same else "; ".join(f"{k}: {v}" for k, v in results.items())
        self.out.checks.add(f"report query {state}: FINAL == GROUP BY == projection", same, detail)

    def _anchor_reports(self) -> None:
        """Each anchor's own report query after it applied the batch of B; its answer must equal vcmt's."""
        t, expected = self.tables, self.out.report_results["report_projection"]
        for a in (a for a in ANCHORS if a.report):
            t.restore(a.key)
            for statement in _statements(a.insert(t)):
                self.engine.command(statement)
            step = self.out.steps.step(f"report_{a.key}", f"{a.label}: its report query after one batch", "report")
            for r in range(self.out.repeat):
                timing, rows = self.engine.timed(f"report_{a.key}#{r}", a.report(t), want_rows=True)
                step.timings.append(timing)
            self.say(f"  {step.label}: {step.wall_ms:,.0f} ms")
            got = normalized(rows)
            self.out.checks.add(f"{a.key}: report query after one batch == vcmt's", got == expected,
                                "identical" if got == expected else f"{a.key}: {got}; vcmt: {expected}")

    def _timed_all(self, tag: str, statements: str | list[str]) -> Timing:
        """Run the statements one after the other under one tag; their times add up."""
        timings = [self.engine.timed(tag, statement)[0] for statement in _statements(statements)]
        return Timing(tag, sum(x.wall_ms for x in timings), sum(x.cpu_ms for x in timings))

    def finish(self) -> None:
        self.out.steps.attach_memory(self.engine.engine_memory(self.out.steps.tags()))


def _statements(statements: str | list[str]) -> list[str]:
    return [statements] if isinstance(statements, str) else statements


def median_views(runs: list[list[ViewStats]]) -> list[tuple[str, float, int]]:
    """Per view over the samples: (view, median duration ms, max peak memory)."""
    names: dict[str, list[ViewStats]] = {}
    for v in (v for run in runs for v in run):
        names.setdefault(re.sub(r"^.*?\.", "", v.view), []).append(v)
    return [
        (n, statistics.median(v.duration_ms for v in vs), max(v.peak_memory for v in vs)) for n, vs in names.items()
    ]
