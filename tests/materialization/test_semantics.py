"""Per-key semantics of vcmt_upsert (docs/design.md#per-key-semantics), on the real chDB engine."""

from __future__ import annotations

import datetime
import json
import random
import re

import pytest

from tests.materialization.scenario import Scenario, expected_rows, oracle_events
from vcmt_lab.oracle import Oracle

# The embedded engine; over HTTP too under VCMT_ENGINE_MATRIX=1 (tests/conftest.py). A served node computes the
# same SQL: what HTTP carries of a load is proven by the fuzz's streams over HTTP (tests/fuzz), the lifecycle's
# and the external writer's tests there, and test_server_parity.
pytestmark = pytest.mark.engines("chdb", matrix=("http",))
# One dbt project per module and engine, a model `m` of its own per test (tests/conftest.py).
SHARE_PROJECT = True

EX3 = {"id": "Int32", "metric1": "UInt32", "metric2": "UInt32", "_version": "UInt64", "sign": "Int8"}


def test_reference_example3_versioned_ignores_stale_delete(project, m):
    """The article's Example3 steps; with versioned deletes a version-0 delete of a v1 row is stale."""
    s = Scenario(project, EX3, {"unique_key": "id"}, name=m)
    s.run_batch([(1, 1, 1, 1, 1), (2, 2, 2, 1, 1)])
    assert s.final_rows() == [(1, 1, 1, 1), (2, 2, 2, 1)]
    s.run_batch([(1, 3, 1, 1, 1), (2, 3, 2, 1, 1)])  # same versions: duplicates, skipped
    assert s.final_rows() == [(1, 1, 1, 1), (2, 2, 2, 1)]
    s.run_batch([(2, 2, 2, 0, -1)])
    assert s.final_rows() == [(1, 1, 1, 1), (2, 2, 2, 1)]
    s.run_batch([(1, 1, 1, 0, -1), (1, 3, 3, 2, 1)])
    assert s.final_rows() == [(1, 3, 3, 2), (2, 2, 2, 1)]
    s.assert_invariants()


def test_reference_example3_unconditional_matches_article(project, m):
    """delete_mode='unconditional' reproduces the article's states step by step."""
    s = Scenario(project, EX3, {"unique_key": "id", "delete_mode": "unconditional"}, name=m)
    s.run_batch([(1, 1, 1, 1, 1), (2, 2, 2, 1, 1)])
    s.run_batch([(1, 3, 1, 1, 1), (2, 3, 2, 1, 1)])
    assert s.final_rows() == [(1, 1, 1, 1), (2, 2, 2, 1)]
    s.run_batch([(2, 2, 2, 0, -1)])
    assert s.final_rows() == [(1, 1, 1, 1)]
    s.run_batch([(1, 1, 1, 0, -1), (1, 3, 3, 2, 1)])
    assert s.final_rows() == [(1, 3, 3, 2)]
    s.assert_invariants()


def test_reference_example4_projection_tracks_updates_and_deletes(project, m):
    """Example4: a DateTime64 version and an aggregating projection by dim1 stay exact."""
    cols = {
        "id": "Int32",
        "metric1": "UInt32",
        "metric2": "UInt32",
        "dim1": "String",
        "updated_at": "DateTime64(3)",
        "sign": "Int8",
    }
    s = Scenario(
        project,
        cols,
        {
            "unique_key": "id",
            "version": "updated_at",
            "projections": [{"name": "by_dim1", "query": "select dim1, sum(metric1 * sign) group by dim1"}],
        },
        name=m,
    )
    proj = f"select dim1, sum(metric1 * sign) from {m} group by dim1 order by dim1"

    def by_dim1():
        return project.query(proj, optimize_use_projections=1, force_optimize_projection=1)

    s.run_batch([(1, 1, 1, "d", "2024-01-01 00:00:01", 1), (2, 2, 2, "d", "2024-01-01 00:00:01", 1)])
    assert by_dim1() == [("d", 3)]
    s.run_batch([(2, 2, 2, "", "2024-01-01 00:00:02", -1)])
    assert by_dim1() == [("d", 1)]
    s.run_batch([(1, 1, 1, "", "2024-01-01 00:00:03", -1), (1, 3, 3, "d", "2024-01-01 00:00:04", 1)])
    assert by_dim1() == [("d", 3)]
    assert [r[:4] for r in s.final_rows()] == [(1, 3, 3, "d")]
    s.assert_invariants()


