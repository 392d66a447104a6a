"""Correctness guards of the bench: a benchmark of wrong results is worthless."""

from __future__ import annotations

from dataclasses import dataclass, field

from vcmt_tools import invariants
from vcmt_tools.bench import sql
from vcmt_tools.bench.engine import Engine
from vcmt_tools.bench.tables import DATA_COLUMNS


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    # A failing guard fails the run; an informative check only reports.
    guard: bool = True


@dataclass
class Checks:
    items: list[Check] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str, guard: bool = True) -> Check:
        check = Check(name, ok, detail, guard)
        self.items.append(check)
        return check

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.items if c.guard and not c.ok]


def normalized(rows: list[tuple]) -> list[tuple[str, int, int]]:
    """Report-query rows as (department, live rows, sum of metric1), whatever the column types."""
    return [(str(r[0]), int(r[1]), int(r[2])) for r in rows]


def check_upsert_state(
    engine: Engine, checks: Checks, name: str, table: str, base: str, events: str,
    guard: bool = True, whole_table: bool = False,
) -> None:  # fmt: skip
    """The invariants, and the state equals base with each batch key replaced by its newest event.

    By default only the batch's keys are examined in depth (the other keys are
    base rows nobody touched), plus the total of live rows; `whole_table`
    checks every key, which costs a GROUP BY over the whole table.
    """
    target = invariants.Target(table, ["id"], where=None if whole_table else f"id in (select id from {events})")
    scope = "all keys" if whole_table else "batch keys"
    for f in invariants.check(engine.rows, target, DATA_COLUMNS):
        checks.add(f"{name}: {f.name} ({scope})", f.ok, f.detail, guard)
    final = invariants.live_rows_final(engine.rows, target, DATA_COLUMNS)
    row_hash = invariants.row_hash(target, DATA_COLUMNS)
    expected = tuple(int(v) for v in engine.rows(sql.expected_checksum(base, events, row_hash, not whole_table))[0])
    checks.add(
        f"{name}: rows == base with each batch key replaced by its newest event ({scope})",
        final == expected,
        f"got {final[0]:,} rows, checksum {final[1]}; expected {expected[0]:,} rows, checksum {expected[1]}",
        guard,
    )
    if not whole_table:
        live, base_live = (int(engine.scalar(f"select sum(sign) from {t}")) for t in (table, base))
        checks.add(
            f"{name}: live rows (sum(sign)) unchanged by upserts of existing keys",
            live == base_live,
            f"{live:,} live rows, base has {base_live:,}",
            guard,
        )
