"""vcmt.matches_expected_state: the FINAL, sign = 1 state equals an expected relation."""

from __future__ import annotations

import pytest

from tests.generic_tests.vcmt_tables import (
    GOOD_ROWS,
    build_scenarios,
    failing_rows,
    failure_logged,
    run_test,
    vcmt_table_sql,
)

pytestmark = pytest.mark.engines("chdb", "http", "native")

# The state GOOD_ROWS stands for. Seed inference types k and _version as Int32
# against the table's UInt64, which the test must cast across, and amount as
# Float32, which holds 12.2 only to about 1e-7: hence the tolerance.
EXPECTED_CSV = """
k,_version,status,amount
1,2,shipped,12.2
2,1,open,5.05
"""
DRIFT = [
    (2, 1, -1, "open", 5.05),  # key 2 deleted: missing
    (10, 1, 1, "open", 1.0),  # key 10 never expected: extra
    (1, 2, -1, "shipped", 12.2),  # key 1 moved to version 3 with another amount: different
    (1, 3, 1, "shipped", 12.5),
]
EXPECTED = "ref('expected_state')"
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def project(generic_tests_project):
    build_scenarios(
        generic_tests_project,
        "expected",
        seeds={"expected_state": EXPECTED_CSV},
        models={
            "expected_good": vcmt_table_sql(GOOD_ROWS),
            "expected_drifted": vcmt_table_sql([*GOOD_ROWS, *DRIFT]),
        },
        tests={
            "expected_good_state": (
                "expected_good",
                "matches_expected_state",
                {"expected": EXPECTED, "tolerance": TOLERANCE},
            ),
            "expected_drifted_state": (
                "expected_drifted",
                "matches_expected_state",
                {"expected": EXPECTED, "tolerance": TOLERANCE},
            ),
            "expected_drifted_status": (
                "expected_drifted",
                "matches_expected_state",
                {"expected": EXPECTED, "compare_columns": ["status"], "tolerance": TOLERANCE},
            ),
        },
    )
    return generic_tests_project


def test_collapsed_state_passes(project):
    """FINAL with sign = 1 leaves exactly the expected rows."""
    assert run_test(project, "expected_good_state", expect_pass=True)[:2] == ("pass", 0)


def test_drifted_state_fails_with_each_diff_kind(project):
    """A deleted, an unexpected and a changed key are reported as missing, extra and different."""
    status, failures, run = run_test(project, "expected_drifted_state", expect_pass=False)
    assert (status, failures) == ("fail", 3)
    assert failure_logged(run, "expected_drifted_state")
    kinds = {(row[0], row[1]) for row in failing_rows(project, "expected_drifted_state")}
    assert kinds == {("missing", 2), ("extra", 10), ("different", 1)}
    # The run shows the differing rows, not only their count: the key and each compared value beside the
    # expected one (NULL on the side without the key).
    assert "first differing rows (up to 5):" in run.log, run.log[-3000:]
    assert (
        "different k=1: _version 3 (expected 2), status shipped (expected shipped), amount 12.5 (expected 12.19"
        in run.log
    ), run.log[-3000:]
    assert "missing k=2: _version NULL (expected 1)" in run.log and "extra k=10: _version 1 (expected NULL)" in run.log


def test_drift_outside_compare_columns_is_ignored_fails(project):
    """Comparing `status` only, key 1's new amount is no difference; missing and extra remain."""
    status, failures, _ = run_test(project, "expected_drifted_status", expect_pass=False)
    assert (status, failures) == ("fail", 2)
