"""SQL text of the bench: data generators, the report queries, the expected state.

Data follows the reference article's speed test: N base rows with fresh keys,
and batches whose keys come from a pool of B existing keys, one in each run of
N/B consecutive ids, so about 63% of a batch's keys are distinct (the article's
`(rand() % 1E6) * 100` at N=100M, B=1M). Where in its run a pool key sits is
the key distribution (DISTRIBUTIONS): anywhere (`spread`: every partition of
`id % 20`), at its start as in the article (`article`: the ids are multiples
of N/B, so one partition at N=100M, two at 10M), or anywhere with 10% of a
batch's keys taking 90% of its events (`hot`). Values come from cityHash64 of
(seed, row number) instead of rand(), so every approach sees the same batch.
Batch versions are the row number + 1: newer than the base rows (version 0)
and distinct, so duplicate keys in a batch have one deterministic winner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DATA_COLUMNS = ("Department", "metric1", "metric2")
# The layout of the vcmt models; every anchor's table gets the same.
PARTITION, GRANULARITY = "id % 20", 4096
_TYPES = ("String", "UInt32", "Float32")


def columns(nullable: bool = False) -> str:
    """The article's schema; `nullable` data columns for the `coalesce` model and (D)."""
    data = ", ".join(f"{c} {f'Nullable({t})' if nullable else t}" for c, t in zip(DATA_COLUMNS, _TYPES, strict=True))
    return f"id Int32, {data}, _version UInt64, sign Int8"


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


@dataclass(frozen=True)
class Distribution:
    """How a batch draws its keys from the pool (the module's docstring)."""

    key: str
    label: str


SPREAD = Distribution("spread", "keys spread over every partition")
ARTICLE = Distribution("article", "the article's keys: multiples of N/B, in one or two partitions")
HOT = Distribution("hot", "hot keys: 10% of the keys take 90% of the events, spread over every partition")
DISTRIBUTIONS = (SPREAD, ARTICLE, HOT)