def test_reference_example5_greatest_and_coalesce_combine_rows(project, m):
    """Example5: greatest() and ifNull(new, old) rebuilt with merge policies."""
    cols = {"id": "Int32", "metric1": "UInt32", "metric2": "Nullable(UInt32)", "_version": "UInt64"}
    s = Scenario(project, cols, {"unique_key": "id", "merge": {"metric1": "greatest", "metric2": "coalesce"}}, name=m)
    s.run_batch([(1, 0, None, 1), (2, 0, None, 1)])
    s.run_batch([(1, 1, None, 2), (2, 2, None, 2)])
    assert s.final_rows() == [(1, 1, None, 2), (2, 2, None, 2)]
    s.run_batch([(1, 0, 11, 3), (2, 0, 12, 3)])
    assert s.final_rows() == [(1, 1, 11, 3), (2, 2, 12, 3)]
    s.assert_invariants()


def test_reference_example6_composite_key_upserts_per_tenant(project, m):
    """Example6: (tenant_id, id) keys; the same id in two tenants are different rows."""
    cols = {"id": "Int64", "tenant_id": "Int32", "metric1": "UInt32", "_version": "UInt64", "sign": "Int8"}
    s = Scenario(project, cols, {"unique_key": ["tenant_id", "id"], "order_by": ["tenant_id", "id"]}, name=m)
    s.run_batch([(1, 1, 10, 1, 1), (1, 2, 20, 1, 1), (2, 1, 30, 1, 1)])
    s.run_batch([(1, 2, 21, 2, 1), (2, 1, 0, 2, -1), (1, 1, 99, 1, 1)])
    assert s.final_rows(order="tenant_id, id") == [(1, 1, 10, 1), (1, 2, 21, 2)]
    s.assert_invariants()


def test_version_zero_first_event_is_accepted(project, m):
    """A key with no state accepts version 0 (the article drops it)."""
    s = Scenario(project, EX3, {"unique_key": "id"}, name=m)
    s.run_batch([(7, 5, 5, 0, 1)])
    assert s.final_rows() == [(7, 5, 5, 0)]


def test_stale_delete_keeps_newer_row(project, m):
    """A versioned delete older than the live row is skipped."""
    s = Scenario(project, EX3, {"unique_key": "id"}, name=m)
    s.run_batch([(1, 1, 1, 5, 1)])
    run = s.run_batch([(1, 0, 0, 4, -1)])
    assert s.final_rows() == [(1, 1, 1, 5)]
    assert "1 skipped" in run.log


@pytest.mark.parametrize("mode", ["versioned", "unconditional"])
def test_late_duplicate_after_delete_and_optimize_does_not_resurrect(project, m, mode):
    """After a delete and OPTIMIZE FINAL collapsed the pair, a redelivered upsert stays deleted."""
    s = Scenario(project, EX3, {"unique_key": "id", "delete_mode": mode}, name=m)
    s.run_batch([(1, 1, 1, 3, 1)])
    s.run_batch([(1, 1, 1, 3 if mode == "versioned" else 0, -1)])
    project.command(f"optimize table {m} final")
    assert project.scalar(f"select count() from {m}") == 0
    s.run_batch([(1, 1, 1, 3, 1)])
    s.run_batch([(1, 1, 1, 2, 1)])
    assert s.final_rows() == []
    s.run_batch([(1, 8, 8, 4, 1)])
    assert s.final_rows() == [(1, 8, 8, 4)]
    s.assert_invariants()


def test_delete_arriving_before_insert_blocks_older_insert(project, m):
    """Out of order: a delete v5 for an unseen key, then its insert v3, leaves no row."""
    s = Scenario(project, EX3, {"unique_key": "id"}, name=m)
    s.run_batch([(1, 0, 0, 5, -1)])
    s.run_batch([(1, 1, 1, 3, 1)])
    assert s.final_rows() == []
    s.run_batch([(1, 2, 2, 6, 1)])
    assert s.final_rows() == [(1, 2, 2, 6)]


