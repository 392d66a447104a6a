"""The bench run: build with dbt, capture what it ran, sample every approach R times, check results."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vcmt_lab import invariants
from vcmt_lab.bench import sql
from vcmt_lab.bench.anchors import ANCHORS, DBT_MODELS, RMT, Anchor, dbt_model_sql
from vcmt_lab.bench.engine import Engine, Timing, measured
from vcmt_lab.bench.sql import Distribution
from vcmt_lab.bench.steps import Steps
from vcmt_lab.bench.tables import MODEL, MODELS, PARTIAL, PLAIN, VARIANTS, Batch, Model, Shape, Tables, Variant
from vcmt_lab.dbt_project import DbtProject

Say = Callable[[str], None]
Answer = list[tuple[str, int, int]]


class BenchFailure(Exception):
    """Setup failed (dbt could not build a model, the loader SQL was not found...)."""


@dataclass
class DbtBreakdown:
    """Where one `dbt run` at B spent its time: the engine's query_log, and the loader's views."""

    wall_ms: float
    loader_ms: float
    other_sql_ms: float
    statements: int
    applied_view_ms: float

    @property
    def bookkeeping(self) -> float:
        """Share of the engine's work for the load that is bookkeeping: statements besides the
        loader INSERT (stats, applied totals, watermark, object checks, run log) and the
        applied-totals view inside it (docs/design.md#benchmark-goals, goal 6)."""
        return (self.other_sql_ms + self.applied_view_ms) / (self.loader_ms + self.other_sql_ms)


@dataclass
class Outcome:
    shape: Shape
    repeat: int
    # Per key distribution (sql.DISTRIBUTIONS), by its key: every step sampled on its batches.
    steps: dict[str, Steps] = field(default_factory=dict)
    checks: list[invariants.Finding] = field(default_factory=list)
    # SQL as the materialization generated it and dbt ran it, and each anchor's statements.
    sql: dict[str, str] = field(default_factory=dict)
    # (distribution, size) -> (events, distinct keys, partitions).
    batches: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)
    # The whole `dbt run` at B, on the headline distribution only.
    dbt_runs: list[DbtBreakdown] = field(default_factory=list)
    # Inside the loader INSERT per (distribution, size): (per view, per processor), and the slowest other
    # statements of a `dbt run` at B: (engine ms, statement).
    profiles: dict[tuple[str, str], tuple[list[tuple[str, float, int]], ...]] = field(default_factory=dict)
    bookkeeping: list[tuple[float, str]] = field(default_factory=list)
    # Per distribution: each report query's answer after its batch of B.
    answers: dict[str, dict[str, Answer]] = field(default_factory=dict)
    setup_ms: float = 0.0
    # The shapes of the load sampled beside the loader (`--shapes`).
    variants: tuple[Variant, ...] = ()

    @property
    def headline(self) -> Distribution:
        """The distribution the goals are judged on, the whole `dbt run` timed on: the first one."""
        return self.shape.distributions[0]

    def of(self, distribution: Distribution) -> Steps:
        return self.steps.setdefault(distribution.key, Steps())

    def models(self, distribution: Distribution) -> tuple[Model, ...]:
        """The vcmt models sampled on a distribution: both on the headline, the `replace` one elsewhere."""
        return MODELS if distribution is self.headline else (MODEL,)

    def anchors(self, distribution: Distribution) -> tuple[Anchor, ...]:
        """The anchors sampled on a distribution: every one on the headline, (A) elsewhere (the break-even
        of the issue's goal is against it; the others would triple the run's time)."""
        return ANCHORS if distribution is self.headline else tuple(a for a in ANCHORS if a.key == RMT)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(invariants.Finding(name, ok, detail))

    @property
    def failed(self) -> list[invariants.Finding]:
        return [c for c in self.checks if not c.ok]


