"""Where the UPSERT's time goes: the transform's pieces, each timed alone.

The stage is a Null table, so the pieces cannot read it outside the
materialized view. Instead the folded batch is kept in a Memory table with
the stage's columns and the materialization's own SQL (the captured loader
SELECT, the transform's and the applied-stats view's stored queries) is run
against it with the stage name swapped, so each piece is the generated SQL,
not a paraphrase. The target is restored to the base state first.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from vcmt_tools.bench.dbt_project import MODEL
from vcmt_tools.bench.steps import Steps
from vcmt_tools.bench.tables import Batch, Tables

Say = Callable[[str], None]

FOLDED = "prof_folded"
OLD = "prof_old"
OUTPUT = "prof_output"
SORTED_OUTPUT = "prof_output_sorted"
WRITE_COPY = "prof_write"
_TABLES = (FOLDED, OLD, OUTPUT, SORTED_OUTPUT, WRITE_COPY)

_INSERT_HEAD = re.compile(r"insert\s+into\s+\S+\s*\([^)]*\)", re.IGNORECASE)


def loader_select(loader_sql: str) -> str:
    """The loader's SELECT (fold of the batch), without its `insert into <stage> (...)` head."""
    return _INSERT_HEAD.sub("", loader_sql, count=1)


def retarget(text: str, db: str, old: str, new: str) -> str:
    """Swap one table name for another in stored view SQL (`db.name`, quoted or not)."""
    pattern = rf"`?{re.escape(db)}`?\.`?{re.escape(old)}`?(?![A-Za-z0-9_])"
    return re.sub(pattern, f"`{db}`.`{new}`", text)


