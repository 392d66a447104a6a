"""vcmt_lab.invariants on hand-written VCMT histories: quiet on a correct one, loud on each corruption."""

from __future__ import annotations

import pytest

from vcmt_lab import invariants
from vcmt_lab.dbt_project import DbtProject

# Key 1 updated (cancel + new state), key 2 inserted, key 3 inserted and deleted.
GOOD = [(1, 1, 1, "open"), (1, 1, -1, "open"), (1, 2, 1, "shipped"), (2, 1, 1, "open"), (3, 1, 1, "open"),
        (3, 1, -1, "open")]  # fmt: skip


def _findings(project: DbtProject, rows: list[tuple], where: str | None = None) -> dict[str, bool]:
    project.command("drop table if exists t sync")
    project.command(
        "create table t (k UInt64, _version UInt64, sign Int8, status String) "
        "engine = VersionedCollapsingMergeTree(sign, _version) order by k"
    )
    values = ", ".join(repr(r) for r in rows)
    project.command(f"insert into t values {values}", optimize_on_insert=0)
    target = invariants.Target(f"`{project.schema}`.`t`", ["k"], where=where)
    return {f.name: f.ok for f in invariants.check(project.query, target, ["status"])}


SIGN_SUMS = "per key and per (key, version) sum(sign) in {0, 1}"
LIVE_ROWS = "live rows by sign arithmetic == FINAL where sign = 1"


def test_correct_history_passes(project):
    """Every invariant holds on a correct, unmerged history."""
    assert _findings(project, GOOD) == {SIGN_SUMS: True, LIVE_ROWS: True}


@pytest.mark.parametrize(
    ("extra", "broken"),
    [
        ([(2, 1, -1, "open"), (2, 1, -1, "open")], {SIGN_SUMS}),  # two cancels for one row
        ([(2, 3, 1, "closed")], {SIGN_SUMS, LIVE_ROWS}),  # a second live version
        ([(4, 1, -1, "open")], {SIGN_SUMS}),  # a cancel with no row
    ],
    ids=["double_cancel", "two_live", "stray_cancel"],
)
def test_corruption_is_found(project, extra, broken):
    """Each corruption fails exactly the invariants it breaks."""
    found = _findings(project, GOOD + extra)
    assert {name for name, ok in found.items() if not ok} == broken


def test_cancel_with_other_values_breaks_live_rows(project):
    """A cancel row whose values differ from its row collapses under FINAL but not under sign arithmetic."""
    rows = [r for r in GOOD if r != (1, 1, -1, "open")] + [(1, 1, -1, "drifted")]
    assert _findings(project, rows) == {SIGN_SUMS: True, LIVE_ROWS: False}


def test_where_limits_the_keys_checked(project):
    """A key filter leaves other keys' corruption out."""
    assert _findings(project, GOOD + [(2, 3, 1, "closed")], where="k = 1") == {SIGN_SUMS: True, LIVE_ROWS: True}
