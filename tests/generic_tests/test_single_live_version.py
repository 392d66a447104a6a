"""vcmt.single_live_version: at most one version per key has a positive sign sum."""

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

# Key 6: version 2 written without cancelling version 1.
UNCANCELLED = [(6, 1, 1, "open", 1.0), (6, 2, 1, "shipped", 1.0)]
# Key 7: the same, plus an orphan cancel of version 3 that brings the key's sum back to 1.
BALANCED = [(7, 1, 1, "open", 1.0), (7, 2, 1, "shipped", 1.0), (7, 3, -1, "shipped", 1.0)]
# Key 8: version 1's state row written twice (signs sum to 2), one live version.
DOUBLED = [(8, 1, 1, "open", 1.0), (8, 1, 1, "open", 1.0)]


@pytest.fixture(scope="module")
def project(generic_tests_project):
    build_scenarios(
        generic_tests_project,
        "live_version",
        models={
            "live_good": vcmt_table_sql(GOOD_ROWS),
            "live_uncancelled": vcmt_table_sql([*GOOD_ROWS, *UNCANCELLED]),
            "live_balanced": vcmt_table_sql([*GOOD_ROWS, *BALANCED]),
            "live_doubled": vcmt_table_sql([*GOOD_ROWS, *DOUBLED]),
        },
        tests={
            "live_good_single": ("live_good", "single_live_version", {}),
            "live_uncancelled_single": ("live_uncancelled", "single_live_version", {}),
            "live_balanced_single": ("live_balanced", "single_live_version", {}),
            "live_balanced_sign_sum": ("live_balanced", "sign_sum_in_range", {"per_version": False}),
            "live_doubled_single": ("live_doubled", "single_live_version", {}),
        },
    )
    return generic_tests_project


def test_updated_and_deleted_keys_pass(project):
    """An update leaves one live version; a delete leaves none."""
    assert run_test(project, "live_good_single", expect_pass=True)[:2] == ("pass", 0)


def test_uncancelled_state_fails(project):
    """A new version written without cancelling the old one leaves two live versions."""
    status, failures, run = run_test(project, "live_uncancelled_single", expect_pass=False)
    assert (status, failures) == ("fail", 1)
    assert failure_logged(run, "live_uncancelled_single")
    assert failing_rows(project, "live_uncancelled_single") == [(6, 2, [1, 2], [])]


def test_two_live_versions_behind_balanced_sum_fail(project):
    """An orphan cancel hides two live versions from the per-key sum, not from this test, which also names
    the orphan cancel's version."""
    assert run_test(project, "live_balanced_sign_sum", expect_pass=True)[:2] == ("pass", 0)
    status, failures, run = run_test(project, "live_balanced_single", expect_pass=False)
    assert (status, failures) == ("fail", 1)
    assert failure_logged(run, "live_balanced_single")
    assert failing_rows(project, "live_balanced_single") == [(7, 2, [1, 2], [3])]


def test_doubled_live_row_fails(project):
    """A version whose state row was written twice is one live version, but not a clean one."""
    status, failures, run = run_test(project, "live_doubled_single", expect_pass=False)
    assert (status, failures) == ("fail", 1)
    assert failing_rows(project, "live_doubled_single") == [(8, 1, [1], [1])]
