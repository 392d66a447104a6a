"""Seeded streams of change events: what a CDC feed really delivers.

Each stream has a source history (inserts, updates, deletes, re-inserts after
a delete; versions strictly increasing per key, sometimes starting at 0) and
a delivery of it: redelivered duplicates, events late within a window, random
batch cuts, and random merge control between batches.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from vcmt_lab.oracle import Event


@dataclass(frozen=True)
class ModelSpec:
    """A vcmt_upsert model shape under test."""

    name: str
    keys: tuple[str, ...]
    columns: dict[str, str]
    merge: dict[str, str] = field(default_factory=dict)
    delete_mode: str = "versioned"
    insert_settings: dict[str, int] = field(default_factory=dict)
    # CDC shapes (docs/design.md#truncates, #unsent-columns): a `_op` column whose 't' marks a truncate, and an
    # `_unavailable` column listing the columns an event did not send.
    truncate_when: str | None = None
    unavailable_column: str | None = None
    # Partitioned targets (issue 41): a partition that is a function of the key, skip indexes (`indexes`), and
    # a sorting key led by the partition expression, so lookups go by that prefix of it (`order_by`).
    partition_by: str | None = None
    indexes: tuple[dict[str, str], ...] = ()
    order_by: tuple[str, ...] = ()

    @property
    def all_columns(self) -> dict[str, str]:
        key_types = {"tenant": "Int32", "id": "Int64", "_k0": "Int64"}
        return {**{k: key_types[k] for k in self.keys}, **self.columns, "_version": "UInt64", "sign": "Int8"}


MODEL_SPECS: tuple[ModelSpec, ...] = (
    ModelSpec("fz_replace", ("id",), {"a": "Nullable(Int64)", "b": "String"}),
    ModelSpec(
        "fz_policies",
        ("id",),
        {
            "g": "Nullable(Int64)",
            "l": "Nullable(Int64)",
            "s": "Nullable(Int64)",
            "c": "Nullable(String)",
            "k": "Nullable(Int64)",
            "e": "Nullable(Int64)",
        },
        {"g": "greatest", "l": "least", "s": "sum", "c": "coalesce", "k": "keep", "e": "{old} * 2 + {new}"},
    ),
    # Only built-in policies: a key's events fold to at most two (docs/design.md#hot-keys).
    ModelSpec(
        "fz_folded",
        ("id",),
        {
            "g": "Nullable(Int64)",
            "l": "Nullable(Int32)",
            "s": "Nullable(Int64)",
            "c": "Nullable(String)",
            "k": "Nullable(Int64)",
            "r": "Nullable(Int64)",
        },
        {"g": "greatest", "l": "least", "s": "sum", "c": "coalesce", "k": "keep"},
    ),
    # Tiny insert blocks: every round spans many blocks, and the rule must hold across them.
    ModelSpec(
        "fz_composite",
        ("tenant", "id"),
        {"a": "Nullable(Int64)", "b": "String"},
        {"a": "sum"},
        insert_settings={"max_block_size": 7, "min_insert_block_size_rows": 7, "max_insert_block_size": 7},
    ),
    # Column names that 0.1.0's transform used as its own aliases.
    ModelSpec(
        "fz_hostile", ("_k0",), {"_nv": "Nullable(Int64)", "_s": "String", "_ov": "Nullable(Int64)"}, {"_nv": "sum"}
    ),
    ModelSpec("fz_unconditional", ("id",), {"a": "Nullable(Int64)", "b": "String"}, delete_mode="unconditional"),
    ModelSpec(
        "fz_unconditional_merge",
        ("tenant", "id"),
        {"a": "Nullable(Int64)", "c": "Nullable(String)"},
        {"a": "sum", "c": "coalesce"},
        delete_mode="unconditional",
    ),
    ModelSpec(
        "fz_truncate",
        ("id",),
        {"a": "Nullable(Int64)", "b": "String", "_op": "String"},
        {"a": "sum"},
        truncate_when="_op = 't'",
    ),
    ModelSpec(
        "fz_unsent",
        ("id",),
        {"a": "Nullable(Int64)", "body": "Nullable(String)", "_unavailable": "Array(String)"},
        {"a": "sum"},
        unavailable_column="_unavailable",
    ),
    # Partitioned by the key, with a bloom filter on it and the partition expression between the key's columns
    # in the sorting key: the fold, truncates, and lookups by a prefix of the sorting key that skip granules.
    ModelSpec(
        "fz_partitioned",
        ("tenant", "id"),
        {"a": "Nullable(Int64)", "b": "String", "_op": "String"},
        truncate_when="_op = 't'",
        partition_by="id % 5",
        indexes=({"name": "key_bf", "definition": "id TYPE bloom_filter(0.01) GRANULARITY 1"},),
        order_by=("tenant", "id % 5", "id"),
    ),
    # Partitioned by the key and sorted by the partition first, with a bloom filter on the key, in rounds with
    # unsent columns; tiny granules, so a lookup spans many.
    ModelSpec(
        "fz_partitioned_rounds",
        ("id",),
        {"a": "Nullable(Int64)", "body": "Nullable(String)", "_unavailable": "Array(String)"},
        {"a": "sum"},
        unavailable_column="_unavailable",
        partition_by="intDiv(id, 40) % 7",
        indexes=({"name": "key_bf", "definition": "id TYPE bloom_filter GRANULARITY 2"},),
        order_by=("intDiv(id, 40) % 7", "id"),
    ),
)
# What a truncate is, and what an event did not send, in the fuzz's CDC shapes.
TRUNCATE_OP = "t"
UNSENT_SHARE = 0.3
TRUNCATE_SHARE = 0.01

MERGE_ACTIONS = ("none", "none", "stop_merges", "start_merges", "optimize")
# A stream's `virtual_shards`: half the streams load on 2 or 3 concurrent streams of keys.
VIRTUAL_SHARDS = (1, 1, 2, 3)


def python_policy(policy: str) -> Any:
    """The oracle's form of a policy: built-ins by name, the custom expression as a function."""
    if policy == "{old} * 2 + {new}":
        return lambda old, new: None if old is None or new is None else old * 2 + new
    return policy


