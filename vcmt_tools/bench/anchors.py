"""Anchors: other ways to apply the same batch, measured next to vcmt_upsert.

An anchor gets its own copy of `base` (same DDL, same parts) and one
statement that applies the batch waiting in the events table. Each is sampled
alongside the plain INSERTs and the vcmt loader, and its result is checked
like vcmt's; `exact` says whether a wrong result fails the run (an anchor
that is only correct within limits, like the reference, just reports).
To add one, write its objects and statement and append it to ANCHORS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vcmt_tools.bench import sql
from vcmt_tools.bench.tables import Tables


@dataclass(frozen=True)
class Anchor:
    key: str
    label: str
    # Builds the anchor's objects on a copy of base; returns their DDL, for the report.
    create: Callable[[Tables], str]
    # The statement that applies the batch in the events table.
    insert: Callable[[Tables], str]
    exact: bool = False
    # Goal for vcmt's time / this anchor's on the batch of B, if any.
    goal: float | None = None


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


ANCHORS: tuple[Anchor, ...] = (
    Anchor(REFERENCE, "reference article's transform", _create_reference, _reference_insert, goal=0.5),
)
