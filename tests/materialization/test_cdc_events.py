"""CDC event kinds the mart applies itself: truncates (`truncate_when`) and
columns an event did not send (`unavailable_column`, Debezium's unchanged TOAST).
See docs/design.md#truncates and #unsent-columns."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.materialization.scenario import Scenario
from vcmt_cli.load_stage import LoadError

# The embedded engine and a served node over the native protocol; over HTTP too under VCMT_ENGINE_MATRIX=1
# (tests/conftest.py): the fuzz's streams, which hold truncates and unsent columns, run over HTTP (tests/fuzz).
pytestmark = pytest.mark.engines("chdb", "native", matrix=("http",))

TRUNC = {"id": "Int32", "qty": "Int64", "_op": "String", "_version": "UInt64", "sign": "Int8"}
TRUNC_CFG = {"unique_key": "id", "truncate_when": "_op = 't'"}

# One dbt project per module and engine, a model `m` of its own per test (tests/conftest.py).
SHARE_PROJECT = True


def _model_objects(project, m: str) -> list[str]:
    """The objects of model `m` (its source table `<m>_src` aside)."""
    return [
        n
        for (n,) in project.query(
            "select name from system.tables where database = currentDatabase() "
            f"and (name = '{m}' or startsWith(name, '{m}__')) order by name"
        )
    ]


def _rows(s: Scenario) -> list[tuple]:
    return s.project.query(f"select id, qty, _version from {s.name} final where sign = 1 order by id")


@pytest.mark.parametrize("delete_mode", ["versioned", "unconditional"])
def test_truncate_removes_rows_at_or_below_it_and_keeps_later_ones(project, m, delete_mode):
    s = Scenario(project, TRUNC, {**TRUNC_CFG, "delete_mode": delete_mode}, name=m)
    s.run_batch([(1, 10, "c", 10, 1), (2, 20, "c", 20, 1), (3, 30, "c", 60, 1)])
    # One batch: changes before the truncate (removed), the truncate at 50, changes after it (kept).
    run = s.run_batch([(4, 40, "c", 30, 1), (0, 0, "t", 50, 1), (5, 50, "c", 55, 1), (1, 11, "u", 70, 1)])
    assert _rows(s) == [(1, 11, 70), (3, 30, 60), (5, 50, 55)]
    assert "2 rows at or below version 50 deleted" in run.log
    # Late events at or below the truncate, for stored and for unknown keys, are ignored and counted.
    run = s.run_batch([(2, 21, "u", 45, 1), (6, 60, "c", 50, 1), (7, 70, "c", 51, 1)])
    assert _rows(s) == [(1, 11, 70), (3, 30, 60), (5, 50, 55), (7, 70, 51)]
    assert "3 events read (3 upserts, 0 deletes): 2 ignored at or below a truncate, 0 superseded" in run.log
    # The same truncate again (a redelivery) deletes nothing more.
    s.run_batch([(0, 0, "t", 50, 1)])
    assert _rows(s) == [(1, 11, 70), (3, 30, 60), (5, 50, 55), (7, 70, 51)]
    # Recorded first (pending), then done with the rows it deleted.
    assert project.query(f"select version, rows_deleted from {m}__truncates order by applied_at, rows_deleted") == [
        (50, None),
        (50, 2),
    ]
    # Aggregates stay exact without FINAL.
    assert project.scalar(f"select sum(qty * sign) from {m}") == 11 + 30 + 50 + 70
    s.assert_invariants()


def test_truncate_compares_versions_as_numbers_and_only_moves_forward(project, m):
    s = Scenario(project, TRUNC, TRUNC_CFG, name=m)
    s.run_batch([(1, 1, "c", 5, 1), (2, 2, "c", 12, 1)])
    s.run_batch([(0, 0, "t", 9, 1)])
    assert _rows(s) == [(2, 2, 12)]
    # An older truncate arriving late does not lower the floor.
    s.run_batch([(0, 0, "t", 3, 1), (3, 3, "c", 8, 1), (4, 4, "c", 10, 1)])
    assert _rows(s) == [(2, 2, 12), (4, 4, 10)]
    s.run_batch([(0, 0, "t", 11, 1)])
    assert _rows(s) == [(2, 2, 12)]
    assert project.query(f"select version from {m}__truncates where rows_deleted is not null order by applied_at") == [
        (9,),
        (11,),
    ]


def test_full_refresh_forgets_applied_truncates(project, m):
    s = Scenario(project, TRUNC, TRUNC_CFG, name=m)
    s.run_batch([(0, 0, "t", 100, 1)])
    s.run_batch([(1, 1, "c", 10, 1)], "--full-refresh")
    assert _rows(s) == [(1, 1, 10)]
    assert project.scalar(f"select count() from {m}__truncates") == 0


def test_truncate_when_that_does_not_parse_or_names_an_unknown_column_fails_before_ddl(project, m):
    s = Scenario(project, TRUNC, {**TRUNC_CFG, "truncate_when": "_op = = 't'"}, name=m)
    run = s.run_batch([(1, 1, "c", 5, 1)], expect_pass=False)
    assert "`truncate_when`" in run.log and "cannot parse" in run.log
    s.write_model(", ".join(TRUNC), truncate_when="kind = 't'")
    run = s.run_batch([(1, 1, "c", 5, 1)], expect_pass=False)
    assert "vcmt_upsert: truncate_when" in run.log
    assert _model_objects(project, m) == []


UNSENT = {
    "id": "Int32",
    "body": "Nullable(String)",
    "qty": "Int64",
    "_unavailable": "Array(String)",
    "_version": "UInt64",
    "sign": "Int8",
}


@pytest.mark.parametrize("merge", [{}, {"qty": "sum"}])
def test_unsent_columns_keep_the_stored_value_and_null_stays_null(project, m, merge):
    s = Scenario(project, UNSENT, {"unique_key": "id", "unavailable_column": "_unavailable", "merge": merge}, name=m)
    s.run_batch([(1, "big text", 1, [], 1, 1), (2, "other", 2, [], 1, 1)])
    # Key 1: body unsent twice (kept), then really set to NULL. Key 2: body set to NULL while unsent elsewhere.
    s.run_batch(
        [
            (1, None, 10, ["body"], 2, 1),
            (1, None, 100, ["body"], 3, 1),
            (2, None, 20, [], 2, 1),
        ]
    )
    qty1 = 100 if not merge else 1 + 10 + 100
    qty2 = 20 if not merge else 22
    assert project.query(f"select id, body, qty from {m} final where sign = 1 order by id") == [
        (1, "big text", qty1),
        (2, None, qty2),
    ]
    s.run_batch([(1, None, 0, [], 4, 1)])
    assert project.query(f"select body, _unavailable from {m} final where sign = 1 and id = 1") == [(None, [])]
    s.assert_invariants()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"unavailable_column": "missing"}, "`unavailable_column` `missing` is not returned"),
        ({"unavailable_column": "qty"}, "has type Int64; it must be an Array(String)"),
        (
            {"unavailable_column": "_unavailable", "merge": {"_unavailable": "replace"}},
            "cannot set a policy for `_unavailable`",
        ),
        ({"unavailable_column": "id"}, "cannot also be the key"),
    ],
)
def test_unavailable_column_misconfigured_is_refused_before_ddl(project, m, config, message):
    s = Scenario(project, UNSENT, {"unique_key": "id", **config}, name=m)
    run = s.run_batch([(1, "x", 1, [], 1, 1)], expect_pass=False)
    assert message in run.log
    assert _model_objects(project, m) == []


# -- found in review: each case below lost or mangled data before it was fixed --------------------


def test_truncate_with_a_time_zone_version_across_a_dst_change(project, m):
    """The floor was kept as text in the version's zone: 01:30 EST read back as 01:30 EDT, an hour early."""
    cols = {"id": "Int32", "qty": "Int64", "_op": "String", "_v": "DateTime('UTC')", "sign": "Int8"}
    s = Scenario(
        project, cols, TRUNC_CFG, select="id, qty, _op, toDateTime(_v, 'America/New_York') as _version, sign", name=m
    )

    def at(hh_mm: str) -> datetime:
        return datetime.fromisoformat(f"2024-11-03 {hh_mm}:00+00:00")

    s.run_batch([(1, 1, "c", at("05:50"), 1), (2, 2, "c", at("04:00"), 1)])
    s.run_batch([(0, 0, "t", at("06:30"), 1), (3, 3, "c", at("06:06"), 1)])
    assert project.query(f"select id from {m} final where sign = 1") == []
    assert project.query(f"select toString(version, 'UTC') from {m}__truncates where rows_deleted is not null") == [
        ("2024-11-03 06:30:00",)
    ]


