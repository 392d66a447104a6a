"""Identical tables for every approach, restored to the same state before each sample.

`base` is created `AS` the dbt-built target, so it has the materialization's
DDL (engine, partitioning, index granularity, projection, settings), and
holds the N base rows merged to one part per partition. Every measured
table has that same DDL and gets base's parts back by hard link
(`ATTACH PARTITION ALL FROM`) before each sample: samples do not see earlier
samples' rows, and restoring costs milliseconds even at 100M rows. The
`coalesce` model and (D) have Nullable data columns, so they restore from
their own `base_partial`, holding the same rows.

Background merges are stopped on measured tables so a merge started by one
sample does not steal one of the two cores from the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from vcmt_lab.bench import sql
from vcmt_lab.bench.engine import Engine


@dataclass(frozen=True)
class Model:
    """A vcmt_upsert model of the bench, on the article's schema, reading one input table. One stream:
    the bench times the loader's one stage INSERT; virtual_shards.py times K streams."""

    name: str
    # Prefix of its steps in the report.
    key: str
    events: str
    base: str
    merge: dict[str, str]
    virtual_shards: int = 1

    def sql(self) -> str:
        # Sorted by the key alone (not the package's default for a partition of the key, `(id % 20, id)`): the
        # anchors' tables are sorted so too, and take their partitions from this model's base table.
        return f"""
{{{{ config(
    materialized='vcmt_upsert',
    unique_key='id',
    partition_by='{sql.PARTITION}',
    order_by=['id'],
    merge={self.merge!r},
    settings={{'index_granularity': {sql.GRANULARITY}}},
    virtual_shards={self.virtual_shards},
    projections=[{{'name': 'by_department',
                  'query': 'select Department, sum(sign), sum(metric1 * sign) group by Department'}}],
) }}}}
select id, Department, metric1, metric2, _version, sign
from {{{{ source('bench', '{self.events}') }}}}
"""


# The model every goal is judged on (full-row events, `replace`), and the
# `coalesce` model next to anchor (D), fed the same batch as partial updates.
MODEL = Model("bench_vcmt", "vcmt", "bench_events", "base", {})
PARTIAL = Model("bench_vcmt_coalesce", "vcmt_coalesce", "bench_events_partial", "base_partial",
                {c: "coalesce" for c in sql.DATA_COLUMNS})  # fmt: skip
MODELS = (MODEL, PARTIAL)
PLAIN = "plain"


@dataclass(frozen=True)
class Variant:
    """A shape of the `replace` model's load sampled beside it with `--shapes` (issue 62): the loader as dbt ran
    it with more `settings`, or its own copy of the model, whose transform's lookup is rewritten as `lookup`
    (sql.lookup_variant) or which loads on `virtual_shards`."""

    key: str
    label: str
    model: Model = MODEL
    settings: str = ""
    lookup: str = ""


def _variant_model(key: str, virtual_shards: int = 1) -> Model:
    return Model(f"bench_vcmt_{key}", f"vcmt_{key}", MODEL.events, MODEL.base, {}, virtual_shards)


VARIANTS = (
    Variant("final_threads_1", "max_final_threads = 1 (FINAL reads on one thread)", settings="max_final_threads = 1"),
    Variant("threads_1", "max_threads = 1 (the whole INSERT on one thread)", settings="max_threads = 1"),
    Variant("argmax", "lookup without FINAL: argMax by version, group by key having sum(sign) > 0",
            _variant_model("argmax"), lookup="argmax"),
    Variant("join", "lookup as a join of the target (FINAL) with the batch's keys, no IN",
            _variant_model("join"), lookup="join"),
    Variant("shards", "partitions in parallel: two virtual shards (the fan-out, one key range each)",
            _variant_model("shards", 2)),
)  # fmt: skip