class Profile:
    """The pieces of one batch's UPSERT; `full` adds the alternatives (lookups, joins, folds)."""

    def __init__(
        self, tables: Tables, steps: Steps, loader_sql: str, repeat: int, say: Say, batch: Batch, full: bool
    ) -> None:
        self.t = tables
        self.e = tables.engine
        self.steps = steps
        self.loader_sql = loader_sql
        self.repeat = repeat
        self.say = say
        self.db = tables.db
        self.batch = batch
        self.full = full
        self.group = f"profile_{batch.size}"

    def _view_sql(self, name: str) -> str:
        return str(
            self.e.scalar(f"select as_select from system.tables where database = '{self.db}' and name = '{name}'")
        )

    def _time(
        self, key: str, label: str, statement: str, before: Callable[[], None] | None = None, alternative: bool = False
    ) -> None:
        if alternative and not self.full:
            return
        key = f"{self.group}_{key}"
        step = self.steps.step(key, label, self.group)
        for r in range(self.repeat):
            if before is not None:
                before()
            step.timings.append(self.e.timed(f"{key}#{r}", statement))
        self.say(f"  {label}: {step.wall_ms:,.0f} ms")

    def prepare(self) -> None:
        t = self.t
        t.restore(MODEL)
        t.load_events(self.batch.table)
        stage = t.q(MODEL + "__stage")
        self.cleanup()
        self.e.command(f"create table {t.q(FOLDED)} as {stage} engine = Memory")
        self.e.command(self.loader_sql.replace(f"insert into {stage}", f"insert into {t.q(FOLDED)}", 1))
        self.transform = retarget(self._view_sql(MODEL + "__transform"), self.db, MODEL + "__stage", FOLDED)
        self.e.command(f"create table {t.q(OUTPUT)} engine = Memory as {self.transform}")
        self.e.command(
            f"create table {t.q(SORTED_OUTPUT)} engine = Memory as select * from {t.q(OUTPUT)} order by id, _version "
            "settings max_threads = 1"
        )
        self.applied = retarget(self._view_sql(MODEL + "__applied_writer"), self.db, MODEL, OUTPUT)
        self.e.command(
            f"create table {t.q(OLD)} engine = Memory as select id, Department, metric1, metric2, _version, "
            f"toUInt8(1) as _vcmt_found from {t.target} final prewhere id in (select id from {t.q(FOLDED)}) "
            "where sign = 1 settings do_not_merge_across_partitions_select_final = 1"
        )
        t.clone(WRITE_COPY)

    def run(self) -> None:
        t = self.t
        self.prepare()
        folded, old, events = t.q(FOLDED), t.q(OLD), t.events
        normalized = (
            f"(select id, Department, metric1, metric2, _version, if(sign < 0, toInt8(-1), toInt8(1)) as s "
            f"from {events})"
        )
        self._time("fold_loader", "fold: the loader's SELECT (argMax of a tuple by tuple(version, -sign))",
                   loader_select(self.loader_sql) + " format Null")  # fmt: skip
        self._time(
            "fold_limit_by_key",
            "fold alternative: ORDER BY key, version DESC, sign LIMIT 1 BY key",
            f"select * from {normalized} order by id, _version desc, s asc limit 1 by id format Null",
        )
        self._time(
            "fold_limit_by",
            "fold alternative: ORDER BY version DESC, sign LIMIT 1 BY key",
            f"select * from {normalized} order by _version desc, s asc limit 1 by id format Null",
            alternative=True,
        )
        self._time(
            "fold_argmax_numeric",
            "fold alternative: argMax per column by a numeric key 2*version + (sign < 0)",
            f"select id, argMax(Department, k), argMax(metric1, k), argMax(metric2, k), argMax(_version, k), "
            f"argMax(s, k) from (select *, toInt128(_version) * 2 + (s < 0) as k from {normalized}) "
            "group by id format Null",
            alternative=True,
        )
        self._time(
            "fold_reference",
            "reference dedupe: ORDER BY _version DESC, sign DESC LIMIT 1 BY id",
            f"select * from {events} order by _version desc, sign desc limit 1 by id format Null",
            alternative=True,
        )
        lookup = (
            f"select id, Department, metric1, metric2, _version, toUInt8(1) from {t.target} final "
            f"prewhere id in (select id from {folded}) where sign = 1 format Null "
        )
        self._time("lookup_final", "old-row lookup: FINAL + PREWHERE key IN block (as the transform)",
                   lookup + "settings do_not_merge_across_partitions_select_final = 1")  # fmt: skip
        self._time("lookup_final_across", "old-row lookup, FINAL merging across partitions",
                   lookup + "settings do_not_merge_across_partitions_select_final = 0", alternative=True)  # fmt: skip
        self._time(
            "lookup_group_by",
            "old-row lookup alternative: GROUP BY key, argMaxIf per column, HAVING sum(sign) > 0",
            f"select id, argMaxIf(Department, _version, sign = 1), argMaxIf(metric1, _version, sign = 1), "
            f"argMaxIf(metric2, _version, sign = 1), maxIf(_version, sign = 1) from {t.target} "
            f"prewhere id in (select id from {folded}) group by id having sum(sign) > 0 format Null",
            alternative=True,
        )
        self._time(
            "lookup_keys",
            "old-row lookup of key and version only (FINAL), no data columns",
            f"select id, _version from {t.target} final prewhere id in (select id from {folded}) "
            "where sign = 1 format Null settings do_not_merge_across_partitions_select_final = 1",
        )
        self._time(
            "lookup_read",
            "old-row read without FINAL (lower bound of any lookup)",
            f"select id, Department, metric1, metric2, _version, sign from {t.target} "
            f"prewhere id in (select id from {folded}) format Null",
            alternative=True,
        )
        join = (
            f"select id, n.Department, o.Department, n.metric1, o.metric1, n.metric2, o.metric2, n._version, "
            f"o._version, n.sign, o._vcmt_found from {folded} as n left join {old} as o using (id) format Null"
        )
        self._time("join", "join new LEFT JOIN old USING key (default join_algorithm)", join)
        for algorithm in ("hash", "full_sorting_merge"):
            self._time(f"join_{algorithm}", f"join with join_algorithm = '{algorithm}'",
                       join + f" settings join_algorithm = '{algorithm}'", alternative=True)  # fmt: skip
        self._time(
            "tombstones",
            "tombstone lookup + its LEFT JOIN (no deletes in this batch: empty tombstones)",
            f"select id, n._version, t._version, t._vcmt_found from {folded} as n left join "
            f"(select id, max(_version) as _version, toUInt8(1) as _vcmt_found from {t.q(MODEL + '__tombstones')} "
            f"where id in (select id from {folded}) group by id) as t using (id) format Null",
        )
        self._time("transform_select", "the whole transform SELECT (lookup, joins, decide), no write",
                   self.transform + " format Null")  # fmt: skip
        self._time("applied_writer", "applied-stats view query over the transform's output",
                   self.applied + " format Null")  # fmt: skip
        self._time(
            "applied_uniq",
            "applied-stats alternative: count() - uniqExact(key) instead of GROUP BY key",
            f"select countIf(sign = 1) - (count() - uniqExact(id)), count() - uniqExact(id), "
            f"countIf(sign = -1) - (count() - uniqExact(id)) from {t.q(OUTPUT)} format Null",
        )
        rows = int(self.e.scalar(f"select count() from {t.q(OUTPUT)}"))
        restore = lambda: t.restore(WRITE_COPY)  # noqa: E731
        self._time(
            "write",
            f"write of the {rows:,} cancel + new rows into a restored copy (as the transform emits them)",
            f"insert into {t.q(WRITE_COPY)} select * from {t.q(OUTPUT)}",
            before=restore,
        )
        one_stream = "settings max_threads = 1, max_insert_threads = 1"
        self._time(
            "write_sorted",
            "the same write, rows already in key order (the part writer skips its sort)",
            f"insert into {t.q(WRITE_COPY)} select * from {t.q(SORTED_OUTPUT)} {one_stream}",
            before=restore,
        )
        self._time(
            "write_sorted_no_merge",
            "the same, sorted, with optimize_on_insert = 0 (no in-block collapsing pass)",
            f"insert into {t.q(WRITE_COPY)} select * from {t.q(SORTED_OUTPUT)} {one_stream}, optimize_on_insert = 0",
            before=restore,
        )

    def cleanup(self) -> None:
        for name in _TABLES:
            self.e.command(f"drop table if exists {self.t.q(name)} sync")
