"""SQL text of the bench: data generators, the reference transform, report queries, checks.

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


MIXED_EXISTING = 2000


def mixed_keys(rows: int) -> str:
    """A key filter covering every key a mixed batch can touch."""
    return f"(id < {min(rows, MIXED_EXISTING)} or id >= {rows})"


def mixed_batch_rows(rows: int, seed: int) -> str:
    """Inserts of new keys, updates and deletes of existing ones, stale versions and upsert/delete ties.

    Unique per (key, version, sign), so every fold has one right answer.
    """
    existing = min(rows, MIXED_EXISTING)
    return (
        f"select toInt32(if(cityHash64({seed}, 0, number) % 4 = 0, {rows} + cityHash64({seed}, 1, number) % 1000, "
        f"cityHash64({seed}, 1, number) % {existing})) as id, {_values(seed)}, "
        f"cityHash64({seed}, 5, number) % 6 as _version, "
        f"if(cityHash64({seed}, 6, number) % 3 = 0, toInt8(-1), toInt8(1)) as sign "
        f"from numbers(8000) limit 1 by id, _version, sign"
    )


def reference_transform(stage: str, target: str) -> str:
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


# The report query three ways. FINAL keeps `where sign = 1`: it is applied after
# collapsing (ClickHouse does not move it to PREWHERE under FINAL), so it drops
# only rows FINAL left unpaired with sign -1; those never exist at rest, but the
# filter is what makes count() a count of live rows by construction.
def report_final(table: str, where_sign: bool = True) -> str:
    where = " where sign = 1" if where_sign else ""
    return (
        f"select Department, count(), sum(metric1) from {table} final{where} "
        "group by Department order by Department settings do_not_merge_across_partitions_select_final = 1"
    )


def report_final_prewhere(table: str) -> str:
    """The wrong placement: filtering sign before collapsing keeps cancelled rows."""
    return (
        f"select Department, count(), sum(metric1) from {table} final prewhere sign = 1 "
        "group by Department order by Department settings do_not_merge_across_partitions_select_final = 1"
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


def keys_of(table: str) -> str:
    """A key filter: the ids that occur in `table`."""
    return f"id in (select id from {table})"


def _only(keys: str | None, prefix: str = "where") -> str:
    return f" {prefix} {keys}" if keys else ""


def bad_keys(table: str, keys: str | None = None) -> str:
    """Keys or (key, version) pairs whose sum(sign) is outside {0, 1} (among the `keys` filter, if given)."""
    return f"""
select
  (select count() from (select id, sum(sign) as s from {table}{_only(keys)} group by id) where s not in (0, 1)),
  (select count() from (select id, _version, sum(sign) as s from {table}{_only(keys)} group by id, _version)
   where s not in (0, 1))
"""


def live_rows(table: str) -> str:
    return f"select sum(sign) from {table}"


_ROW_HASH = "cityHash64(id, Department, metric1, metric2, _version)"


def live_checksum_final(table: str, keys: str | None = None) -> str:
    return (
        f"select count(), sum({_ROW_HASH}) from {table} final where sign = 1{_only(keys, 'and')} "
        "settings do_not_merge_across_partitions_select_final = 1"
    )


def live_checksum_group_by(table: str, keys: str | None = None) -> str:
    """The same live rows found without FINAL: per key, the sign-weighted hash of its rows."""
    return (
        f"select count(), sum(toUInt64(h)) from (select id, sum(sign) as s, "
        f"sum(toInt128(sign) * {_ROW_HASH}) as h from {table}{_only(keys)} group by id) where s > 0"
    )


def expected_checksum(base: str, events: str, only_batch_keys: bool = False) -> str:
    """Base rows with every batch key replaced by its newest event: what an UPSERT must leave."""
    newest = f"select {COLUMN_NAMES} from {events} order by _version desc limit 1 by id"
    if only_batch_keys:
        return f"select count(), sum({_ROW_HASH}) from ({newest})"
    return f"""
select count(), sum({_ROW_HASH}) from (
  select {COLUMN_NAMES} from {base} where id not in (select id from {events})
  union all
  {newest}
)
"""