@pytest.mark.parametrize("merge", [{}, {"metric1": "sum"}], ids=["folded", "hot_key_fold"])
def test_replay_of_same_input_is_noop(project, m, merge):
    """Running the same batch again changes nothing (both folds; rounds: test_hot_keys)."""
    s = Scenario(project, EX3, {"unique_key": "id", "merge": merge}, name=m)
    rows = [(i % 5, i, i, i, -1 if i % 7 == 0 else 1) for i in range(1, 40)]
    s.run_batch(rows)
    before = project.query(f"select * from {m} order by all")
    run = s.run_batch(rows)
    assert project.query(f"select * from {m} order by all") == before
    assert " 0 rows written" in run.log


def test_no_sign_column_treats_every_event_as_upsert(project, m):
    """Without a sign column in the SELECT every event is an upsert; the target still has sign."""
    cols = {"id": "Int32", "v": "String", "_version": "UInt32"}
    s = Scenario(project, cols, {"unique_key": "id"}, name=m)
    s.run_batch([(1, "a", 1), (1, "b", 2), (2, "c", 1)])
    assert project.query(f"select id, v, _version from {m} final where sign = 1 order by id") == [
        (1, "b", 2),
        (2, "c", 1),
    ]


LOADS = (
    "events, upserts, deletes, ignored_below_truncate, superseded, fed, inserted, updated, deleted, skipped, "
    "truncates, truncated_rows, rows_written"
)


def _last_load(project, m: str) -> dict:
    names = [n.strip() for n in LOADS.split(",")]
    return dict(
        zip(names, project.query(f"select {LOADS} from {m}__loads order by loaded_at desc limit 1")[0], strict=True)
    )


def test_run_report_counts_inserted_updated_deleted_skipped(project, m):
    """The run line, the model's result in run_results.json and `m__loads` say what was done."""
    s = Scenario(project, EX3, {"unique_key": "id"}, name=m)
    s.run_batch([(1, 1, 1, 1, 1), (2, 2, 2, 1, 1), (3, 3, 3, 1, 1)])
    project.write_json = True  # this run's run_results.json
    try:
        run = s.run_batch([(1, 9, 9, 2, 1), (1, 8, 8, 3, 1), (2, 0, 0, 2, -1), (3, 3, 3, 1, 1), (4, 4, 4, 1, 1)])
    finally:
        project.write_json = False
    said = (
        "5 events read (4 upserts, 1 delete): 1 superseded in the batch, 4 sent to the target in 1 round (at most one "
        "event per key per round): "
        "1 inserted, 1 updated, 1 deleted, 1 skipped (stale, duplicate, or a delete of a key with no live row); "
        "4 rows written"
    )
    assert f"vcmt_upsert {m}: {said}" in run.log
    # The whole report, not a short status: dbt-clickhouse's AdapterResponse has no other field it could go in.
    results = json.loads((project.root / "target" / "run_results.json").read_text())["results"]
    (result,) = [r for r in results if r["unique_id"].endswith(f".{m}")]
    assert result["message"] == said
    assert result["adapter_response"] == {"_message": said, "code": "VCMT_UPSERT", "rows_affected": 4}
    last = project.query(
        "select events, upserts, deletes, inserted, updated, deleted, skipped, rows_written "
        f"from {m}__loads order by loaded_at desc limit 1"
    )
    assert last == [(5, 4, 1, 1, 1, 1, 1, 4)]


