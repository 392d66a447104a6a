"""How the vcmt tests find the key, version and sign columns, and their argument errors."""

from __future__ import annotations

import pytest

from tests.generic_tests.vcmt_tables import GOOD_ROWS, build_scenarios, run_test

# The embedded engine and a served node over HTTP: the native driver runs the same SQL, and its `dbt test`
# path is test_matches_expected_state.py's and test_projection_matches_base.py's.
pytestmark = pytest.mark.engines("chdb", "http")

# GOOD_ROWS with version and sign columns named `ver` and `row_sign`.
RENAMED_SQL = """
{{{{ config(materialized='table', engine='VersionedCollapsingMergeTree(row_sign, ver)', order_by='k',
            query_settings={{'optimize_on_insert': 0}}, {config}) }}}}
select k, _version as ver, sign as row_sign, status, amount
from values('k UInt64, _version UInt64, sign Int8, status String, amount Float64', {rows})
"""
ROWS = ", ".join(repr(row) for row in GOOD_ROWS)
# Two state rows of key 1 at version 2: fails whenever the test reads the right columns.
BROKEN_ROWS = ROWS + ", (1, 2, 1, 'shipped', 12.2)"


@pytest.fixture(scope="module")
def project(generic_tests_project):
    build_scenarios(
        generic_tests_project,
        "arguments",
        models={
            "args_configured": RENAMED_SQL.format(
                config="unique_key=['k'], version='ver', sign='row_sign'", rows=BROKEN_ROWS
            ),
            "args_unconfigured": RENAMED_SQL.format(config="tags=['vcmt_args']", rows=BROKEN_ROWS),
        },
        tests={
            "args_from_config": ("args_configured", "sign_sum_in_range", {"per_version": True}),
            "args_from_config_with_where": (
                "args_configured",
                "sign_sum_in_range",
                {},
                {"where": "k = 1"},
            ),
            "args_explicit": (
                "args_unconfigured",
                "sign_sum_in_range",
                {"unique_key": "k", "version": "ver", "sign": "row_sign", "per_version": True},
            ),
            "args_missing_key": ("args_unconfigured", "sign_sum_in_range", {}),
            "args_final_with_where": (
                "args_configured",
                "groupby_matches_final",
                {"group_by": ["status"]},
                {"where": "k = 1"},
            ),
            "args_bad_group_by": ("args_configured", "groupby_matches_final", {"group_by": []}),
        },
    )
    return generic_tests_project


def test_columns_from_model_config_fail_on_broken_rows(project):
    """With no arguments, key, version and sign come from the model config (`ver`, `row_sign`)."""
    status, failures, _ = run_test(project, "args_from_config", expect_pass=False)
    # Key 1 sums to 2, and so does (key 1, version 2).
    assert (status, failures) == ("fail", 2)


def test_where_filtered_model_still_reads_config_fails(project):
    """A `where` config turns the model into a subquery; the config is still found through it."""
    # Key 1 sums to 2, and so does (key 1, version 2): the default checks both.
    assert run_test(project, "args_from_config_with_where", expect_pass=False)[:2] == ("fail", 2)


def test_explicit_arguments_fail_on_broken_rows(project):
    """Arguments name the columns when the model config does not."""
    assert run_test(project, "args_explicit", expect_pass=False)[:2] == ("fail", 2)


def test_missing_unique_key_errors(project):
    """Without a key argument or config the test stops with an error naming test and argument."""
    status, _, run = run_test(project, "args_missing_key", expect_pass=False)
    assert status == "error"
    assert "vcmt.sign_sum_in_range: argument `unique_key` is required" in run.log


def test_final_test_on_where_subquery_errors(project):
    """A test that reads with FINAL refuses the `where` subquery and says why."""
    status, _, run = run_test(project, "args_final_with_where", expect_pass=False)
    assert status == "error"
    assert "vcmt.groupby_matches_final: argument `model` must be a table" in run.log


def test_empty_group_by_errors(project):
    """An empty `group_by` is named in the error, with what was received."""
    status, _, run = run_test(project, "args_bad_group_by", expect_pass=False)
    assert status == "error"
    assert "argument `group_by` must be a non-empty list" in run.log