class Scenario:
    def __init__(
        self, engine: Engine, project: DbtProject, shape: Shape, repeat: int, say: Say, shapes: bool = False
    ) -> None:
        self.engine = engine
        self.project = project
        self.tables = Tables(engine)
        self.out = Outcome(shape=shape, repeat=repeat, variants=VARIANTS if shapes else ())
        self.say = say

    def _built(self) -> list[Model]:
        """Every vcmt model the run builds: MODELS, and the `--shapes` variants' own copies."""
        own = [v.model for v in self.out.variants if v.model is not MODEL]
        return [*MODELS, *(m for i, m in enumerate(own) if m not in own[:i])]

    # -- setup -------------------------------------------------------------------
    def setup(self) -> None:
        started = time.perf_counter()
        t, shape = self.tables, self.out.shape
        t.create_database()
        tables = ", ".join(f"{{name: {m.events}}}" for m in MODELS)
        self.project.write("models/sources.yml", f"""
            version: 2
            sources: [{{name: bench, schema: {t.db}, tables: [{tables}]}}]
        """)  # fmt: skip
        for m in self._built():
            self.project.model(m.name, m.sql())
        for name in DBT_MODELS:
            self.project.model(name, dbt_model_sql(name))
        self.say("dbt deps + first dbt run (empty input): the materialization creates the models' objects")
        self._dbt("run", "--select", *(m.name for m in self._built()))
        for m in self._built():
            t.objects[m.name] = self.project.object_names(m.name)
            t.stop_merges(m.name)
        for v in self.out.variants:
            if v.lookup:  # its copy of the model gets that lookup, in place (the view keeps firing)
                view = t.objects[v.model.name]["transform"]
                self.engine.command(f"alter table {t.q(view)} modify query "
                                    f"{sql.lookup_variant(t.stored(view), v.lookup)}")  # fmt: skip
                self.out.sql[f"Shape `{v.key}`: its transform"] = t.stored(view)
        self.out.sql["Target DDL, as the materialization created it"] = t.stored(MODEL.name, "create_table_query")
        self.out.sql["The transform view, as the materialization created it"] = t.stored(
            t.objects[MODEL.name]["transform"]
        )
        self.say(f"bulk-loading {shape.rows:,} base rows (version 0, sign 1: a valid state) into the bases")
        t.build_base(shape)
        t.build_batches(shape)
        t.clone(PLAIN)
        anchor_ddl = {a.key: a.create(t) for a in ANCHORS}
        for batch in (b for d in shape.distributions for b in shape.batches(d)):
            found = f"select count(), uniqExact(id), uniqExact({sql.PARTITION}) from {t.q(batch.table)}"
            facts = tuple(int(x) for x in self.engine.rows(found)[0])
            self.out.batches[batch.distribution.key, batch.size] = facts
            self.say(f"{batch.distribution.key} {batch.size} batch: {facts[0]:,} events on {facts[1]:,} distinct keys "
                     f"in {facts[2]} partitions")  # fmt: skip
        self.say("warm-up dbt runs on the batch of B: capture what each model ran to load")
        t.load_events(shape.batches(self.out.headline)[0])
        for m in self._built():  # a fold loads with one INSERT; rounds and virtual shards add load tables
            t.restore(m.name, m.base)
            mentions = [t.obj(m, "stage")]
            kinds = "insert"
            if m.merge or m.virtual_shards > 1:  # a load table is its base name and the lock generation: `<name>_<n>`
                tables = [t.obj(m, role).removesuffix("`") + "_" for role in ("batch", "fanout")]
                mentions, kinds = [*mentions, *tables], "create|insert|drop"
            t.captured[m.name] = self._capture(m.name, mentions, kinds)
            self.out.sql[f"vcmt `{m.name}`: what its `dbt run` ran to load"] = ";\n".join(t.captured[m.name])
        for name in DBT_MODELS:
            t.restore(name)
            ran = self._capture(name, [f"`{t.db}`.`{name}"], "create|delete|insert|drop")
            if not any(re.search(r"\bdelete\s+from\b", q, re.I) for q in ran):
                raise BenchFailure(f"anchor {name}: no DELETE found in the statements dbt ran: {ran}")
            replay = t.q(name + "__dbt_new_data_replay")
            t.captured[name] = [f"drop table if exists {replay}"] + [
                re.sub(r"__dbt_new_data_\w+", "__dbt_new_data_replay", q) for q in ran
            ]
        for a in ANCHORS:
            parts = [anchor_ddl[a.key], ";\n".join(_statements(a.insert(t))), a.report(t)]
            self.out.sql[f"Anchor: {a.label} (its table, the timed statements, its report query)"] = ";\n\n".join(parts)
        self.out.setup_ms = (time.perf_counter() - started) * 1000

    def _capture(self, model: str, mentions: list[str], only: str) -> list[str]:
        """Run one model with dbt on the loaded batch; the statements of the kinds `only` it ran
        that name one of `mentions`, in order."""
        since = time.time()
        self._dbt("run", "--select", model)
        ran = [q for q, *_ in self.engine.dbt_queries(since) if _is(only, q) and any(m in q for m in mentions)]
        if not ran:
            raise BenchFailure(f"no statement of {model} naming {mentions} in its dbt run")
        return ran

    def _dbt(self, *args: str):
        try:
            return self.project.dbt(*args)
        except AssertionError as exc:
            raise BenchFailure(f"dbt {' '.join(args)} failed: {str(exc)[-4000:]}") from exc

    # -- samples -----------------------------------------------------------------
    def _round(self, r: int, batch: Batch) -> None:
        """The plain INSERT, both vcmt loaders and every anchor, each on a freshly restored table,
        in an order that rotates per repeat."""
        t, n, size, d = self.tables, batch.events, batch.size, batch.distribution
        steps = self.out.of(d)
        approaches = [
            (f"{size}_insert", f"plain INSERT of the batch's {n:,} rows into the same table", PLAIN, MODEL.base,
             f"insert into {t.q(PLAIN)} select * from {t.q(MODEL.events)}"),
            *[(f"{size}_{m.key}", f"vcmt_upsert ({m.merge and 'coalesce' or 'replace'}): {n:,} events, the loader "
               "as dbt ran it", m.name, m.base, t.captured[m.name]) for m in self.out.models(d)],
            *[(f"{size}_{a.key}", f"{a.label}: {n:,} events", a.key, a.model.base, a.insert(t))
              for a in self.out.anchors(d)],
            (f"{size}_key_rows", f"floor, read: the stored rows of the batch's keys (no FINAL, no write): {n:,} "
             "events", PLAIN, MODEL.base, sql.key_rows_read(t.q(PLAIN), t.q(MODEL.events))),
            (f"{size}_pair_rows", f"floor, write: a cancel and a state row per key's newest event (no lookup): "
             f"{n:,} events", PLAIN, MODEL.base, sql.pair_rows_write(t.q(PLAIN), t.q(MODEL.events))),
            (f"{size}_key_rows_1", f"floor, read on one thread (as a view's query runs): {n:,} events", PLAIN,
             MODEL.base, sql.key_rows_read(t.q(PLAIN), t.q(MODEL.events), one_thread=True)),
        ]  # fmt: skip
        for v in self.out.variants:
            statements = t.captured[v.model.name]
            if v.settings:  # a SETTINGS clause ends the loader's INSERT
                statements = [f"{statements[0].rstrip()}, {v.settings}", *statements[1:]]
            approaches.append((f"{size}_{v.key}", f"shape `{v.key}`, {v.label}: {n:,} events", v.model.name,
                               MODEL.base, statements))  # fmt: skip
        shift = r % len(approaches)
        for key, label, table, base, statements in approaches[shift:] + approaches[:shift]:
            t.restore(table, base)
            self._hold_lock_as(statements)
            timing = self._timed_all(f"{batch.distribution.key}/{key}#{r}", statements)
            steps.step(key, label, size).timings.append(timing)
            self.say(f"  {label}: {timing.wall_ms:,.0f} ms")
            if r == 0 and table != MODEL.name and table in {v.model.name for v in self.out.variants}:
                self._check_state(f"shape {key}, {batch.distribution.key} batch", batch, table=table)
        if r == 0:
            name = f"{batch.distribution.key} {size} batch"
            self._check_state(f"vcmt loader, {name}", batch)
            t.restore(PLAIN, MODEL.base)  # the model's layout and base rows (tables.py)
            found = int(self.engine.rows(sql.key_rows_read(t.q(PLAIN), t.q(MODEL.events)))[0][0])
            keys = self.out.batches[batch.distribution.key, size][1]
            self.out.check(f"the {name}'s key-rows read finds one stored row per distinct key", found == keys,
                           f"{found:,} rows for {keys:,} distinct keys")  # fmt: skip
            t.restore(PLAIN, MODEL.base)
            self._run_all(sql.pair_rows_write(t.q(PLAIN), t.q(MODEL.events)))
            written = int(self.engine.scalar(f"select count() from {t.q(PLAIN)}")) - self.out.shape.rows
            self.out.check(f"the {name}'s floor write writes two rows per distinct key", written == 2 * keys,
                           f"{written:,} rows for {keys:,} distinct keys")  # fmt: skip

    def _check_state(self, name: str, batch: Batch, whole_table: bool = False, table: str = MODEL.name) -> None:
        """The invariants, and the target (`table`: the model's, or a shape's copy of it) equals base with each
        batch key replaced by its newest event (only the batch's keys, plus the count of live rows, unless
        `whole_table`)."""
        t, events = self.tables, self.tables.q(batch.table)
        where = None if whole_table else f"id in (select id from {events})"
        target = invariants.Target(t.q(table), ["id"], where=where)
        scope = "all keys" if whole_table else "batch keys"
        for f in invariants.check(self.engine.rows, target, sql.DATA_COLUMNS):
            self.out.check(f"{name}: {f.name} ({scope})", f.ok, f.detail)
        got = invariants.live_rows_final(self.engine.rows, target, sql.DATA_COLUMNS)
        row_hash = invariants.row_hash(target, sql.DATA_COLUMNS)
        expected_sql = sql.expected_checksum(t.q(MODEL.base), events, row_hash, not whole_table)
        expected = tuple(int(v) for v in self.engine.rows(expected_sql)[0])
        self.out.check(f"{name}: rows == base with each batch key replaced by its newest event ({scope})",
                       got == expected, f"got {got[0]:,} rows, checksum {got[1]}; expected {expected[0]:,} rows, "
                       f"checksum {expected[1]}")  # fmt: skip

    def _dbt_round(self, r: int) -> None:
        """The whole `dbt run` of the model reading the batch of B, target restored first."""
        t = self.tables
        t.restore(MODEL.name)
        since = time.time()
        with measured(f"{self.out.headline.key}/big_dbt#{r}") as out:
            self._dbt("run", "--select", MODEL.name)
        label = f"vcmt_upsert (replace): {self.out.shape.batch:,} events, whole `dbt run`"
        self.out.of(self.out.headline).step("big_dbt", label, "big").timings += out
        queries = self.engine.dbt_queries(since)
        stage = t.obj(MODEL, "stage")
        loader = [(q, ms, qid) for q, ms, qid in queries if _is("insert", q) and stage in q]
        views = self.engine.view_stats(loader[0][2]) if loader else []
        applied = sum(ms for name, ms, _ in views if name.endswith(t.objects[MODEL.name]["applied_writer"]))
        loader_ms = sum(ms for _, ms, _ in loader)
        self.out.dbt_runs.append(DbtBreakdown(out[0].wall_ms, loader_ms, sum(ms for _, ms, _ in queries) - loader_ms,
                                              len(queries), applied))  # fmt: skip
        self.say(f"  whole dbt run: {out[0].wall_ms:,.0f} ms (loader INSERT {loader_ms:,.0f} ms)")
        if r == 0 and loader:
            others = [(ms, " ".join(re.sub(r"^/\*.*?\*/", "", q, flags=re.S).split())[:100])
                      for q, ms, _ in queries if q != loader[0][0]]  # fmt: skip
            self.out.bookkeeping = sorted((ms, q.replace("`", "")) for ms, q in others)[::-1][:6]

    def measure(self) -> None:
        shape = self.out.shape
        for r in range(self.out.repeat):
            for distribution in shape.distributions:
                for batch in shape.batches(distribution):
                    self.say(f"repeat {r + 1}/{self.out.repeat}: {distribution.key} {batch.size} batch of "
                             f"{batch.events:,}")  # fmt: skip
                    self.tables.load_events(batch)
                    self._round(r, batch)
                    if batch.size == "big" and distribution is self.out.headline:
                        self._dbt_round(r)
        for distribution in shape.distributions:
            for batch in reversed(shape.batches(distribution)):  # the batch of B last: it is checked below
                name = f"{distribution.key} {batch.size} batch"
                self.say(f"profile: the loader INSERT, {name}, once more with processors_profile_log")
                self.tables.load_events(batch)
                self.tables.restore(MODEL.name)
                loader = self.tables.captured[MODEL.name][0]
                tag = f"profile_{distribution.key}_{batch.size}"
                self.out.profiles[distribution.key, batch.size] = self.engine.profiled(tag, loader)
            self._check_state(f"loader, {name}", batch)

    # -- report queries ---------------------------------------------------------------
    def report_queries(self, distribution: Distribution) -> None:
        """After the batch of B: vcmt's report query three ways, and each anchor's own; all answers equal."""
        t, big = self.tables, self.out.shape.batches(distribution)[0]
        steps, answers = self.out.of(distribution), self.out.answers.setdefault(distribution.key, {})
        models, anchors = self.out.models(distribution), self.out.anchors(distribution)
        t.load_events(big)
        for m in models:
            t.restore(m.name, m.base)
            self._run_all(t.captured[m.name])
        self.say(f"correctness guard on the whole target after one {distribution.key} batch (every key)")
        self._check_state(f"vcmt target, {distribution.key}", big, whole_table=True)
        if PARTIAL in models:
            coalesce = invariants.Target(t.q(PARTIAL.name), ["id"], where=f"id in (select id from {t.q(big.table)})")
            for f in invariants.check(self.engine.rows, coalesce, sql.DATA_COLUMNS):
                self.out.check(f"vcmt `coalesce` target, {distribution.key}: {f.name} (batch keys)", f.ok, f.detail)
        target, partial = t.q(MODEL.name), t.q(PARTIAL.name)
        queries = [
            ("report_final", "vcmt (replace): FINAL where sign = 1", sql.report_final(target)),
            ("report_group_by", "vcmt (replace): GROUP BY sign arithmetic", sql.report_group_by(target)),
            (f"report_{MODEL.key}", "vcmt (replace): aggregating projection", sql.report_projection(target)),
        ]
        if PARTIAL in models:
            queries.append((f"report_{PARTIAL.key}", "vcmt (coalesce): aggregating projection",
                            sql.report_projection(partial)))  # fmt: skip
        for a in anchors:
            t.restore(a.key, a.model.base)
            self._run_all(a.insert(t))
            queries.append((f"report_{a.key}", f"{a.label}: its report query", a.report(t)))
        # Every answer must equal its vcmt model's, read through the projection.
        refs = {key: f"report_{MODEL.key}" for key in ("report_final", "report_group_by")}
        refs.update({f"report_{a.key}": f"report_{a.model.key}" for a in anchors})
        for r in range(self.out.repeat):
            for key, label, statement in queries:
                timing, rows = self.engine.timed(f"{distribution.key}/{key}#{r}", statement, want_rows=True)
                steps.step(key, label, "report").timings.append(timing)
                answers[key] = [(str(d), int(n), int(s)) for d, n, s in rows]
        for key, label, _ in queries:
            self.say(f"  {label}: {steps[key].wall_ms:,.0f} ms")
        a = answers
        for key, ref in refs.items():
            self.out.check(f"report query, {distribution.key}: {key} == {ref}", a[key] == a[ref],
                           "identical" if a[key] == a[ref] else f"{a[key]} != {a[ref]}")  # fmt: skip

    def _hold_lock_as(self, statements: str | list[str]) -> None:
        """The loader's statements as dbt ran them carry their load's fence (macros/vcmt/load/lock.sql): they write
        only while that load holds the model's lock. The bench replays them as that load: it claims the lock's next
        generation in that load's name, so the timed statements are the fenced ones, fence included. The generation
        also records that load as released (the fence reads the claim's name only): a `dbt run` after the replay
        takes the lock at once instead of waiting for the stand-in holder's lease to lapse."""
        for statement in _statements(statements):
            found = _FENCE.search(statement)
            if found:
                holder, lock = found.groups()
                gen = int(self.engine.rows(f"select max(gen) from {lock}")[0][0] or 0) + 1
                self.engine.command(
                    f"insert into {lock} (gen, holder, kind, what) values "
                    f"({gen}, '{holder}', 'acquired', 'bench replay'), ({gen}, '{holder}', 'released', 'bench replay')"
                )
                return

    def _run_all(self, statements: str | list[str]) -> None:
        for statement in _statements(statements):
            self.engine.command(statement)

    def _timed_all(self, tag: str, statements: str | list[str]) -> Timing:
        """Run the statements one after the other under one tag; their times add up."""
        timings = [self.engine.timed(tag, statement)[0] for statement in _statements(statements)]
        return Timing(tag, sum(x.wall_ms for x in timings), sum(x.cpu_ms for x in timings))

    def finish(self) -> None:
        for steps in self.out.steps.values():
            steps.attach_memory(self.engine.engine_memory([t.tag for s in steps.values() for t in s.timings]))


def _is(kinds: str, statement: str) -> bool:
    """Whether the statement (after dbt's leading comment) starts with one of `kinds` (`a|b`)."""
    return re.match(rf"^(/\*.*?\*/\s*)?({kinds})\b", statement, re.S | re.I) is not None


# A fence: the holder whose claim it expects, then the lock's table (macros/vcmt/load/lock.sql, _lock_fence).
_FENCE = re.compile(
    r"= '(vcmt load by dbt invocation [^']+)'.*? from \(select holder, kind from (\S+) where gen = ", re.S
)


def _statements(statements: str | list[str]) -> list[str]:
    return [statements] if isinstance(statements, str) else statements