@pytest.mark.parametrize("merge", [{}, {"metric1": "sum"}], ids=["fold", "rounds"])
def test_run_report_numbers_add_up_with_every_kind_of_event(project, m, merge):
    """0.2: "applied" counted skipped events, truncated rows were counted as deletes, events ignored under a
    truncate were in no total, and an empty run left no row in `m__loads`."""
    cols = {**EX3, "_op": "String"}
    s = Scenario(project, cols, {"unique_key": "id", "truncate_when": "_op = 't'", "merge": merge}, name=m)
    s.run_batch([(k, k, k, 10, 1, "c") for k in range(1, 7)])
    run = s.run_batch(
        [
            (1, 1, 1, 11, 1, "u"),
            (1, 1, 1, 12, 1, "u"),  # superseded, then updated
            (2, 0, 0, 13, -1, "d"),  # deleted
            (3, 3, 3, 10, 1, "c"),
            (3, 3, 3, 10, 1, "c"),  # an exact duplicate, then stale
            (7, 7, 7, 11, 1, "c"),  # inserted
            (8, 8, 8, 11, 1, "c"),
            (8, 0, 0, 12, -1, "d"),  # an insert superseded by its delete
            (0, 0, 0, 5, 1, "t"),  # a truncate: rows at or below version 5 go
            (4, 4, 4, 3, 1, "u"),
            (5, 0, 0, 4, -1, "d"),  # at or below the truncate: ignored
        ]
    )
    n = _last_load(project, m)
    assert n == {
        "events": 10,
        "upserts": 7,
        "deletes": 3,
        "ignored_below_truncate": 2,
        "superseded": 3,
        "fed": 5,
        "inserted": 1,
        "updated": 1,
        "deleted": 1,
        "skipped": 2,
        "truncates": 1,
        "truncated_rows": 0,
        "rows_written": 4,
    }
    assert n["events"] == n["upserts"] + n["deletes"] == n["ignored_below_truncate"] + n["superseded"] + n["fed"]
    assert n["fed"] == n["inserted"] + n["updated"] + n["deleted"] + n["skipped"]
    assert (
        "10 events read (7 upserts, 3 deletes): 2 ignored at or below a truncate, 3 superseded in the batch, "
        "5 sent to the target in" in run.log
    )
    assert "1 truncate: 0 rows at or below version 5 deleted; 4 rows written" in run.log

    run = s.run_batch([(0, 0, 0, 11, 1, "t"), (6, 6, 6, 11, 1, "u")])  # a truncate that removes live rows
    n = _last_load(project, m)
    assert (n["events"], n["ignored_below_truncate"], n["fed"], n["deleted"], n["truncated_rows"]) == (1, 1, 0, 0, 5)
    assert n["rows_written"] == n["inserted"] + 2 * n["updated"] + n["deleted"] + n["truncated_rows"] == 5
    assert "1 truncate: 5 rows at or below version 11 deleted; 5 rows written" in run.log

    s.run_batch([])
    assert _last_load(project, m)["events"] == 0
    assert project.scalar(f"select count() from {m}__loads") == 4


POLICIES = ["replace", "keep", "greatest", "least", "sum", "coalesce", "{old} * 2 + {new}"]


def _python_policy(policy):
    if "{old}" in policy:
        return lambda old, new: None if old is None or new is None else old * 2 + new
    return policy


@pytest.mark.parametrize("policy", POLICIES)
def test_merge_policy_matches_oracle(project, m, policy):
    """Each merge policy, with NULLs, deletes, duplicates and late events, equals the oracle."""
    cols = {"id": "Int32", "x": "Nullable(Int64)", "_version": "UInt64", "sign": "Int8"}
    s = Scenario(project, cols, {"unique_key": "id", "merge": {"x": policy}}, name=m)
    oracle = Oracle(["x"], {"x": _python_policy(policy)})
    rng = random.Random(sum(map(ord, policy)))
    version, late = 0, []
    for _ in range(6):
        # Every event has its own version; about 1 in 8 is delivered a batch late.
        rows, late = late, []
        for _ in range(40):
            version += 1
            x = None if rng.random() < 0.2 else rng.randint(-5, 50)
            row = (rng.randint(1, 8), x, version, -1 if rng.random() < 0.15 else 1)
            (late if rng.random() < 0.125 else rows).append(row)
        rows += rng.sample(rows, 5)  # redelivered duplicates within the batch
        s.run_batch(rows)
        oracle.apply_batch(oracle_events(rows, list(cols), ["id"]))
        assert s.final_rows() == expected_rows(oracle, list(cols), ["id"]), f"policy {policy}"
    s.assert_invariants()


def test_large_batch_spanning_many_blocks_matches_oracle(project, m):
    """40k events, 400 keys x 100 versions, forced into small insert blocks, equals the oracle.

    A SQL policy, so the batch goes in 100 rounds (built-in policies fold, see test_hot_keys)."""
    cols = {"id": "Int32", "x": "Int64", "_version": "UInt64", "sign": "Int8"}
    s = Scenario(
        project,
        cols,
        {
            "unique_key": "id",
            "merge": {"x": "{old} + {new}"},
            "insert_settings": {"max_block_size": 997, "min_insert_block_size_rows": 997, "max_insert_block_size": 997},
        },
        name=m,
    )
    rng = random.Random(11)
    rows = []
    for v in range(1, 101):
        for key in range(400):
            rows.append((key, rng.randint(1, 9), v, -1 if rng.random() < 0.05 else 1))
    rng.shuffle(rows)
    run = s.run_batch(rows)
    assert "in 100 rounds" in run.log
    oracle = Oracle(["x"], {"x": lambda old, new: old + new})
    oracle.apply_batch(oracle_events(rows, list(cols), ["id"]))
    assert s.final_rows() == expected_rows(oracle, list(cols), ["id"])
    s.assert_invariants()


