"""vcmt.projection_matches_base: every aggregating projection answers like the base table."""

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

BY_STATUS = "select status, sum(sign), sum(amount * sign) group by status"
PROJECTIONS = (
    f"projections=[{{'name': 'by_status', 'query': '{BY_STATUS}'}},"
    " {'name': 'total', 'query': 'select sum(sign) as n, sum(amount * sign) as amount_total'}]"
)
# Key 1 moves from `shipped` (its only row there) to `closed` in a second part,
# then a merge collapses the cancelled pair and empties the `shipped` group.
CHANGE_AND_MERGE = (
    "post_hook=["
    "\"insert into {{ this }} values (1, 2, -1, 'shipped', 12.2), (1, 3, 1, 'closed', 12.2)\","
    " 'optimize table {{ this }} final']"
)


def projected_table_sql(merge_mode: str) -> str:
    """GOOD_ROWS with two aggregating projections, one change merged under `merge_mode`."""
    return vcmt_table_sql(
        GOOD_ROWS,
        config=f"{PROJECTIONS}, settings={{'deduplicate_merge_projection_mode': '{merge_mode}'}}, " + CHANGE_AND_MERGE,
    )


@pytest.fixture(scope="module")
def project(generic_tests_project):
    # Projection added after the data, never materialized: no part holds it.
    late_projection = (
        f"settings={{'deduplicate_merge_projection_mode': 'rebuild'}}, "
        f"post_hook='alter table {{{{ this }}}} add projection by_status ({BY_STATUS})'"
    )
    build_scenarios(
        generic_tests_project,
        "projection",
        models={
            "projection_none": vcmt_table_sql(GOOD_ROWS),
            "projection_rebuilt": projected_table_sql("rebuild"),
            "projection_stale": projected_table_sql("ignore"),
            "projection_unmaterialized": vcmt_table_sql(GOOD_ROWS, config=late_projection),
        },
        tests={
            "projection_none_matches": ("projection_none", "projection_matches_base", {}),
            "projection_rebuilt_matches": ("projection_rebuilt", "projection_matches_base", {}),
            "projection_stale_matches": ("projection_stale", "projection_matches_base", {}),
            "projection_unmaterialized_matches": ("projection_unmaterialized", "projection_matches_base", {}),
        },
    )
    return generic_tests_project


@pytest.mark.parametrize("test_name", ["projection_none_matches", "projection_rebuilt_matches"])
def test_rebuilt_or_absent_projections_pass(project, test_name):
    """Projections rebuilt on merge agree with the base table; no projection, nothing to compare."""
    assert run_test(project, test_name, expect_pass=True)[:2] == ("pass", 0)


def test_projection_kept_through_collapsing_merge_fails(project):
    """Under 'ignore' the merged projection still holds the emptied `shipped` group."""
    status, failures, run = run_test(project, "projection_stale_matches", expect_pass=False)
    assert (status, failures) == ("fail", 1)
    assert failure_logged(run, "projection_stale_matches")
    assert failing_rows(project, "projection_stale_matches") == [
        ("by_status", "('shipped')", 1, 0, "('shipped',0,0)", "")
    ]


def test_projection_no_part_holds_errors(project):
    """A projection ClickHouse cannot read is an error, not a vacuous pass."""
    status, _, run = run_test(project, "projection_unmaterialized_matches", expect_pass=False)
    assert status == "error"
    # The native driver reports the code without its name.
    assert ("PROJECTION_NOT_USED" in run.log or "Code: 584." in run.log) and "by_status" in run.log


def test_part_offset_filter_reads_base_columns(project):
    """The base side's `_part_offset >= 0` keeps ClickHouse off every projection (the check relies on it)."""
    query = "select status, sum(sign), sum(amount * sign) from projection_rebuilt {} group by status"
    project.query(query.format(""), force_optimize_projection_name="by_status")
    with pytest.raises(Exception, match="PROJECTION_NOT_USED"):
        project.query(query.format("where _part_offset >= 0"), force_optimize_projection=1)
