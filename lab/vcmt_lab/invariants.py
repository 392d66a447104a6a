"""The invariants of a vcmt_upsert target at rest, checked from Python.

They are the ones the package's generic tests check in dbt
(docs/design.md#invariants): per key and per (key, version) `sum(sign)` is
0 or 1, and reading the live rows with sign arithmetic (no FINAL) gives the
same rows as `FINAL ... where sign = 1`, so GROUP BY aggregations agree too.
Any caller with a `query(sql) -> rows` function can use them (the bench; the
fuzzer and tests may share them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

Query = Callable[[str], list[tuple]]


def _q(column: str) -> str:
    return f"`{column}`"


@dataclass(frozen=True)
class Target:
    """A VCMT table to check: `name` as it goes into SQL (quoted if needed), its
    key, version and sign columns, and optionally a filter on the keys to look at."""

    name: str
    keys: Sequence[str]
    version: str = "_version"
    sign: str = "sign"
    where: str | None = None

    @property
    def key_list(self) -> str:
        return ", ".join(_q(k) for k in self.keys)

    def filtered(self, prefix: str = "where") -> str:
        return f" {prefix} {self.where}" if self.where else ""


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str


def sign_sum_violations(query: Query, t: Target) -> tuple[int, int]:
    """(keys, (key, version) pairs) whose sum(sign) is outside {0, 1}."""
    s, v = _q(t.sign), _q(t.version)
    rows = query(
        f"select (select count() from (select sum({s}) as x from {t.name}{t.filtered()} group by {t.key_list}) "
        f"where x not in (0, 1)), (select count() from (select sum({s}) as x from {t.name}{t.filtered()} "
        f"group by {t.key_list}, {v}) where x not in (0, 1))"
    )
    return int(rows[0][0]), int(rows[0][1])


def row_hash(t: Target, columns: Sequence[str]) -> str:
    """SQL hashing a row's key, `columns` and version: the checksums below sum it over live rows."""
    return f"cityHash64(tuple({', '.join(_q(c) for c in [*t.keys, *columns, t.version])}))"


def live_rows_final(query: Query, t: Target, columns: Sequence[str]) -> tuple[int, int]:
    """(live rows, checksum of their key, columns and version) read with FINAL where sign = 1."""
    rows = query(
        f"select count(), sum({row_hash(t, columns)}) from {t.name} final where {_q(t.sign)} = 1"
        f"{t.filtered('and')} settings do_not_merge_across_partitions_select_final = 1"
    )
    return int(rows[0][0]), int(rows[0][1] or 0)


def live_rows_by_sign(query: Query, t: Target, columns: Sequence[str]) -> tuple[int, int]:
    """The same live rows found without FINAL: per key, the sign-weighted sum of its row hashes."""
    s = _q(t.sign)
    rows = query(
        f"select count(), sum(toUInt64(h)) from (select sum({s}) as n, sum(toInt128({s}) * {row_hash(t, columns)}) "
        f"as h from {t.name}{t.filtered()} group by {t.key_list}) where n > 0"
    )
    return int(rows[0][0]), int(rows[0][1] or 0)


def check(query: Query, t: Target, columns: Sequence[str]) -> list[Finding]:
    """Every invariant of `t` (only its `where` keys, if set) as a finding; `columns` are the
    data columns compared."""
    bad_keys, bad_versions = sign_sum_violations(query, t)
    final = live_rows_final(query, t, columns)
    by_sign = live_rows_by_sign(query, t, columns)
    return [
        Finding(
            "per key and per (key, version) sum(sign) in {0, 1}",
            bad_keys == 0 and bad_versions == 0,
            f"{bad_keys} keys, {bad_versions} (key, version) pairs outside {{0, 1}}",
        ),
        Finding(
            "live rows by sign arithmetic == FINAL where sign = 1",
            final == by_sign,
            f"FINAL {final[0]:,} rows (checksum {final[1]}); sign arithmetic {by_sign[0]:,} rows "
            f"(checksum {by_sign[1]})",
        ),
    ]