def test_unconditional_delete_of_unknown_key_blocks_older_upsert(project, m):
    """Regression: an unconditional delete that overtakes its insert still records its version."""
    s = Scenario(project, EX3, {"unique_key": "id", "delete_mode": "unconditional"}, name=m)
    s.run_batch([(1, 0, 0, 10, -1)])
    s.run_batch([(1, 5, 5, 5, 1)])
    assert s.final_rows() == []
    oracle = Oracle(["metric1", "metric2"], delete_mode="unconditional")
    for rows in ([(1, 0, 0, 10, -1)], [(1, 5, 5, 5, 1)]):
        oracle.apply_batch(oracle_events(rows, list(EX3), ["id"]))
    assert oracle.live_rows() == {}


def test_unconditional_redelivered_delete_removes_row_resent_in_same_batch(project, m):
    """Regression (fuzz seeds 73, 153): a version-0 unconditional delete applies before a re-sent upsert.

    Folding the batch to its newest event would drop the delete and keep the row; the
    unconditional mode therefore loads in rounds.
    """
    s = Scenario(project, EX3, {"unique_key": "id", "delete_mode": "unconditional"}, name=m)
    s.run_batch([(89, 1, 1, 3255, 1)])
    s.run_batch([(89, 0, 0, 0, -1), (89, 2, 2, 4294, 1)])
    assert s.final_rows() == [(89, 2, 2, 4294)]
    run = s.run_batch([(89, 0, 0, 0, -1), (89, 2, 2, 4294, 1)])
    assert s.final_rows() == []
    assert "1 deleted, 1 skipped" in run.log
    oracle = Oracle(["metric1", "metric2"], delete_mode="unconditional")
    for rows in (
        [(89, 1, 1, 3255, 1)],
        [(89, 0, 0, 0, -1), (89, 2, 2, 4294, 1)],
        [(89, 0, 0, 0, -1), (89, 2, 2, 4294, 1)],
    ):
        oracle.apply_batch(oracle_events(rows, list(EX3), ["id"]))
    assert oracle.live_rows() == {}


# order_by -> what the transform's live-row lookup is on (issue 41): the prefix of the sorting key when an
# expression of the key leads it, the key alone when the leading expression reads another column (`b`, which
# events change: a lookup on `length(b)` would miss the live row of every event that changes b's length).
SORTING_KEYS = {
    "key_expression_first": (["id % 4", "id"], "((id % 4), id)"),
    "key_expression_between": (["tenant", "intDiv(id, 3)", "id"], "(tenant, (intDiv(id, 3)), id)"),
    "other_column_first": (["length(b)", "id"], "id"),
    # An alias in the lookup's PREWHERE would replace column `a` in that query: the sum policy would read it.
    "alias_first": (["(id % 4 AS a)", "id"], "id"),
    # A time zone's day: the lookup's session and a merge could compute it in different zones.
    "time_function_first": (["toStartOfDay(toDateTime(id))", "id"], "id"),
    # A comment ends its item's line: the sorting key keeps `id` (else keys sharing `id % 4` collapse together),
    # and a key with a comment is still the key.
    "commented": (["id % 4 -- bucket", "id // the key"], "((id % 4), id)"),
    # A calendar function of a key column whose type has no session time zone: a Date, or a DateTime with its own.
    "calendar_of_a_date": (["toYYYYMM(day)", "id", "day"], "((toYYYYMM(day)), id, day)"),
    "calendar_of_a_zoned_time": (["toStartOfMonth(day)", "id", "day"], "((toStartOfMonth(day)), id, day)"),
    # The same of a DateTime read in the session's time zone: the month of an instant depends on it.
    "calendar_of_a_session_time": (["toYYYYMM(day)", "id", "day"], "(day, id)"),
    # A Date32's month start is a Date or a Date32 as a setting says, so two sessions could disagree on old days.
    "calendar_of_a_date32": (["toStartOfMonth(day)", "id", "day"], "(day, id)"),
    # No order_by: partitioned by an expression of the key, the model is sorted by it first, then the key;
    # partitioned by another column, by the key alone.
    "default_key_expression": (None, "((id % 4), id)"),
    "default_other_column": (None, "id"),
}
# The type of the first key column `day` of the calendar cases (the others' first column is `tenant` or `id`).
DAY_TYPES = {
    "calendar_of_a_date": "Date",
    "calendar_of_a_zoned_time": "DateTime('UTC')",
    "calendar_of_a_session_time": "DateTime",
    "calendar_of_a_date32": "Date32",
}


