"""Bad config and bad SELECTs fail at compile time, before any DDL, with a message that says how to fix it."""

from __future__ import annotations

import pytest

SRC = "select toInt32(number) as id, toUInt32(number) as x, toUInt64(1) as _version, toInt8(1) as sign from numbers(3)"

CASES = {
    "missing_unique_key": ("{}", SRC, "`unique_key` is required"),
    "key_not_returned": ("{'unique_key': 'nope'}", SRC, "`unique_key` column `nope` is not returned"),
    "version_not_returned": ("{'unique_key': 'id', 'version': 'ts'}", SRC, "`version` column `ts` is not returned"),
    "explicit_sign_not_returned": ("{'unique_key': 'id', 'sign': 'op'}", SRC, "`sign` column `op` is not returned"),
    "nullable_key": (
        "{'unique_key': 'id'}",
        SRC.replace("toInt32(number) as id", "toNullable(toInt32(number)) as id"),
        "key columns cannot be Nullable",
    ),
    "string_version": (
        "{'unique_key': 'id'}", SRC.replace("toUInt64(1) as _version", "'1' as _version"),
        "needs a non-Nullable integer, Date, Date32, DateTime or DateTime64",
    ),
    "float_version": (
        "{'unique_key': 'id'}", SRC.replace("toUInt64(1) as _version", "toFloat64(1) as _version"),
        "has type Float64",
    ),
    "unknown_merge_policy": (
        "{'unique_key': 'id', 'merge': {'x': 'avg'}}", SRC,
        "`merge` for column `x` must be one of ['replace', 'keep', 'greatest', 'least', 'sum', 'coalesce']",
    ),
    "merge_on_key": ("{'unique_key': 'id', 'merge': {'id': 'sum'}}", SRC, "key, version and sign columns are never merged"),
    "merge_unknown_column": ("{'unique_key': 'id', 'merge': {'y': 'sum'}}", SRC, "`merge` names column `y`"),
    "bad_delete_mode": ("{'unique_key': 'id', 'delete_mode': 'soft'}", SRC, "`delete_mode` must be one of"),
    "order_by_without_key": ("{'unique_key': 'id', 'order_by': ['x']}", SRC, "`order_by` must contain every `unique_key` column"),
    "projection_count": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select x, count() group by x'}]}", SRC,
        "uses the aggregate `count()`",
    ),
    "projection_max": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select max(x) group by id'}]}", SRC,
        "uses the aggregate `max()`",
    ),
    "projection_unweighted_sum": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x) group by id'}]}", SRC,
        "uses `sum(x)`, which is not weighted by `sign`",
    ),
    "projection_sign_not_top_level": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x + x * sign) group by id'}]}",
        SRC, "is not weighted by `sign`",
    ),
    "projection_not_aggregating": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select * order by x'}]}", SRC,
        "must be an aggregating projection",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_model_fails_before_any_ddl(project, case):
    """Each validation rule raises its own message and creates no object."""
    config, sql, message = CASES[case]
    project.model("m", f"{{{{ config(materialized='vcmt_upsert', **{config}) }}}}\n{sql}")
    run = project.dbt("run", "--select", "m", expect_pass=False)
    assert message in run.log, run.log[-3000:]
    assert project.query(f"select name from system.tables where database = '{project.schema}'") == []


def test_projection_error_explains_why_collapsing_breaks_it(project):
    """The projection message explains which aggregates stay exact and why."""
    config, sql, _ = CASES["projection_count"]
    project.model("m", f"{{{{ config(materialized='vcmt_upsert', **{config}) }}}}\n{sql}")
    run = project.dbt("run", "--select", "m", expect_pass=False)
    assert "a cancel row subtracts exactly what its state row added" in run.log
    assert "Use sum(sign) for counts" in run.log


def test_identifiers_needing_quotes_work_everywhere(project):
    """Columns named like keywords or with spaces are quoted in every object and the loader."""
    project.model(
        "m",
        """{{ config(materialized='vcmt_upsert', unique_key=['order', 'my key'], version='select',
                     sign='op sign', merge={'from': 'sum'},
                     projections=[{'name': 'p', 'query': 'select `group`, sum(`op sign`), sum(`from` * `op sign`) group by `group`'}]) }}
        select toInt32(number % 3) as `order`, 'k' as `my key`, toUInt64(number) as `select`,
               toInt8(if(number = 4, -1, 1)) as `op sign`, toInt64(number) as `from`, 'g' as `group`
        from numbers(5)""",
    )
    project.dbt("run")
    project.dbt("run")
    rows = project.query("select `order`, `select`, `from` from m final where `op sign` = 1 order by `order`")
    assert rows == [(0, 3, 3), (2, 2, 2)]
    proj = project.query("select `group`, sum(`from` * `op sign`) from m group by `group`",
                         optimize_use_projections=1, force_optimize_projection=1)
    assert proj == [("g", 5)]


def test_table_not_built_by_vcmt_upsert_asks_for_full_refresh(project):
    """Switching an existing plain table to vcmt_upsert needs --full-refresh, and says so."""
    project.model("m", "{{ config(materialized='table', order_by='id') }}\n" + SRC)
    project.dbt("run")
    project.model("m", "{{ config(materialized='vcmt_upsert', unique_key='id') }}\n" + SRC)
    run = project.dbt("run", expect_pass=False)
    assert "was not built by vcmt_upsert" in run.log and "--full-refresh" in run.log
    project.dbt("run", "--full-refresh")
    assert project.scalar("select engine from system.tables where database = currentDatabase() and name = 'm'") \
        == "VersionedCollapsingMergeTree"
