"""Correctness guards of the bench: a benchmark of wrong results is worthless."""

from __future__ import annotations

from dataclasses import dataclass, field

from vcmt_tools.bench import sql
from vcmt_tools.bench.engine import Engine


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
    engine: Engine,
    checks: Checks,
    name: str,
    table: str,
    base: str,
    events: str,
    guard: bool = True,
    whole_table: bool = False,
) -> None:
    """Invariants at rest, FINAL == GROUP BY per key, and the state equals base upserted with `events`.

    By default only the batch's keys are examined in depth (the other keys are
    base rows nobody touched), plus the total of live rows; `whole_table`
    checks every key, which costs a GROUP BY over the whole table.
    """
    keys = None if whole_table else sql.keys_of(events)
    scope = "all keys" if whole_table else "batch keys"
    bad_keys, bad_versions = engine.rows(sql.bad_keys(table, keys))[0]
    checks.add(
        f"{name}: per key and per (key, version) sum(sign) in {{0, 1}} ({scope})",
        bad_keys == 0 and bad_versions == 0,
        f"{bad_keys} keys, {bad_versions} (key, version) pairs outside {{0, 1}}",
        guard,
    )
    final = tuple(int(v) for v in engine.rows(sql.live_checksum_final(table, keys))[0])
    grouped = tuple(int(v) for v in engine.rows(sql.live_checksum_group_by(table, keys))[0])
    checks.add(
        f"{name}: live rows by GROUP BY sign arithmetic == FINAL where sign = 1 ({scope})",
        final == grouped,
        f"FINAL {final[0]:,} rows, checksum {final[1]}; GROUP BY {grouped[0]:,} rows, checksum {grouped[1]}",
        guard,
    )
    expected = tuple(int(v) for v in engine.rows(sql.expected_checksum(base, events, not whole_table))[0])
    checks.add(
        f"{name}: rows == base with each batch key replaced by its newest event ({scope})",
        final == expected,
        f"got {final[0]:,} rows, checksum {final[1]}; expected {expected[0]:,} rows, checksum {expected[1]}",
        guard,
    )
    if not whole_table:
        live, base_live = int(engine.scalar(sql.live_rows(table))), int(engine.scalar(sql.live_rows(base)))
        checks.add(
            f"{name}: live rows (sum(sign)) unchanged by upserts of existing keys",
            live == base_live,
            f"{live:,} live rows, base has {base_live:,}",
            guard,
        )