# A built-in policy folds each key's events (the fold looks the batch's keys up too); a SQL one goes in rounds.
# The embedded engine only: a served node runs the same SQL (the fuzz's sorted shapes run over HTTP and on the
# cluster).
@pytest.mark.engines("chdb")
@pytest.mark.parametrize(
    "sorting,merge",
    [("key_expression_first", {}), ("key_expression_between", {"a": "{old} + {new}"}), ("other_column_first", {}),
     ("alias_first", {"a": "sum"}), ("time_function_first", {}), ("commented", {}), ("calendar_of_a_date", {}),
     ("calendar_of_a_zoned_time", {"a": "{old} + {new}"}), ("calendar_of_a_session_time", {}),
     ("calendar_of_a_date32", {}), ("default_key_expression", {}), ("default_other_column", {"a": "{old} + {new}"})],
    ids=["key_expression_first-fold", "key_expression_between-rounds", "other_column_first-fold", "alias_first-fold",
         "time_function_first-fold", "commented-fold", "calendar_of_a_date-fold", "calendar_of_a_zoned_time-rounds",
         "calendar_of_a_session_time-fold", "calendar_of_a_date32-fold", "default_key_expression-fold",
         "default_other_column-rounds"],
)  # fmt: skip
def test_a_sorting_key_led_by_an_expression_looks_keys_up_by_it_and_stays_exact(project, m, sorting, merge):
    """A model partitioned by an expression of its key and sorted by it first looks its keys up by that prefix
    of the sorting key (docs/design.md#what-the-transform-writes); one sorted by another column first does not.
    Either way updates, deletes, late and duplicate events equal the oracle, with tiny granules and unmerged
    parts so a lookup spans many granules and partitions."""
    order_by, lookup = SORTING_KEYS[sorting]
    keys = ["tenant", "id"] if "tenant" in (order_by or []) else ["day", "id"] if sorting in DAY_TYPES else ["id"]
    cols = {**{k: "Int64" for k in keys}, "a": "Int64", "b": "String", "_version": "UInt64", "sign": "Int8"}
    partition = {"key_expression_between": "intDiv(id, 3) % 5", "default_other_column": "length(b) % 3"}.get(
        sorting, "id % 4"
    )
    if sorting in DAY_TYPES:
        cols["day"], partition = DAY_TYPES[sorting], order_by[0]
        # days of three months, at a time of day that falls in another month in other time zones
        start = datetime.datetime(2026, 1, 31, 23, 30) if "Time" in cols["day"] else datetime.date(2026, 1, 1)
        firsts = [start + datetime.timedelta(days=d) for d in (0, 40, 80)]
    else:
        firsts = [1, 2]
    config = {"unique_key": keys, "partition_by": partition, "merge": merge, "settings": {"index_granularity": 2},
              **({"order_by": order_by} if order_by else {})}  # fmt: skip
    s = Scenario(project, cols, config, name=m)
    oracle = Oracle(["a", "b"], {"a": (lambda old, new: old + new) if merge.get("a") == "{old} + {new}" else
                                  merge.get("a", "replace")})  # fmt: skip
    rng = random.Random(sorting)
    late = []
    # The plain lookup's exactness is the other cases' to prove; these two prove the type rule, in two batches.
    batches = 2 if sorting in ("calendar_of_a_session_time", "calendar_of_a_date32") else 5
    for batch in range(batches):
        rows, late = late, []
        seen: dict[tuple, int] = {}
        for _ in range(60):
            key = (*[rng.choice(firsts)] * (len(keys) - 1), rng.randint(1, 30))
            # Each key's versions are its own, but keys share them, so the rows of two keys that one sorting key
            # value mixed up could collapse together.
            seen[key] = seen.get(key, 0) + 1
            version = 100 * batch + seen[key]
            row = (*key, rng.randint(0, 9), "x" * rng.randint(0, 6), version, -1 if rng.random() < 0.15 else 1)
            (late if rng.random() < 0.1 else rows).append(row)
        rows += rng.sample(rows, 5)  # redelivered duplicates within the batch
        s.run_batch(rows)
        oracle.apply_batch(oracle_events(rows, list(cols), keys))
        assert s.final_rows() == expected_rows(oracle, list(cols), keys), sorting
    s.assert_invariants()
    view = project.query(f"select as_select from system.tables where database = currentDatabase() "
                         f"and name = '{m}__transform'")[0][0]  # fmt: skip
    lookup_in_view = re.search(r" FINAL PREWHERE (.*?) IN \(SELECT ", view)
    assert lookup_in_view and lookup_in_view.group(1) == lookup, view
    if order_by is None:  # the table is sorted as the lookup reads it (a collapsing table's key ends with the version)
        stored = project.scalar(
            f"select sorting_key from system.tables where database = currentDatabase() and name = '{m}'"
        )
        assert (
            stored
            == {"default_key_expression": "id % 4, id, _version", "default_other_column": "(id), _version"}[sorting]
        ), stored