def batch_rows(events: int, pool: int, step: int, seed: int, distribution: Distribution = SPREAD) -> str:
    """`events` upserts of keys drawn from `pool` existing keys, one in each run of `step` ids, as
    `distribution` draws them."""
    drawn = f"cityHash64({seed}, 1, number) % {pool}"
    if distribution is HOT:
        # A batch of E events on K keys whose hottest K/10 take 0.9 E: about E/90 hot keys, spread over the
        # pool, and every other event on a key of the whole pool (nearly always a distinct one).
        hot = max(events // 90, 1)
        drawn = (f"if(cityHash64({seed}, 5, number) % 10 < 9, "
                 f"(cityHash64({seed}, 1, number) % {hot}) * {max(pool // hot, 1)}, {drawn})")  # fmt: skip
    x = f"({drawn})"
    at = "0" if distribution is ARTICLE else f"cityHash64({x}) % {step}"
    return (
        f"select toInt32({x} * {step} + {at}) as id, {_values(seed)}, "
        f"toUInt64(number + 1) as _version, toInt8(1) as sign from numbers({events})"
    )


def partial_rows(batch: str) -> str:
    """The batch as partial updates: each data value left out (NULL) with probability 1/3."""
    nulls = ", ".join(f"if(cityHash64(_version, {i}) % 3 = 0, null, {c}) as {c}" for i, c in enumerate(DATA_COLUMNS))
    return f"select id, {nulls}, _version, sign from {batch}"


# FINAL keeps `where sign = 1`: it is applied after collapsing, so count() is a
# count of live rows by construction (docs/design.md#measured-facts, fact 4).
def report_final(table: str) -> str:
    return (
        f"select Department, count(), sum(metric1) from {table} final where sign = 1 "
        "group by Department order by Department settings do_not_merge_across_partitions_select_final = 1"
    )


def report_live(table: str, final: bool = False) -> str:
    """The report query on a table that keeps one row per key (after FINAL, if `final`), `sign` its
    soft-delete column."""
    return (
        f"select Department, count(), sum(metric1) from {table}{' final' if final else ''} where sign = 1 "
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


# A statement's own `log_comment` setting: a vcmt load names itself there (macros/vcmt/ddl/settings.sql
# `_holder_settings`), which overrides the session's.
_LOG_COMMENT = re.compile(r"\blog_comment\s*=\s*'(?:[^'\\]|\\.)*'", re.IGNORECASE)


def tagged(statement: str, tag: str) -> str:
    """`statement` replayed under `tag`: its own `log_comment` setting (a captured vcmt load's name) becomes `tag`,
    so that query_log finds it by the tag the bench gave it, as it finds every other statement."""
    return _LOG_COMMENT.sub(lambda _: f"log_comment = {literal(tag)}", statement)


def literal(text: str) -> str:
    """`text` as a ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# The transform's lookup of the old rows, as the engine stores the view's query (macros/vcmt/ddl/transform.sql).
_FINAL_LOOKUP = re.compile(
    r"\(SELECT id, Department, metric1, metric2, _version, toUInt8\(1\) AS _vcmt_found FROM (?P<target>\S+) FINAL "
    r"PREWHERE id IN \((?P<keys>SELECT id FROM \S+)\) WHERE sign = 1\)"
)


def lookup_variant(transform: str, lookup: str) -> str:
    """The stored transform query with its lookup rewritten as the `--shapes` variant `lookup`: `argmax`, each
    key's newest row by version with no FINAL, live when its signs add up to 1; `join`, the target's live rows
    joined with the batch's keys instead of filtered by IN. Both find the rows FINAL finds on a table that keeps
    the invariants (docs/design.md#invariants)."""
    found = _FINAL_LOOKUP.search(transform)
    if not found:
        raise ValueError(f"the transform's lookup was not found in: {transform}")
    target, keys = found.group("target"), found.group("keys")
    data = ", ".join(DATA_COLUMNS)
    if lookup == "argmax":
        newest = ", ".join(f"argMax({c}, _version) AS {c}" for c in DATA_COLUMNS)
        shape = (f"(SELECT id, {data}, _vcmt_v AS _version, toUInt8(1) AS _vcmt_found FROM (SELECT id, {newest}, "
                 f"max(_version) AS _vcmt_v FROM {target} PREWHERE id IN ({keys}) GROUP BY id "
                 "HAVING sum(sign) > 0))")  # fmt: skip
    elif lookup == "join":
        live = ", ".join(f"_vcmt_t.{c} AS {c}" for c in ("id", *DATA_COLUMNS, "_version"))
        shape = (f"(SELECT {live}, toUInt8(1) AS _vcmt_found FROM {target} AS _vcmt_t FINAL INNER JOIN ({keys}) "
                 "AS _vcmt_b USING (id) WHERE _vcmt_t.sign = 1)")  # fmt: skip
    else:
        raise ValueError(f"unknown lookup variant {lookup!r}")
    return transform[: found.start()] + shape + transform[found.end() :]


def key_rows_read(table: str, events: str, one_thread: bool = False) -> str:
    """Every column of the batch keys' stored rows, read without FINAL and written nowhere: what an
    exact lookup in `table` reads at the least, whatever its shape (the transform's lookup also
    collapses the rows it reads and writes two rows per key). `one_thread`: as the engine runs a
    materialized view's query, the transform's among them: on the thread that inserts the block."""
    names = ", ".join(("id", *DATA_COLUMNS, "_version", "sign"))
    one = " settings max_threads = 1" if one_thread else ""
    return f"select count(), sum(cityHash64({names})) from {table} where id in (select id from {events}){one}"


def pair_rows_write(table: str, events: str) -> str:
    """What the loader writes for the batch, with no lookup: each key's newest event (the batch folded, as
    the loader folds it) as a cancel row of the base version (0; its values copied from the event, which
    costs the same) and as the new state, in key order, with `optimize_on_insert` off as the loader pins
    it: the least a write to the model's table, projection included, costs."""
    names = ", ".join(("id", *DATA_COLUMNS))
    return (
        f"insert into {table} select {names}, if(_vcmt_s = -1, toUInt64(0), _version), _vcmt_s "
        f"from (select * from {events} order by id, _version desc limit 1 by id) array join [-1, 1] as _vcmt_s "
        "settings optimize_on_insert = 0"
    )


def expected_checksum(base: str, events: str, row_hash: str, only_batch_keys: bool) -> str:
    """Base rows with every batch key replaced by its newest event: what an UPSERT must leave
    (only the batch's keys, if `only_batch_keys`). `row_hash` is the invariants' hash of a live
    row, so the result compares with theirs."""
    names = ", ".join(("id", *DATA_COLUMNS, "_version", "sign"))
    newest = f"select {names} from {events} order by _version desc limit 1 by id"
    if only_batch_keys:
        return f"select count(), sum({row_hash}) from ({newest})"
    return (
        f"select count(), sum({row_hash}) from (select {names} from {base} "
        f"where id not in (select id from {events}) union all {newest})"
    )
