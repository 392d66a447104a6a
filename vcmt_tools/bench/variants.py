"""Prototypes of faster loader SQL, built by hand next to the real objects.

`proto*` is a copy of the model's objects (target with base's parts, Null
stage, the same transform, tombstone and applied-stats views, their stored
SQL retargeted). Each variant feeds the same batch into that copy; its result
is checked like the real loader's, and a fold variant must pick exactly the
events the loader's argMax picks on a batch full of ties (same key and
version, upsert vs delete), where getting the order wrong would show.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from vcmt_tools.bench import sql
from vcmt_tools.bench.checks import Checks, check_upsert_state
from vcmt_tools.bench.dbt_project import EVENTS, MODEL
from vcmt_tools.bench.profile import loader_select
from vcmt_tools.bench.steps import Steps
from vcmt_tools.bench.tables import Batch, Tables

Say = Callable[[str], None]
PROTO = "proto"
TIES = "fold_ties"
MIXED = "mixed_batch"
_HELPERS = ("tombstones", "applied")
_VIEWS = ("tombstones_writer", "applied_writer", "transform")
_SETTINGS = "settings insert_deduplicate = 0, do_not_merge_across_partitions_select_final = 1"


def _normalized(events: str) -> str:
    """The loader's view of the model's events (load.sql `_normalized_events_sql`, replace-only model)."""
    return (
        '(select "id", "Department", "metric1", "metric2", "_version", _vcmt_sign from (select *, '
        'if("sign" < 0, toInt8(-1), toInt8(1)) as _vcmt_sign from (select id, Department, metric1, metric2, '
        f"_version, sign from {events}) as _vcmt_src))"
    )


def fold_limit_by(events: str) -> str:
    """Newest event per key by sorting: version descending, a delete (-1) first at equal versions."""
    return (
        'select "id", "Department", "metric1", "metric2", "_version", _vcmt_sign '
        f'from {_normalized(events)} order by "_version" desc, _vcmt_sign asc limit 1 by "id"'
    )


def fold_limit_by_key(events: str) -> str:
    """The same, sorted by key first: the stage block, and so the transform's output, is in key order."""
    return (
        'select "id", "Department", "metric1", "metric2", "_version", _vcmt_sign '
        f'from {_normalized(events)} order by "id", "_version" desc, _vcmt_sign asc limit 1 by "id"'
    )


def fold_argmax_numeric(events: str) -> str:
    """Newest event per key by argMax per column over one numeric key: 2 * version + (delete ? 1 : 0)."""
    cols = ", ".join(f'argMax("{c}", _vcmt_k)' for c in ("Department", "metric1", "metric2", "_version"))
    return (
        f'select "id", {cols}, argMax(_vcmt_sign, _vcmt_k) from (select *, '
        f'toInt128("_version") * 2 + (_vcmt_sign < 0) as _vcmt_k from {_normalized(events)}) group by "id"'
    )


def applied_by_uniq(target: str) -> str:
    """Applied stats without GROUP BY key: a key has 1 row (insert, delete) or 2 (update) per block,
    so updated = rows - distinct keys, and the +1 / -1 row counts give the rest."""
    return (
        "select plus - (rows - keys) as inserted, rows - keys as updated, minus - (rows - keys) as deleted "
        'from (select count() as rows, uniqExact("id") as keys, countIf("sign" = 1) as plus, '
        f'countIf("sign" = -1) as minus from {target})'
    )


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    # The fold SELECT reading the given events table; None means the captured loader's.
    fold: Callable[[str], str] | None
    extra_settings: str = ""
    # The applied-stats view's query over the given target; None keeps the generated one.
    applied: Callable[[str], str] | None = None


_NO_MERGE = ", optimize_on_insert = 0"
VARIANTS = (
    Variant("current", "as generated (sanity: should match the loader's row above)", None),
    Variant("limit_by", "fold by ORDER BY version DESC, sign LIMIT 1 BY key", fold_limit_by),
    Variant("argmax_numeric", "fold by per-column argMax over 2*version + is_delete", fold_argmax_numeric),
    Variant("limit_by_key", "fold by ORDER BY key, version DESC, sign LIMIT 1 BY key", fold_limit_by_key),
    Variant("proposed", "PROPOSED: that + optimize_on_insert = 0 on the stage INSERT", fold_limit_by_key,
            _NO_MERGE),
    Variant("proposed_uniq", "proposed + applied stats by count() - uniqExact(key)", fold_limit_by_key, _NO_MERGE,
            applied_by_uniq),
)  # fmt: skip


_STAGE_COLUMNS = '("id", "Department", "metric1", "metric2", "_version", "sign")'


