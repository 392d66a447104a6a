"""Anchors: other ways to apply the same batch, measured next to vcmt_upsert.

An anchor gets a table with base's columns and parts (its own engine where
it needs one) and the statements that apply the batch waiting in the events
table. Each is sampled alongside the plain INSERTs and the vcmt loader. The
reference keeps vcmt's table layout and is checked like vcmt's target
(`exact` says whether a wrong result fails the run); the others are what a
ClickHouse user would pick instead (issue 12) and come with their own report
query, whose answer after the batch must equal vcmt's or the run fails.
To add one, write its objects and statements and append it to ANCHORS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vcmt_tools.bench import sql
from vcmt_tools.bench.tables import BASE, Tables


@dataclass(frozen=True)
class Anchor:
    key: str
    label: str
    # Builds the anchor's objects on a copy of base; returns their DDL, for the report.
    create: Callable[[Tables], str]
    # The statement(s) that apply the batch in the events table, timed together.
    insert: Callable[[Tables], str | list[str]]
    exact: bool = False
    # Goal for vcmt's time / this anchor's on the batch of B, if any.
    goal: float | None = None
    # The report query on this anchor's table, as its docs recommend reading it.
    report: Callable[[Tables], str] | None = None


REFERENCE = "reference"


def _reference_transform(stage: str, target: str) -> str:
    """The reference article's transform (its "Speed Test" view), only the table names changed."""
    return f"""
with __new as ( SELECT * FROM {stage} order by _version desc, sign desc limit 1 by id ),
     __old AS ( SELECT *, arrayJoin([-1,1]) AS _sign from
         ( select * FROM {target} final
             PREWHERE id IN (SELECT id FROM __new)
           where sign = 1
         )
     )
select id,
       if(__old._sign = -1, __old.Department, __new.Department) AS Department,
       if(__old._sign = -1, __old.metric1, __new.metric1)       AS metric1,
       if(__old._sign = -1, __old.metric2, __new.metric2)       AS metric2,
       if(__old._sign = -1, __old._version, __new._version)     AS _version,
       if(__old._sign = -1, -1, 1)                              AS sign
from __new left join __old using id
where if(__new.sign = -1,
         __old._sign = -1,
         __new._version > __old._version)
"""


def _create_reference(t: Tables) -> str:
    """The article's objects on their own copy of base: a Null stage and its transform view."""
    t.clone(REFERENCE)
    stage = t.q(REFERENCE + "__stage")
    ddl = [
        f"create table {stage} ({sql.COLUMNS}) engine = Null",
        f"create materialized view {t.q(REFERENCE + '__transform')} to {t.q(REFERENCE)} as "
        + _reference_transform(stage, t.q(REFERENCE)),
    ]
    for statement in ddl:
        t.engine.command(statement)
    return ";\n".join(ddl)


def _reference_insert(t: Tables) -> str:
    # One insert thread, so the batch reaches the view as one block, as in the
    # article: its dedupe only sees one block at a time.
    return (
        f"insert into {t.q(REFERENCE + '__stage')} select * from {t.events} settings insert_deduplicate = 0, "
        "do_not_merge_across_partitions_select_final = 1, max_insert_threads = 1"
    )


def _create_like_base(t: Tables, name: str, engine: str, settings: str = "") -> str:
    """`name` with base's columns and projection, partition and sort key, on another engine,
    so base's parts attach to it (Tables.restore)."""
    ddl = (f"create table {t.q(name)} as {t.q(BASE)} engine = {engine} partition by id % 20 order by id "
           f"settings index_granularity = 4096, deduplicate_merge_projection_mode = 'rebuild'{settings}")
    t.engine.command(ddl)
    t.stop_merges(name)
    return ddl


RMT = "rmt"
LW_UPDATE = "lw_update"


def _lw_update(t: Tables) -> list[str]:
    """Each key's newest event into a Join table, then one lightweight UPDATE guarded by version
    (the bench's batches only update existing keys and carry no deletes; `sign` is the soft-delete column)."""
    batch, name = t.q(LW_UPDATE + "_batch"), f"{t.db}.{LW_UPDATE}_batch"
    sets = ", ".join(f"{c} = joinGet('{name}', '{c}', id)" for c in ("Department", "metric1", "metric2", "_version"))
    return [
        f"drop table if exists {batch}",
        f"create table {batch} engine = Join(ANY, LEFT, id) as select id, Department, metric1, metric2, _version "
        f"from {t.events} order by _version desc limit 1 by id",
        f"update {t.q(LW_UPDATE)} set {sets} where id in (select id from {batch}) "
        f"and _version < joinGet('{name}', '_version', id)",
    ]


ANCHORS: tuple[Anchor, ...] = (
    Anchor(REFERENCE, "reference article's transform", _create_reference, _reference_insert, goal=0.5),
    Anchor(RMT, "(A) ReplacingMergeTree(_version), read with FINAL",
           lambda t: _create_like_base(t, RMT, "ReplacingMergeTree(_version)"),
           lambda t: f"insert into {t.q(RMT)} select * from {t.events}",
           report=lambda t: sql.report_final(t.q(RMT))),
    Anchor(LW_UPDATE, "(B) lightweight UPDATE with a version guard",
           lambda t: _create_like_base(t, LW_UPDATE, "MergeTree",
                                       ", enable_block_number_column = 1, enable_block_offset_column = 1"),
           _lw_update, report=lambda t: sql.report_live(t.q(LW_UPDATE))),
)  # fmt: skip
