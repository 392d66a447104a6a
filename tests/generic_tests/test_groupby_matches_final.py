"""vcmt.groupby_matches_final: sign-weighted GROUP BY equals the same aggregation over FINAL."""

from __future__ import annotations

import pytest

from tests.generic_tests.vcmt_tables import (
    GOOD_ROWS,
    build_scenarios,
    failing_rows,
    run_test,
    vcmt_table_sql,
)

pytestmark = pytest.mark.engines("chdb", "http", "native")

# Key 8: the cancel row carries 9.0 instead of the 9.99 it cancels.
WRONG_AMOUNT = [(8, 1, 1, "open", 9.99), (8, 1, -1, "open", 9.0), (8, 2, 1, "open", 9.5)]
# Key 9: the cancel row carries `shipped` instead of the `pending` it cancels.
WRONG_STATUS = [(9, 1, 1, "pending", 4.0), (9, 1, -1, "shipped", 4.0), (9, 2, 1, "shipped", 4.5)]
BY_STATUS = {"group_by": ["status"], "metrics": ["amount"]}


@pytest.fixture(scope="module")
def project(generic_tests_project):
    build_scenarios(
        generic_tests_project,
        "groupby",
        models={
            "groupby_good": vcmt_table_sql(GOOD_ROWS),
            "groupby_wrong_amount": vcmt_table_sql([*GOOD_ROWS, *WRONG_AMOUNT]),
            "groupby_wrong_status": vcmt_table_sql([*GOOD_ROWS, *WRONG_STATUS]),
        },
        tests={
            "groupby_good_by_status": ("groupby_good", "groupby_matches_final", BY_STATUS),
            "groupby_good_expressions": (
                "groupby_good",
                "groupby_matches_final",
                {"group_by": ["upper(status)", "k % 2"], "metrics": ["amount * 100", "toDecimal64(amount, 2)"]},
            ),
            "groupby_wrong_amount_by_status": ("groupby_wrong_amount", "groupby_matches_final", BY_STATUS),
            "groupby_wrong_status_by_status": ("groupby_wrong_status", "groupby_matches_final", BY_STATUS),
        },
    )
    return generic_tests_project


@pytest.mark.parametrize("test_name", ["groupby_good_by_status", "groupby_good_expressions"])
def test_consistent_history_passes(project, test_name):
    """Columns and expressions, as groups and as metrics, agree with FINAL on a correct table."""
    assert run_test(project, test_name, expect_pass=True)[:2] == ("pass", 0)


def test_cancel_with_wrong_amount_fails(project):
    """FINAL drops the mismatched pair; the weighted sum keeps 0.99 of it in group `open`."""
    status, failures, run = run_test(project, "groupby_wrong_amount_by_status", expect_pass=False)
    assert (status, failures) == ("fail", 1)
    assert "Failure in test groupby_wrong_amount_by_status" in run.log
    (row,) = failing_rows(project, "groupby_wrong_amount_by_status")
    assert row[:3] == ("open", 2, 2)
    assert row[3] == pytest.approx(row[4] + 0.99)


def test_cancel_with_wrong_status_fails(project):
    """The pair lands in two groups: `pending` exists only without FINAL, `shipped` differs."""
    status, failures, run = run_test(project, "groupby_wrong_status_by_status", expect_pass=False)
    assert (status, failures) == ("fail", 2)
    assert "Failure in test groupby_wrong_status_by_status" in run.log
    rows = sorted(failing_rows(project, "groupby_wrong_status_by_status"))
    assert [(r[0], r[1], r[2]) for r in rows] == [("pending", 1, None), ("shipped", 1, 2)]
