"""dbt-clickhouse's materializations, run unchanged through the `type: chdb` adapter.

All models build in one project with two `dbt run`s: the first with
`tag=first, lo=1`, the second with `tag=second, lo=3`, so incremental models
see an overlapping key (3) and new keys (4, 5) on the second run.
"""

from __future__ import annotations

import pytest

from vcmt_lab.dbt_project import DbtProject

# Rows lo .. lo+2 tagged with the run that produced them.
INCREMENTAL_SQL = """
{{{{ config(materialized='incremental', order_by='id', {config}) }}}}
select toUInt64(number) as id, '{{{{ var("tag") }}}}' as tag
from numbers({{{{ var("lo") }}}}, 3)
"""

MODELS = {
    "orders": """
        {{ config(materialized='table', engine='MergeTree()', order_by='id') }}
        select toUInt32(number) as id, number * 10 as amount from numbers(1, 3)
    """,
    "snap": "{{ config(materialized='table', order_by='tag') }} select '{{ var(\"tag\") }}' as tag",
    "base": "{{ config(materialized='table', order_by='id') }} select toUInt32(1) as id, 'a' as name",
    "named": "{{ config(materialized='view') }} select id, upper(name) as name from {{ ref('base') }}",
    "inc_default": INCREMENTAL_SQL.format(config="unique_key='id'"),
    "inc_delete_insert": INCREMENTAL_SQL.format(config="unique_key='id', incremental_strategy='delete+insert'"),
    "inc_append": INCREMENTAL_SQL.format(config="incremental_strategy='append'"),
    "events": "{{ config(materialized='table', order_by='id') }} select 1::UInt32 as id, 5::UInt32 as qty",
    "events_x10": """
        {{ config(materialized='materialized_view', engine='MergeTree()', order_by='id') }}
        select id, qty * 10 as qty10 from {{ ref('events') }}
    """,
}


@pytest.fixture(scope="module")
def built(module_project: DbtProject) -> DbtProject:
    for name, sql in MODELS.items():
        module_project.model(name, sql)
    module_project.vars = {"lo": 1, "tag": "first"}
    module_project.dbt("run")
    module_project.vars = {"lo": 3, "tag": "second"}
    module_project.dbt("run")
    return module_project


def _engine_of(project: DbtProject, table: str) -> str:
    return project.scalar(f"select engine from system.tables where database = '{project.schema}' and name = '{table}'")


def test_table_model_holds_selected_rows(built):
    """A `table` model becomes a MergeTree table holding exactly the selected rows."""
    assert _engine_of(built, "orders") == "MergeTree"
    assert built.query("select id, amount from orders order by id") == [(1, 10), (2, 20), (3, 30)]


def test_table_model_rerun_replaces_rows(built):
    """Re-running a `table` model swaps in the new result instead of appending to the old one."""
    assert built.query("select tag from snap") == [("second",)]


def test_view_model_reads_current_upstream_rows(built):
    """A `view` model is a ClickHouse View, so rows added upstream show through it."""
    assert _engine_of(built, "named") == "View"
    built.command("insert into base values (2, 'b')")
    assert built.query("select id, name from named order by id") == [(1, "A"), (2, "B")]


@pytest.mark.parametrize("model", ["inc_default", "inc_delete_insert"])
def test_incremental_unique_key_second_run_replaces_overlap(built, model):
    """With `unique_key`, the second run replaces key 3 and adds keys 4 and 5."""
    assert built.query(f"select id, tag from {model} order by id") == [
        (1, "first"),
        (2, "first"),
        (3, "second"),
        (4, "second"),
        (5, "second"),
    ]


def test_incremental_append_second_run_adds_rows(built):
    """With `append`, the second run adds its three rows and keeps the first run's copy of key 3."""
    assert built.query("select id, tag from inc_append order by id, tag") == [
        (1, "first"),
        (2, "first"),
        (3, "first"),
        (3, "second"),
        (4, "second"),
        (5, "second"),
    ]


def test_materialized_view_backfills_and_captures_later_inserts(built):
    """A `materialized_view` backfills its target table, then transforms rows inserted later."""
    assert _engine_of(built, "events_x10_mv") == "MaterializedView"
    assert _engine_of(built, "events_x10") == "MergeTree"
    built.command("insert into events values (2, 7)")
    assert built.query("select id, qty10 from events_x10 order by id") == [(1, 50), (2, 70)]