@pytest.mark.engines("chdb")
@pytest.mark.parametrize(
    "partition,sorting",
    [("(id)", "(id), _version"), ("tuple()", "(id), _version"), (["id % 4", "(id % 4)"], "(id), _version"),
     (["(id % 4)", "`id`"], "(id % 4), id, _version")],
    ids=["key_in_brackets", "constant", "expression_twice", "expression_and_quoted_key"],
)  # fmt: skip
def test_the_default_sorting_key_is_one_the_engine_takes(project, m, partition, sorting):
    """Partitions that name the key in brackets, a constant, or one expression twice: the default sorting key
    never repeats an item or leads with a constant (the engine refuses both), so the first run builds."""
    cols = {"id": "Int64", "a": "Int64", "_version": "UInt64", "sign": "Int8"}
    s = Scenario(project, cols, {"unique_key": "id", "partition_by": partition}, name=m)
    s.run_batch([(i, i, 1, 1) for i in range(8)])
    s.run_batch([(3, 30, 2, 1)])
    stored = project.scalar(
        f"select sorting_key from system.tables where database = currentDatabase() and name = '{m}'"
    )
    assert stored == sorting, stored
    assert (3, 30, 2) in s.final_rows()


def test_a_model_sorted_by_its_key_alone_keeps_that_until_a_full_refresh_sorts_it_by_its_partition_first(project, m):
    """A model partitioned by `id % 4` whose table was created sorted by `id` alone (an explicit `order_by`, or
    the default before the package put the partition expression first) runs on unchanged once its config sets
    no `order_by`: no "order_by changed", the lookup on the key alone. A `--full-refresh` sorts it by
    `(id % 4, id)` and the lookup names that prefix; the model stays exact throughout."""
    cols = {"id": "Int64", "a": "Int64", "_version": "UInt64", "sign": "Int8"}
    s = Scenario(project, cols, {"unique_key": "id", "partition_by": "id % 4", "order_by": ["id"]}, name=m)
    sorting = f"select sorting_key from system.tables where database = currentDatabase() and name = '{m}'"
    view = f"select as_select from system.tables where database = currentDatabase() and name = '{m}__transform'"
    s.run_batch([(i, i, 1, 1) for i in range(20)])
    s.config.pop("order_by")
    s.write_model("`id`, `a`, `_version`, `sign`")
    s.run_batch([(3, 30, 2, 1), (7, 0, 2, -1)])
    assert project.scalar(sorting) == "(id), _version"
    assert " FINAL PREWHERE id IN (SELECT " in project.scalar(view)
    s.run_batch([(i, i * 2, 3, 1) for i in range(20)], "--full-refresh")
    assert project.scalar(sorting) == "id % 4, id, _version"
    assert " FINAL PREWHERE ((id % 4), id) IN (SELECT " in project.scalar(view)
    s.run_batch([(5, 50, 4, 1), (6, 0, 4, -1)])
    assert sorted(s.final_rows()) == sorted([(i, {5: 50}.get(i, i * 2), {5: 4}.get(i, 3)) for i in range(20) if i != 6])
