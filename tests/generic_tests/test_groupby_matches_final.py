"""vcmt.groupby_matches_final: sign-weighted GROUP BY equals the same aggregation over FINAL."""

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

# The embedded engine and a served node over HTTP: the native driver runs the same SQL, and its `dbt test`
# path is test_matches_expected_state.py's and test_projection_matches_base.py's.
pytestmark = pytest.mark.engines("chdb", "http")

# Key 8: the cancel row carries 9.0 instead of the 9.99 it cancels.
WRONG_AMOUNT = [(8, 1, 1, "open", 9.99), (8, 1, -1, "open", 9.0), (8, 2, 1, "open", 9.5)]
# Key 9: the cancel row carries `shipped` instead of the `pending` it cancels.
WRONG_STATUS = [(9, 1, 1, "pending", 4.0), (9, 1, -1, "shipped", 4.0), (9, 2, 1, "shipped", 4.5)]
# Key 10 left group `gone` (its state is cancelled), but the cancel row carries 3.0 instead of 5.0: the group nets to
# sign 0, FINAL has no such group, and the weighted sum keeps 2.0.
GONE_GROUP = [(10, 1, 1, "gone", 5.0), (10, 1, -1, "gone", 3.0)]
# Key 11: the cancel row is off by one on a 10^12 amount, far inside a relative tolerance of 1e-9.
OFF_BY_ONE = [(11, 1, 1, "big", 1e12), (11, 1, -1, "big", 1e12 + 1), (11, 2, 1, "big", 1e12)]
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
            "groupby_gone_group": vcmt_table_sql([*GOOD_ROWS, *GONE_GROUP]),
            "groupby_off_by_one": vcmt_table_sql([*GOOD_ROWS, *OFF_BY_ONE]),
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
            "groupby_gone_group_by_status": ("groupby_gone_group", "groupby_matches_final", BY_STATUS),
            "groupby_off_by_one_int": (
                "groupby_off_by_one",
                "groupby_matches_final",
                {"group_by": ["status"], "metrics": ["toInt64(amount)"]},
            ),
            "groupby_off_by_one_decimal": (
                "groupby_off_by_one",
                "groupby_matches_final",
                {"group_by": ["status"], "metrics": ["toDecimal64(amount, 2)"]},
            ),
            "groupby_off_by_one_float": ("groupby_off_by_one", "groupby_matches_final", BY_STATUS),
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
    assert failure_logged(run, "groupby_wrong_amount_by_status")
    (row,) = failing_rows(project, "groupby_wrong_amount_by_status")
    assert row[:3] == ("open", 2, 2)
    assert row[3] == pytest.approx(row[4] + 0.99)


def test_cancel_with_wrong_status_fails(project):
    """The pair lands in two groups: `pending` exists only without FINAL, `shipped` differs."""
    status, failures, run = run_test(project, "groupby_wrong_status_by_status", expect_pass=False)
    assert (status, failures) == ("fail", 2)
    assert failure_logged(run, "groupby_wrong_status_by_status")
    rows = sorted(failing_rows(project, "groupby_wrong_status_by_status"))
    assert [(r[0], r[1], r[2]) for r in rows] == [("pending", 1, None), ("shipped", 1, 2)]


def test_bad_cancel_in_a_group_netting_to_zero_fails(project):
    """A group whose rows net to sign 0 is compared too: FINAL lacks it, so its weighted sum must be 0."""
    status, failures, _ = run_test(project, "groupby_gone_group_by_status", expect_pass=False)
    assert (status, failures) == ("fail", 1)
    (row,) = failing_rows(project, "groupby_gone_group_by_status")
    assert row == ("gone", 0, None, 2.0, None)


@pytest.mark.parametrize(
    "test_name, groupby, final",
    [
        ("groupby_off_by_one_int", 10**12 - 1, 10**12),
        ("groupby_off_by_one_decimal", 10**12 - 1, 10**12),
    ],
)
def test_exact_metrics_get_no_tolerance(project, test_name, groupby, final):
    """Int and Decimal sums are exact: an off-by-one far inside the default relative tolerance fails."""
    status, failures, _ = run_test(project, test_name, expect_pass=False)
    assert (status, failures) == ("fail", 1)
    (row,) = failing_rows(project, test_name)
    assert row[0] == "big" and (row[1], row[2]) == (1, 1) and (row[3], row[4]) == (groupby, final)


def test_float_metrics_keep_the_tolerance(project):
    """The same off-by-one on a Float64 metric is within the tolerance floats need."""
    assert run_test(project, "groupby_off_by_one_float", expect_pass=True)[:2] == ("pass", 0)