def test_unconditional_deletes_apply_after_a_truncate_whatever_their_version(project, m):
    s = Scenario(project, TRUNC, {**TRUNC_CFG, "delete_mode": "unconditional"}, name=m)
    s.run_batch([(1, 1, "c", 10, 1)])
    s.run_batch([(0, 0, "t", 50, 1), (1, 2, "c", 60, 1)])
    s.run_batch([(1, 0, "d", 0, -1)])
    assert _rows(s) == []


def test_unavailable_column_added_later_without_the_column_in_the_target_is_refused(project, m):
    s = Scenario(
        project,
        UNSENT,
        {"unique_key": "id", "on_schema_change": "ignore"},
        select="id, body, qty, _version, sign",
        name=m,
    )
    s.run_batch([(1, "big", 1, [], 1, 1)])
    s.write_model(", ".join(f"`{c}`" for c in UNSENT), unavailable_column="_unavailable")
    run = s.run_batch([(1, None, 2, ["body"], 2, 1)], expect_pass=False)
    assert "is not a column of the target" in run.log and "append_new_columns" in run.log
    assert project.query(f"select body, qty from {m} final where sign = 1") == [("big", 1)]


def test_a_batch_refused_by_its_checks_applies_no_truncate(project, m):
    s = Scenario(project, TRUNC, TRUNC_CFG, name=m)
    s.run_batch([(1, 1, "c", 10, 1), (2, 2, "c", 20, 1)])
    with pytest.raises(LoadError, match="Nothing was loaded"):
        project.load_rows(
            m,
            [
                {"id": 0, "qty": 0, "_op": "t", "_version": 30, "sign": 1},
                {"id": 3, "qty": None, "_op": "c", "_version": 40, "sign": 1},
            ],
        )
    assert _rows(s) == [(1, 1, 10), (2, 2, 20)]
    assert project.scalar(f"select count() from {m}__truncates") == 0


