"""Hot keys: a key's events between two deletes fold into one INSERT (docs/design.md#hot-keys)."""

from __future__ import annotations

import random
import re
import time

import pytest

from tests.materialization.scenario import Scenario, expected_rows, oracle_events
from vcmt_lab.oracle import Oracle

# The same tests on the embedded engine and on a served node over HTTP (tests/conftest.py).
pytestmark = pytest.mark.engines("chdb", "http")

POLICIES = ("sum", "greatest", "least", "coalesce", "keep", "replace")
COLS = {"id": "Int32", **{f"x_{p}": "Nullable(Int64)" for p in POLICIES}, "_version": "UInt64", "sign": "Int8"}
HOT_EVENTS = 10_000
HOT_DELETES = 4


def _hot_batch(rng: random.Random, first_version: int, events: int = HOT_EVENTS) -> tuple[list[tuple], int]:
    """`events` (10,000) events on key 1 (versions shuffled, some NULLs, redeliveries, some older than the
    stored row) with HOT_DELETES deletes between, plus a few cold keys."""
    versions = list(range(first_version, first_version + events))
    deletes = set(rng.sample(versions[len(versions) // 10 :], HOT_DELETES))
    rows = []
    for v in versions:
        values = [None if rng.random() < 0.1 else rng.randint(-1000, 1000) for _ in POLICIES]
        rows.append((1, *values, v, -1 if v in deletes else 1))
    rows += rng.sample(rows, 20)  # exact redeliveries
    rows += [(k, *[rng.randint(0, 9) for _ in POLICIES], first_version + k, 1) for k in range(2, 6)]
    rng.shuffle(rows)
    return rows, len(deletes)


def test_hot_key_under_every_builtin_policy_folds_to_two_rounds(project):
    s = Scenario(project, COLS, {"unique_key": "id", "merge": {f"x_{p}": p for p in POLICIES}})
    oracle = Oracle([f"x_{p}" for p in POLICIES], {f"x_{p}": p for p in POLICIES})
    rng = random.Random(12)
    first = [(1, *[5] * len(POLICIES), 5_000, 1), (2, *[None] * len(POLICIES), 1, 1)]
    s.run_batch(first)
    oracle.apply_batch(oracle_events(first, list(COLS), ["id"]))

    # Versions 1..10,000 on a key stored at 5,000: the first half is stale and must not be folded in.
    rows, deletes = _hot_batch(rng, 1)
    started = time.monotonic()
    run = s.run_batch(rows)
    seconds = time.monotonic() - started
    oracle.apply_batch(oracle_events(rows, list(COLS), ["id"]))
    assert s.final_rows() == expected_rows(oracle, list(COLS), ["id"])
    rounds = int(re.search(r"in (\d+) rounds?\b", run.log).group(1))
    assert rounds == 2, f"{rounds} rounds for a hot key with {deletes} deletes"
    print(f"hot key: {len(rows)} events, {rounds} rounds, dbt run {seconds:.2f}s")

    # Again on top of the new state, all newer: no stale events.
    rows, deletes = _hot_batch(rng, 20_000, events=1_000)
    s.run_batch(rows)
    oracle.apply_batch(oracle_events(rows, list(COLS), ["id"]))
    assert s.final_rows() == expected_rows(oracle, list(COLS), ["id"])
    s.assert_invariants()


def test_sql_policy_and_float_sum_keep_one_round_per_event(project):
    """Only associative policies fold: SQL policies and float sums apply event by event; a replay is a no-op."""
    cols = {"id": "Int32", "a": "Int64", "f": "Float64", "_version": "UInt64", "sign": "Int8"}
    s = Scenario(project, cols, {"unique_key": "id", "merge": {"a": "{old} * 2 + {new}", "f": "sum"}})
    rows = [(1, v, 0.1 * v, v, 1) for v in range(1, 8)]
    run = s.run_batch(rows)
    assert "in 7 rounds" in run.log
    oracle = Oracle(["a", "f"], {"a": lambda old, new: old * 2 + new, "f": "sum"})
    oracle.apply_batch(oracle_events(rows, list(cols), ["id"]))
    assert s.final_rows() == expected_rows(oracle, list(cols), ["id"])
    replay = s.run_batch(rows)  # every event is stale now: nothing changes
    assert s.final_rows() == expected_rows(oracle, list(cols), ["id"])
    assert " 0 rows written" in replay.log
