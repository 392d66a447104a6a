"""SQL text of the bench: data generators, the report query three ways, the expected state.

Data follows the reference article's speed test: N base rows with fresh keys,
batches of random existing keys drawn from a pool of B keys spaced N/B apart
(the article's `(rand() % 1E6) * 100` at N=100M, B=1M), so about 63% of a
batch's keys are distinct. The small batch draws from the same pool; a
second small batch draws from consecutive keys (updates of recent rows), the
case where the primary key narrows the old-row lookup to a few granules.
Values come from cityHash64 of (seed, row number) instead of rand(), so
every table and every approach sees the same batch.
Batch versions are the row number + 1: newer than the base rows (version 0)
and distinct, so duplicate keys in a batch have one deterministic winner and
vcmt and the reference must reach the same final table.
"""

from __future__ import annotations

COLUMNS = "id Int32, Department String, metric1 UInt32, metric2 Float32, _version UInt64, sign Int8"
COLUMN_NAMES = "id, Department, metric1, metric2, _version, sign"
_DEPARTMENTS = "['HR', 'Finance', 'Engineering', 'Sales', 'Marketing']"


def _values(seed: int) -> str:
    return (
        f"{_DEPARTMENTS}[cityHash64({seed}, 2, number) % 5 + 1] as Department, "
        f"toUInt32(cityHash64({seed}, 3, number) % 1000) as metric1, "
        f"toFloat32((cityHash64({seed}, 4, number) % 10000) / 100.0) as metric2"
    )


def base_rows(rows: int, seed: int) -> str:
    """The article's base table: keys 0..N-1, version 0, sign 1."""
    return (
        f"select toInt32(number) as id, {_values(seed)}, toUInt64(0) as _version, toInt8(1) as sign "
        f"from numbers({rows})"
    )


def batch_rows(events: int, pool: int, step: int, seed: int) -> str:
    """`events` upserts of keys drawn from `pool` existing keys spaced `step` apart."""
    return (
        f"select toInt32((cityHash64({seed}, 1, number) % {pool}) * {step}) as id, {_values(seed)}, "
        f"toUInt64(number + 1) as _version, toInt8(1) as sign from numbers({events})"
    )


def fresh_rows(count: int, start: int, seed: int) -> str:
    """The article's plain INSERT: `count` new keys from `start`, in key order, version 1."""
    return (
        f"select toInt32({start} + number) as id, {_values(seed)}, toUInt64(1) as _version, toInt8(1) as sign "
        f"from numbers({count})"
    )


def clustered_batch_rows(events: int, start: int, seed: int) -> str:
    """`events` upserts of keys drawn from `events` consecutive existing keys from `start` (recent rows)."""
    return (
        f"select toInt32({start} + cityHash64({seed}, 1, number) % {events}) as id, {_values(seed)}, "
        f"toUInt64(number + 1) as _version, toInt8(1) as sign from numbers({events})"
    )


# The report query three ways. FINAL keeps `where sign = 1`: it is applied after
# collapsing (ClickHouse does not move it to PREWHERE under FINAL), so it drops
# only rows FINAL left unpaired with sign -1; those never exist at rest, but the
# filter is what makes count() a count of live rows by construction.
def report_final(table: str) -> str:
    return (
        f"select Department, count(), sum(metric1) from {table} final where sign = 1 "
        "group by Department order by Department settings do_not_merge_across_partitions_select_final = 1"
    )


def report_live(table: str) -> str:
    """The report query on a table that keeps one row per key, `sign` as its soft-delete column."""
    return (
        f"select Department, count(), sum(metric1) from {table} where sign = 1 "
        "group by Department order by Department"
    )


def report_group_by(table: str) -> str:
    return (
        f"select Department, sum(sign), sum(sign * metric1) from {table} "
        "group by Department having sum(sign) > 0 order by Department settings optimize_use_projections = 0"
    )


def report_projection(table: str) -> str:
    return (
        f"select Department, sum(sign), sum(metric1 * sign) from {table} "
        "group by Department having sum(sign) > 0 order by Department settings force_optimize_projection = 1"
    )


def expected_checksum(base: str, events: str, row_hash: str, only_batch_keys: bool = False) -> str:
    """Base rows with every batch key replaced by its newest event: what an UPSERT must leave.

    `row_hash` is the invariants' hash of a live row, so the result compares with theirs."""
    newest = f"select {COLUMN_NAMES} from {events} order by _version desc limit 1 by id"
    if only_batch_keys:
        return f"select count(), sum({row_hash}) from ({newest})"
    return (
        f"select count(), sum({row_hash}) from (select {COLUMN_NAMES} from {base} "
        f"where id not in (select id from {events}) union all {newest})"
    )
