"""vcmt.sign_sum_in_range: per key (and per key and version) signs sum to 0 or 1."""

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

# Key 4: a state row inserted twice (a replay that was not deduplicated).
REPLAYED = [(4, 1, 1, "open", 1.0), (4, 1, 1, "open", 1.0)]
# Key 5 sums to 1, but version 1 sums to 2 and version 2 to -1: a duplicate
# state row offset by a cancel stamped with the wrong version.
HIDDEN = [(5, 1, 1, "open", 1.0), (5, 1, 1, "open", 1.0), (5, 2, -1, "open", 1.0)]


@pytest.fixture(scope="module")
def project(generic_tests_project):
    build_scenarios(
        generic_tests_project,
        "sign_sum",
        models={
            "sign_sum_good": vcmt_table_sql(GOOD_ROWS),
            "sign_sum_replayed": vcmt_table_sql([*GOOD_ROWS, *REPLAYED]),
            "sign_sum_hidden": vcmt_table_sql([*GOOD_ROWS, *HIDDEN]),
        },
        tests={
            "good_per_key": ("sign_sum_good", "sign_sum_in_range", {"per_version": False}),
            "good_per_version": ("sign_sum_good", "sign_sum_in_range", {"per_version": True}),
            "good_default": ("sign_sum_good", "sign_sum_in_range", {}),
            "replayed_per_key": ("sign_sum_replayed", "sign_sum_in_range", {"per_version": False}),
            "replayed_per_version": ("sign_sum_replayed", "sign_sum_in_range", {"per_version": True}),
            "hidden_per_key": ("sign_sum_hidden", "sign_sum_in_range", {"per_version": False}),
            "hidden_per_version": ("sign_sum_hidden", "sign_sum_in_range", {"per_version": True}),
            "hidden_default": ("sign_sum_hidden", "sign_sum_in_range", {}),
        },
    )
    return generic_tests_project


@pytest.mark.parametrize("test_name", ["good_per_key", "good_per_version", "good_default"])
def test_cancelled_and_deleted_keys_pass(project, test_name):
    """Updated, inserted and deleted keys sum to 1, 1 and 0 per key and per version."""
    assert run_test(project, test_name, expect_pass=True)[:2] == ("pass", 0)


def test_replayed_state_row_fails(project):
    """A state row inserted twice makes its key sum to 2."""
    status, failures, run = run_test(project, "replayed_per_key", expect_pass=False)
    assert (status, failures) == ("fail", 1)
    assert failure_logged(run, "replayed_per_key")


def test_replayed_state_row_per_version_fails(project):
    """per_version reports the key and its (key, version) row."""
    status, failures, run = run_test(project, "replayed_per_version", expect_pass=False)
    assert (status, failures) == ("fail", 2)
    assert failure_logged(run, "replayed_per_version")


def test_duplicate_hidden_by_misversioned_cancel_passes_per_key(project):
    """The hidden duplicate's key still sums to 1, so the per-key check alone (`per_version: false`) cannot
    see it."""
    assert run_test(project, "hidden_per_key", expect_pass=True)[:2] == ("pass", 0)


def test_duplicate_hidden_by_misversioned_cancel_fails_per_version(project):
    """Per (key, version), the hidden duplicate shows as version 1 = 2 and version 2 = -1."""
    status, failures, run = run_test(project, "hidden_per_version", expect_pass=False)
    assert (status, failures) == ("fail", 2)
    assert failure_logged(run, "hidden_per_version")


def test_duplicate_hidden_by_misversioned_cancel_fails_by_default(project):
    """Without arguments the test checks every (key, version) too: the doubled live row fails."""
    status, failures, run = run_test(project, "hidden_default", expect_pass=False)
    assert (status, failures) == ("fail", 2)
    assert sorted(failing_rows(project, "hidden_default")) == [("key_version", 5, 1, 2), ("key_version", 5, 2, -1)]