def proposed_sql(db: str, events: str) -> dict[str, str]:
    """The proposed variants' SQL for the real model's objects, for the report."""
    by_key = {v.key: v for v in VARIANTS}
    proposed, uniq = by_key["proposed"], by_key["proposed_uniq"]
    assert proposed.fold is not None and uniq.applied is not None
    return {
        "stage INSERT (loader, foldable models)": f"insert into `{db}`.`{MODEL}__stage` {_STAGE_COLUMNS}\n"
        f"{proposed.fold(events)}\n{_SETTINGS}{proposed.extra_settings}",
        "applied-stats view query (optional, proposed_uniq)": uniq.applied(f"`{db}`.`{MODEL}`"),
    }


class Prototypes:
    def __init__(
        self, tables: Tables, steps: Steps, checks: Checks, loader_sql: str, repeat: int, rows: int, say: Say
    ) -> None:
        self.t = tables
        self.rows = rows
        self.e = tables.engine
        self.steps = steps
        self.checks = checks
        self.loader_sql = loader_sql
        self.repeat = repeat
        self.say = say
        self.db = tables.db
        self._applied_for: Callable[[str], str] | None = None

    def _stored(self, name: str, column: str) -> str:
        return str(
            self.e.scalar(f"select {column} from system.tables where database = '{self.db}' and name = '{name}'")
        )

    def _retarget_all(self, text: str) -> str:
        """Every `<db>.<model>` and `<db>.<model>__<role>` becomes the prototype's."""
        pattern = rf"`?{re.escape(self.db)}`?\.`?{MODEL}(__[A-Za-z0-9_]+)?`?(?![A-Za-z0-9_])"
        return re.sub(pattern, lambda m: f"`{self.db}`.`{PROTO}{m.group(1) or ''}`", text)

    def build(self) -> None:
        t = self.t
        self.drop()
        self._applied_for = None
        t.clone(PROTO)
        self.e.command(f"create table {t.q(PROTO + '__stage')} as {t.q(MODEL + '__stage')}")
        for helper in _HELPERS:
            self.e.command(self._retarget_all(self._stored(f"{MODEL}__{helper}", "create_table_query")))
        for view in _VIEWS:
            self.e.command(self._retarget_all(self._stored(f"{MODEL}__{view}", "create_table_query")))

    def drop(self) -> None:
        for view in _VIEWS:
            self.e.command(f"drop table if exists {self.t.q(f'{PROTO}__{view}')} sync")
        for name in (f"{PROTO}__stage", *(f"{PROTO}__{h}" for h in _HELPERS), PROTO, TIES, MIXED):
            self.e.command(f"drop table if exists {self.t.q(name)} sync")

    def _restore(self) -> None:
        t = self.t
        self.e.command(f"truncate table {t.q(PROTO)}")
        self.e.command(f"alter table {t.q(PROTO)} attach partition all from {t.q('base')}")
        for helper in _HELPERS:
            self.e.command(f"truncate table {t.q(f'{PROTO}__{helper}')}")

    def insert_sql(self, variant: Variant) -> str:
        stage = self.t.q(PROTO + "__stage")
        if variant.fold is None:
            head = f"insert into `{self.db}`.`{MODEL}__stage`"
            body = self.loader_sql.replace(head, f"insert into {stage}", 1)
            return body.rstrip() + variant.extra_settings
        return f"insert into {stage} {_STAGE_COLUMNS} {variant.fold(self.t.events)} {_SETTINGS}{variant.extra_settings}"

    def _set_applied(self, variant: Variant) -> None:
        """Point the prototype's applied-stats view at the variant's query (DDL, only when it changes)."""
        if self._applied_for == variant.applied:
            return
        view = self.t.q(f"{PROTO}__applied_writer")
        if variant.applied is not None:
            query = variant.applied(self.t.q(PROTO))
        else:
            query = self._retarget_all(self._stored(f"{MODEL}__applied_writer", "as_select"))
        self.e.command(f"alter table {view} modify query {query}")
        self._applied_for = variant.applied

    def run(self, batch: Batch, baselines: list[tuple[str, str, str, str]], differential: bool) -> None:
        """Every variant and the baselines (key, label, table, statement) R times on `batch`.

        Samples are interleaved (one round over all, rotating order, per repeat)
        so that load from other jobs on the host hits every variant alike. The
        first round checks each variant's result like the loader's. With
        `differential`, each variant then loads two mixed batches (new keys,
        updates, deletes, stale and tied events) and must leave exactly what the
        generated SQL leaves: table, tombstones and applied stats.
        """
        t = self.t
        t.load_events(batch.table)
        self.build()
        group = f"variants_{batch.size}"
        entries: list[tuple[str, str, str, str, Variant | None]] = [(*b, None) for b in baselines]
        entries += [(v.key, f"loader variant: {v.label}", PROTO, self.insert_sql(v), v) for v in VARIANTS]
        generated: tuple[int, ...] = ()
        for r in range(self.repeat):
            shift = r % len(entries)
            for key, label, table, statement, variant in entries[shift:] + entries[:shift]:
                if variant is None:
                    t.restore(table)
                else:
                    self._restore()
                    self._set_applied(variant)
                step = self.steps.step(f"{group}_{key}", label, group)
                step.timings.append(self.e.timed(f"{group}_{key}#{r}", statement))
                if r == 0 and variant is not None:
                    counted = self._check(variant, batch, generated)
                    if variant.fold is None and variant.applied is None:
                        generated = counted
        for key, *_ in entries:
            step = self.steps[f"{group}_{key}"]
            self.say(f"  {step.label}: {step.wall_ms:,.0f} ms (CPU {step.cpu_ms:,.0f} ms)")
        if differential:
            self._differential()
            t.load_events(batch.table)

    def _check(self, variant: Variant, batch: Batch, generated: tuple[int, ...]) -> tuple[int, ...]:
        """The prototype's state after `batch`, checked; returns its applied stats."""
        t = self.t
        name = f"variant {variant.key}, {batch.size} batch"
        check_upsert_state(self.e, self.checks, name, t.q(PROTO), t.q("base"), t.q(batch.table), guard=False)
        counted = self._applied_totals()
        if generated:
            self.checks.add(
                f"{name}: applied stats (inserted, updated, deleted) == the generated SQL's",
                counted == generated,
                f"got {counted}, the generated SQL counted {generated}",
                guard=False,
            )
        return counted

    def _differential(self) -> None:
        expected: tuple[int, ...] = ()
        for variant in VARIANTS:
            self._set_applied(variant)
            outcome = self._mixed_outcome(variant)
            if variant.fold is None and variant.applied is None:
                expected = outcome
            else:
                self.checks.add(
                    f"variant {variant.key}: on two mixed batches (inserts, updates, deletes, stale, ties) "
                    "leaves the generated SQL's table, tombstones and applied stats",
                    outcome == expected,
                    f"got {outcome}, generated {expected}",
                    guard=False,
                )
            if variant.fold is not None:
                self._check_fold_ties(variant)

    def _mixed_outcome(self, variant: Variant) -> tuple[int, ...]:
        """(live rows, their checksum, bad keys, bad (key, version), tombstones, their checksum,
        inserted, updated, deleted) after two mixed batches through `variant`."""
        t, target = self.t, self.t.q(PROTO)
        self._restore()
        for seed in (21, 22):
            self.e.command(f"drop table if exists {t.q(MIXED)} sync")
            self.e.command(
                f"create table {t.q(MIXED)} ({sql.COLUMNS}) engine = Memory as {sql.mixed_batch_rows(self.rows, seed)}"
            )
            t.load_events(MIXED)
            self.e.command(self.insert_sql(variant))
        touched = sql.mixed_keys(self.rows)
        live = self.e.rows(sql.live_checksum_final(target, touched))[0]
        bad = self.e.rows(sql.bad_keys(target, touched))[0]
        tombs = self.e.rows(
            f"select count(), sum(cityHash64(id, v)) from (select id, max(_version) as v "
            f"from {t.q(PROTO + '__tombstones')} group by id)"
        )[0]
        return tuple(int(v) for v in (*live, *bad, *tombs, *self._applied_totals()))

    def _applied_totals(self) -> tuple[int, ...]:
        row = self.e.rows(f"select sum(inserted), sum(updated), sum(deleted) from {self.t.q(PROTO + '__applied')}")
        return tuple(int(v) for v in row[0])

    def _check_fold_ties(self, variant: Variant) -> None:
        """Same winner per key as the loader's fold on a batch of many versions, ties and deletes."""
        t = self.t
        ties = t.q(TIES)
        self.e.command(f"drop table if exists {ties} sync")
        self.e.command(
            f"create table {ties} ({sql.COLUMNS}) engine = Memory as select * from ("
            f"select toInt32(cityHash64(9, 1, number) % 2000) as id, toString(number) as Department, "
            f"toUInt32(number) as metric1, toFloat32(number) as metric2, cityHash64(9, 5, number) % 8 as _version, "
            f"if(cityHash64(9, 6, number) % 3 = 0, toInt8(-1), toInt8(1)) as sign from numbers(50000)) "
            "limit 1 by id, _version, sign"
        )
        events = f"`{self.db}`.`{EVENTS}`"
        current = loader_select(self.loader_sql).replace(events, ties)
        current = current[: current.rfind("settings")]
        candidate = variant.fold(ties)
        differ = int(
            self.e.scalar(
                f"select (select count() from (({current}) except ({candidate}))) "
                f"+ (select count() from (({candidate}) except ({current})))"
            )
        )
        keys = int(self.e.scalar(f"select uniqExact(id) from {ties}"))
        self.checks.add(
            f"variant {variant.key}: fold picks the same event per key as the loader (ties, deletes)",
            differ == 0,
            f"{differ} rows differ over {keys:,} keys",
            guard=False,
        )