def test_a_truncate_version_that_does_not_fit_is_refused_not_wrapped(project, m):
    s = Scenario(project, TRUNC, TRUNC_CFG, name=m)
    s.run_batch([(1, 1, "c", 10, 1)])
    with pytest.raises(LoadError, match="does not fit"):
        project.load_rows(m, [{"id": 0, "qty": 0, "_op": "t", "_version": -1, "sign": 1}])
    # The refused load gave the lock back: the next one does not wait out its lease.
    run = s.run_batch([(5, 5, "c", 100, 1)])
    assert "waiting for another load" not in run.log, run.log[-3000:]
    assert _rows(s) == [(1, 1, 10), (5, 5, 100)]


def test_a_truncate_whose_deletes_were_interrupted_is_finished_by_the_next_load(project, m):
    s = Scenario(project, TRUNC, TRUNC_CFG, name=m)
    s.run_batch([(1, 1, "c", 10, 1), (2, 2, "c", 70, 1)])
    # What a run killed between recording the truncate and its deletes leaves behind.
    project.command(f"insert into {m}__truncates values (50, now64(3), 'killed', null)")
    s.run_batch([(3, 3, "c", 40, 1), (4, 4, "c", 80, 1)])
    assert _rows(s) == [(2, 2, 70), (4, 4, 80)]
    assert project.query(f"select rows_deleted from {m}__truncates where rows_deleted is not null") == [(1,)]


def test_unsent_value_of_a_non_nullable_column_is_not_a_bad_value(project, m):
    cols = {**UNSENT, "body": "String"}
    s = Scenario(project, cols, {"unique_key": "id", "unavailable_column": "_unavailable"}, name=m)
    s.run_batch([(1, "big", 1, [], 1, 1)])
    project.load_rows(m, [{"id": 1, "body": None, "qty": 5, "_unavailable": ["body"], "_version": 2, "sign": 1}])
    assert project.query(f"select body, qty from {m} final where sign = 1") == [("big", 5)]
