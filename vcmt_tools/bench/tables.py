"""Identical tables for every approach, restored to the same state before each sample.

`base` is created `AS` the dbt-built target, so it has the materialization's
DDL (engine, partitioning, index granularity, projection, settings), and
holds the N base rows merged to one part per partition. Every measured
table has that same DDL and gets base's parts back by hard link
(`ATTACH PARTITION ALL FROM`) before each sample: samples do not see earlier
samples' rows, and restoring costs milliseconds even at 100M rows.

Background merges are stopped on measured tables so a merge started by one
sample does not steal one of the two cores from the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from vcmt_tools.bench import sql
from vcmt_tools.bench.engine import Engine

# The model the bench's dbt project builds with vcmt_upsert, on the reference
# article's schema, reading its events from one input table. One stream: the
# bench times the loader's one stage INSERT; virtual_shards.py times K streams.
MODEL = "bench_vcmt"
EVENTS = "bench_events"
DATA_COLUMNS = ("Department", "metric1", "metric2")
MODEL_SQL = f"""
{{{{ config(
    materialized='vcmt_upsert',
    unique_key='id',
    partition_by='id % 20',
    settings={{'index_granularity': 4096}},
    virtual_shards=1,
    projections=[{{'name': 'by_department',
                  'query': 'select Department, sum(sign), sum(metric1 * sign) group by Department'}}],
) }}}}
select id, Department, metric1, metric2, _version, sign
from {{{{ source('bench', '{EVENTS}') }}}}
"""

BASE = "base"
PLAIN = "plain"
BIG_BATCH = "batch_big"
SMALL_BATCH = "batch_small"
CLUSTERED_BATCH = "batch_clustered"
FRESH_BIG = "fresh_big"
FRESH_SMALL = "fresh_small"


@dataclass(frozen=True)
class Shape:
    rows: int
    batch: int
    small_batch: int
    seed: int = 1

    @property
    def pool(self) -> int:
        return min(self.batch, self.rows)

    @property
    def step(self) -> int:
        return max(self.rows // self.pool, 1)

    def batches(self) -> list[Batch]:
        return [
            Batch("big", BIG_BATCH, self.batch, "random keys",
                  sql.batch_rows(self.batch, self.pool, self.step, self.seed + 1), FRESH_BIG),
            Batch("small", SMALL_BATCH, self.small_batch, "random keys",
                  sql.batch_rows(self.small_batch, self.pool, self.step, self.seed + 2), FRESH_SMALL),
            Batch("clustered", CLUSTERED_BATCH, self.small_batch, "consecutive keys",
                  sql.clustered_batch_rows(self.small_batch, self.rows // 2, self.seed + 3), FRESH_SMALL),
        ]  # fmt: skip

    def fresh(self) -> list[tuple[str, str]]:
        """(table, rows) for the article's plain INSERT at both sizes: new keys after the base rows."""
        return [
            (FRESH_BIG, sql.fresh_rows(self.batch, self.rows, self.seed + 4)),
            (FRESH_SMALL, sql.fresh_rows(self.small_batch, self.rows, self.seed + 5)),
        ]


@dataclass(frozen=True)
class Batch:
    """One batch of change events the approaches are fed, kept in its own table."""

    size: str
    table: str
    events: int
    keys: str
    select: str
    # Rows of the article's plain INSERT of the same size (new keys in key order).
    fresh: str


class Tables:
    """Names and lifecycle of every table in the bench database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.db = engine.database
        self.target, self.events = self.q(MODEL), self.q(EVENTS)
        # Statements captured from a real `dbt run` of an anchor model, replayed as its sample.
        self.captured: dict[str, list[str]] = {}

    def q(self, name: str) -> str:
        return f"`{self.db}`.`{name}`"

    def _run(self, *statements: str) -> None:
        for statement in statements:
            self.engine.command(statement)

    def stored(self, name: str, column: str = "as_select") -> str:
        """A column of system.tables for one table: its CREATE or a view's SELECT."""
        return str(
            self.engine.scalar(f"select {column} from system.tables where database = '{self.db}' and name = '{name}'")
        )

    def create_database(self) -> None:
        self._run(
            f"drop database if exists `{self.db}` sync",
            f"create database `{self.db}`",
            f"create table {self.events} ({sql.COLUMNS}) engine = MergeTree order by tuple()",
        )

    def build_base(self, shape: Shape) -> None:
        """N fresh keys at version 0, sign 1: a valid state written without the transform."""
        self._run(f"create table {self.q(BASE)} as {self.target}", f"system stop merges {self.q(BASE)}")
        # Blocks of up to 10M rows: at the default N that is one part per
        # partition straight away; bigger N is merged down to that below.
        block = min(shape.rows, 10_000_000)
        self.engine.command(
            f"insert into {self.q(BASE)} {sql.base_rows(shape.rows, shape.seed)}",
            max_insert_block_size=block, min_insert_block_size_rows=block, min_insert_block_size_bytes=0,
            max_insert_threads=1,
        )  # fmt: skip
        parts, partitions = self.engine.rows(
            f"select count(), uniqExact(partition) from system.parts where database = '{self.db}' "
            f"and table = '{BASE}' and active"
        )[0]
        if parts > partitions:
            self._run(f"system start merges {self.q(BASE)}", f"optimize table {self.q(BASE)} final")
            self.stop_merges(BASE)

    def build_batches(self, shape: Shape) -> None:
        tables = [*shape.fresh(), *((b.table, b.select) for b in shape.batches())]
        self._run(*(f"create table {self.q(t)} engine = MergeTree order by tuple() as {rows}" for t, rows in tables))

    def clone(self, name: str) -> None:
        self._run(f"create table {self.q(name)} as {self.q(BASE)}", f"system stop merges {self.q(name)}")

    def stop_merges(self, name: str) -> None:
        self.engine.command(f"system stop merges {self.q(name)}")

    def restore(self, name: str) -> None:
        """Give `name` exactly base's parts again (and empty its vcmt helper tables)."""
        self._run(
            f"truncate table {self.q(name)}", f"alter table {self.q(name)} attach partition all from {self.q(BASE)}"
        )
        if name == MODEL:
            self._run(*(f"truncate table {self.q(MODEL + '__' + helper)}" for helper in ("tombstones", "applied")))

    def load_events(self, batch: str) -> None:
        """The model's input table holds `batch` (what the next `dbt run` reads)."""
        self._run(f"truncate table {self.events}", f"insert into {self.events} select * from {self.q(batch)}")

    def parts(self, name: str) -> int:
        return int(
            self.engine.scalar(
                f"select count() from system.parts where database = '{self.db}' and table = '{name}' and active"
            )
        )

    def drop_database(self) -> None:
        self.engine.command(f"drop database if exists `{self.db}` sync")