@dataclass
class Stream:
    seed: int
    spec: ModelSpec
    batches: list[list[dict[str, Any]]]
    actions: list[str]
    # The model's `virtual_shards`: its loads run as that many concurrent streams (docs/design.md#virtual-shards).
    virtual_shards: int = 1

    @property
    def events(self) -> int:
        return sum(len(b) for b in self.batches)


def _value(rng: random.Random, column: str, ch_type: str) -> Any:
    if ch_type.startswith("Nullable") and rng.random() < 0.25:
        return None
    if "String" in ch_type:
        return rng.choice(["x", "y", "z", "w", ""])
    return rng.randint(-20, 100)


def generate_stream(seed: int, spec: ModelSpec, events: int, max_batches: int | None = None) -> Stream:
    """A seed's stream of `events` events (before redeliveries) for `spec`, delivered in up to 21 batches, or
    `max_batches`: the same events in the same order, cut into fewer batches."""
    rng = random.Random(seed)
    # Mostly wide key spaces; one stream in eight hammers a handful of keys (hundreds of versions each).
    key_count = rng.choice([3, 20, 20, 100, 100, max(5, events // 4), max(5, events // 4), max(5, events // 4)])
    tenants = rng.choice([1, 2, 3])
    keys = [(t, i) if len(spec.keys) == 2 else (i,) for t in range(tenants) for i in range(key_count)]
    live: dict[tuple, bool] = {}
    history: list[dict[str, Any]] = []
    version = rng.choice([0, 1, 100])
    while len(history) < events:
        key = rng.choice(keys)
        deleting = live.get(key, False) and rng.random() < 0.2
        row = dict(zip(spec.keys, key, strict=True))
        if deleting:
            row.update({c: _value(rng, c, t) for c, t in spec.columns.items()})
            # Unconditional deletes often carry a meaningless version (the article uses 0).
            row["_version"] = 0 if spec.delete_mode == "unconditional" and rng.random() < 0.5 else version
            row["sign"] = -1
            live[key] = False
        else:
            row.update({c: _value(rng, c, t) for c, t in spec.columns.items()})
            row["_version"] = version
            row["sign"] = 1
            live[key] = True
        if rng.random() < 0.03:  # a delete for a key never seen (out of order or foreign)
            row = {**row, "sign": -1}
        if spec.truncate_when:
            row["_op"] = "d" if row["sign"] < 0 else "u"
            if rng.random() < TRUNCATE_SHARE:  # the table truncated: every row at or below this version goes
                row = {**row, "_op": TRUNCATE_OP, "sign": 1}
                live = {}
        if spec.unavailable_column:
            unsent = []
            if row["sign"] > 0 and live.get(key) and rng.random() < UNSENT_SHARE:
                data = [c for c in spec.columns if c != spec.unavailable_column]
                unsent = sorted(rng.sample(data, rng.randint(1, len(data))))
                row.update(dict.fromkeys(unsent))  # Debezium sends a placeholder; the value is ignored
            row[spec.unavailable_column] = unsent
        history.append(row)
        version += rng.choice([1, 1, 1, 2, 7])

    late_window = rng.choice([0, 3, 20])
    dup_share = rng.choice([0.0, 0.05, 0.2])
    deliveries: list[tuple[float, dict[str, Any]]] = []
    for i, row in enumerate(history):
        deliveries.append((i + rng.uniform(0, late_window), row))
        if rng.random() < dup_share:
            deliveries.append((i + rng.uniform(0, late_window * 3 + 5), dict(row)))
    ordered = [row for _, row in sorted(deliveries, key=lambda d: d[0])]

    cut_count = min(len(ordered) - 1, rng.choice([1, 3, 8, 20]), *([max_batches - 1] if max_batches else []))
    cuts = sorted(rng.sample(range(1, len(ordered)), k=cut_count))
    batches = [ordered[a:b] for a, b in zip([0, *cuts], [*cuts, len(ordered)], strict=True)]
    actions = [rng.choice(MERGE_ACTIONS) for _ in batches]
    # Drawn apart from the stream's own generator, so a seed's events do not depend on it.
    shards = random.Random(f"shards/{seed}").choice(VIRTUAL_SHARDS)
    return Stream(seed=seed, spec=spec, batches=batches, actions=actions, virtual_shards=shards)


def is_truncate(row: dict[str, Any], spec: ModelSpec) -> bool:
    return bool(spec.truncate_when) and row["_op"] == TRUNCATE_OP


def to_events(rows: list[dict[str, Any]], spec: ModelSpec) -> list[Event]:
    return [
        Event(
            key=tuple(r[k] for k in spec.keys),
            version=r["_version"],
            sign=r["sign"],
            values={c: r[c] for c in spec.columns},
            unavailable=frozenset(r[spec.unavailable_column]) if spec.unavailable_column else frozenset(),
            truncate=is_truncate(r, spec),
        )
        for r in rows
    ]