@dataclass(frozen=True)
class Shape:
    rows: int
    batch: int
    small_batch: int
    seed: int = 1
    distributions: tuple[sql.Distribution, ...] = sql.DISTRIBUTIONS

    def batches(self, distribution: sql.Distribution) -> list[Batch]:
        """The batch of B and the small batch, drawn as `distribution` draws keys from one pool of B keys."""
        pool = min(self.batch, self.rows)
        step = max(self.rows // pool, 1)
        return [
            Batch(size, f"batch_{distribution.key}_{size}", events,
                  sql.batch_rows(events, pool, step, self.seed + i, distribution), distribution)
            for i, (size, events) in enumerate((("big", self.batch), ("small", self.small_batch)), start=1)
        ]  # fmt: skip


@dataclass(frozen=True)
class Batch:
    """One batch of change events (existing keys), kept in its own table; `partial` holds
    the same events as partial updates."""

    size: str
    table: str
    events: int
    select: str
    distribution: sql.Distribution = sql.SPREAD

    @property
    def partial(self) -> str:
        return f"{self.table}_partial"


class Tables:
    """Names and lifecycle of every table in the bench database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.db = engine.database
        # role -> name of each model's objects, as vcmt.objects names them (Scenario.setup asks dbt).
        self.objects: dict[str, dict[str, str]] = {}
        # Statements captured from a real `dbt run`, replayed as a sample (vcmt's loader, anchor (C)).
        self.captured: dict[str, list[str]] = {}

    def q(self, name: str) -> str:
        return f"`{self.db}`.`{name}`"

    def obj(self, model: Model, role: str) -> str:
        return self.q(self.objects[model.name][role])

    def _run(self, *statements: str) -> None:
        for statement in statements:
            self.engine.command(statement)

    def stored(self, name: str, column: str = "as_select") -> str:
        """A column of system.tables for one table: its CREATE or a view's SELECT."""
        return str(
            self.engine.scalar(f"select {column} from system.tables where database = '{self.db}' and name = '{name}'")
        )

    def create_database(self) -> None:
        self._run(f"drop database if exists `{self.db}` sync", f"create database `{self.db}`")
        for m in MODELS:
            columns = sql.columns(nullable=m is PARTIAL)
            self._run(f"create table {self.q(m.events)} ({columns}) engine = MergeTree order by tuple()")

    def build_base(self, shape: Shape) -> None:
        """N fresh keys at version 0, sign 1 (a valid state written without the transform) in both bases."""
        self._fill(MODEL, sql.base_rows(shape.rows, shape.seed), shape.rows)
        self._fill(PARTIAL, f"select * from {self.q(MODEL.base)}", shape.rows)

    def _fill(self, model: Model, rows: str, count: int) -> None:
        base = self.q(model.base)
        self._run(f"create table {base} as {self.q(model.name)}", f"system stop merges {base}")
        # Blocks of up to 10M rows: at the default N that is one part per
        # partition straight away; bigger N is merged down to that below.
        block = min(count, 10_000_000)
        self.engine.command(
            f"insert into {base} {rows}", max_insert_block_size=block, min_insert_block_size_rows=block,
            min_insert_block_size_bytes=0, max_insert_threads=1,
        )  # fmt: skip
        if self.parts(model.base) > 20:
            self._run(f"system start merges {base}", f"optimize table {base} final")
            self.stop_merges(model.base)

    def build_batches(self, shape: Shape) -> None:
        for b in (b for d in shape.distributions for b in shape.batches(d)):
            self._run(f"create table {self.q(b.table)} engine = MergeTree order by tuple() as {b.select}",
                      f"create table {self.q(b.partial)} engine = MergeTree order by tuple() as "
                      f"{sql.partial_rows(self.q(b.table))}")  # fmt: skip

    def clone(self, name: str, base: str = MODEL.base) -> None:
        self._run(f"create table {self.q(name)} as {self.q(base)}", f"system stop merges {self.q(name)}")

    def stop_merges(self, name: str) -> None:
        self.engine.command(f"system stop merges {self.q(name)}")

    def restore(self, name: str, base: str = MODEL.base) -> None:
        """Give `name` exactly `base`'s parts again (and empty a model's tombstones and applied totals)."""
        table = self.q(name)
        self._run(f"truncate table {table}", f"alter table {table} attach partition all from {self.q(base)}")
        helpers = self.objects.get(name, {})
        self._run(*(f"truncate table {self.q(helpers[role])}" for role in ("tombstones", "applied") if role in helpers))

    def load_events(self, batch: Batch) -> None:
        """Each model's input table holds the batch (what the next `dbt run` reads)."""
        for m, rows in ((MODEL, batch.table), (PARTIAL, batch.partial)):
            events = self.q(m.events)
            self._run(f"truncate table {events}", f"insert into {events} select * from {self.q(rows)}")

    def parts(self, name: str) -> int:
        return int(
            self.engine.scalar(
                f"select count() from system.parts where database = '{self.db}' and table = '{name}' and active"
            )
        )

    def drop_database(self) -> None:
        self.engine.command(f"drop database if exists `{self.db}` sync")
