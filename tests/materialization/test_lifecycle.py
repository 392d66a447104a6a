"""Lifecycle of a vcmt_upsert model: create, incremental runs, config and schema changes, full refresh."""

from __future__ import annotations

import re

import pytest

from tests.materialization.scenario import Scenario

# The same tests on the embedded engine and on a served node over HTTP (tests/conftest.py).
pytestmark = pytest.mark.engines("chdb", "http")

COLS = {"id": "Int32", "x": "Int64", "_version": "UInt64", "sign": "Int8"}


def _tables(project) -> dict[str, str]:
    rows = project.query(
        f"select name, engine from system.tables where database = '{project.schema}' and name like 'm%'"
    )
    return dict(rows)


def _uuid(project, name: str) -> str:
    return str(project.scalar(f"select uuid from system.tables where database = currentDatabase() and name = '{name}'"))


def test_first_run_creates_the_contracted_objects(project):
    """m (VCMT), m__stage (Null), m__transform (MV) and m__<purpose> helpers exist after the first run."""
    s = Scenario(project, COLS, {"unique_key": "id"})
    s.run_batch([(1, 1, 1, 1)])
    tables = _tables(project)
    assert tables["m"] == "VersionedCollapsingMergeTree"
    assert tables["m__stage"] == "Null"
    assert tables["m__transform"] == "MaterializedView"
    assert tables["m__tombstones"] == "AggregatingMergeTree"
    assert tables["m__tombstones_writer"] == "MaterializedView"
    assert not [t for t in tables if t.startswith("m__batch")], tables
    create = project.scalar(
        "select create_table_query from system.tables where database = currentDatabase() and name = 'm__transform'"
    )
    assert f"TO {project.schema}.m " in create and "m__stage" in create


def test_incremental_run_keeps_data_and_applies_new_events(project):
    """A second run leaves earlier rows and applies only the new batch."""
    s = Scenario(project, COLS, {"unique_key": "id"})
    s.run_batch([(1, 1, 1, 1), (2, 2, 1, 1)])
    s.run_batch([(2, 20, 2, 1), (3, 3, 1, 1)])
    assert s.final_rows() == [(1, 1, 1), (2, 20, 2), (3, 3, 1)]


def test_full_refresh_rebuilds_everything_from_the_select(project):
    """--full-refresh drops the old state (rows and tombstones) and loads the current SELECT."""
    s = Scenario(project, COLS, {"unique_key": "id"})
    s.run_batch([(1, 1, 1, 1), (2, 2, 1, 1)])
    s.run_batch([(2, 0, 5, -1)])
    s.run_batch([(2, 7, 3, 1)], "--full-refresh")
    assert s.final_rows() == [(2, 7, 3)]
    assert project.scalar("select count() from m__tombstones") == 0


def test_merge_policy_change_updates_transform_in_place(project):
    """Changing `merge` rewrites the transform with MODIFY QUERY: same view (same UUID), new behaviour."""
    s = Scenario(project, COLS, {"unique_key": "id"})
    s.run_batch([(1, 10, 1, 1)])
    uuid_before = _uuid(project, "m__transform")
    s.write_model("`id`, `x`, `_version`, `sign`", merge={"x": "sum"})
    run = s.run_batch([(1, 5, 2, 1)])
    assert "transform changed, updating it in place (MODIFY QUERY)" in run.log
    assert _uuid(project, "m__transform") == uuid_before
    assert s.final_rows() == [(1, 15, 2)]
    run = s.run_batch([(1, 1, 3, 1)])
    assert "MODIFY QUERY" not in run.log
    assert s.final_rows() == [(1, 16, 3)]


def test_delete_mode_change_attaches_cancel_writer(project):
    """Switching to delete_mode='unconditional' adds the tombstone writer on cancel rows."""
    s = Scenario(project, COLS, {"unique_key": "id"})
    s.run_batch([(1, 1, 4, 1)])
    s.write_model("`id`, `x`, `_version`, `sign`", delete_mode="unconditional")
    s.run_batch([(1, 0, 0, -1)])
    assert "m__tombstones_from_cancels" in _tables(project)
    assert s.final_rows() == []
    s.run_batch([(1, 1, 4, 1)])
    assert s.final_rows() == []
    s.write_model("`id`, `x`, `_version`, `sign`", delete_mode="versioned")
    s.run_batch([])
    assert "m__tombstones_from_cancels" not in _tables(project)


def test_new_column_fails_by_default_with_how_to_fix(project):
    """on_schema_change defaults to fail and names the options."""
    cols = {**COLS, "y": "String"}
    s = Scenario(project, cols, {"unique_key": "id"}, select="`id`, `x`, `_version`, `sign`")
    s.run_batch([(1, 1, 1, 1, "a")])
    s.write_model("`id`, `x`, `y`, `_version`, `sign`")
    run = s.run_batch([(1, 2, 2, 1, "b")], expect_pass=False)
    assert "no longer match" in run.log and "append_new_columns" in run.log and "--full-refresh" in run.log


def test_append_new_columns_adds_column_to_target_and_stage(project):
    """append_new_columns adds the column everywhere; dropped input columns keep their stored value."""
    cols = {**COLS, "y": "String"}
    s = Scenario(
        project,
        cols,
        {"unique_key": "id", "on_schema_change": "append_new_columns"},
        select="`id`, `x`, `_version`, `sign`",
    )
    s.run_batch([(1, 1, 1, 1, "a"), (3, 7, 1, 1, "z")])
    s.write_model("`id`, `x`, `y`, `_version`, `sign`")
    run = s.run_batch([(1, 2, 2, 1, "b"), (2, 5, 1, 1, "c")])
    # Key 3 had no event since: it holds the new column's default, as the run says.
    assert project.query("select id, x, y from m final where sign = 1 order by id") == [
        (1, 2, "b"),
        (2, 5, "c"),
        (3, 7, ""),
    ]
    assert (
        "the rows already stored hold the default of new column(s) y (0, '' or NULL for a Nullable type) until "
        "an event of their key sets it; to fill every key now, run with --full-refresh"
    ) in run.log, run.log[-3000:]
    assert "y" in [r[0] for r in project.query("describe table m__stage")]
    s.write_model("`id`, `y`, `_version`, `sign`")
    s.run_batch([(1, 99, 3, 1, "d")])
    assert project.query("select id, x, y from m final where sign = 1 order by id") == [
        (1, 2, "d"),
        (2, 5, "c"),
        (3, 7, ""),
    ]
    s.assert_invariants()


def test_sync_all_columns_drops_and_retypes_columns(project):
    """sync_all_columns removes a column from target and stage and follows a type change."""
    cols = {**COLS, "y": "String"}
    s = Scenario(
        project,
        cols,
        {"unique_key": "id", "on_schema_change": "sync_all_columns"},
        select="`id`, `x`, `y`, `_version`, `sign`",
    )
    s.run_batch([(1, 1, 1, 1, "a")])
    s.write_model("`id`, toInt32(`x`) as `x`, `_version`, `sign`")
    s.run_batch([(1, 2, 2, 1, "b")])
    described = dict((r[0], r[1]) for r in project.query("describe table m"))
    assert "y" not in described and described["x"] == "Int32"
    assert "y" not in [r[0] for r in project.query("describe table m__stage")]
    assert project.query("select id, x from m final where sign = 1") == [(1, 2)]
    s.assert_invariants()


def test_key_column_change_requires_full_refresh(project):
    """Changing a key column's type cannot be done in place; the message says --full-refresh."""
    s = Scenario(project, COLS, {"unique_key": "id", "on_schema_change": "sync_all_columns"})
    s.run_batch([(1, 1, 1, 1)])
    s.write_model("toInt64(`id`) as `id`, `x`, `_version`, `sign`")
    run = s.run_batch([(1, 1, 2, 1)], expect_pass=False)
    assert "key, version or sign column `id`" in run.log and "--full-refresh" in run.log


@pytest.mark.engines("chdb", "http", "native")
def test_added_projection_is_materialized_for_existing_parts(project):
    """A projection added later is created and materialized; it agrees with the base table and FINAL."""
    cols = {"id": "Int32", "status": "String", "amount": "Int64", "_version": "UInt64", "sign": "Int8"}
    s = Scenario(project, cols, {"unique_key": "id"})
    s.run_batch([(i, "ab"[i % 2], i, 1, 1) for i in range(20)])
    s.write_model(
        "`id`, `status`, `amount`, `_version`, `sign`",
        projections=[{"name": "by_status", "query": "select status, sum(sign), sum(amount * sign) group by status"}],
    )
    run = s.run_batch([(1, "b", 100, 2, 1), (2, "a", 0, 2, -1)])
    assert "adding projection by_status" in run.log
    q = "select status, sum(sign), sum(amount * sign) from m group by status order by status"
    via_projection = project.query(q, optimize_use_projections=1, force_optimize_projection=1)
    base = project.query(q, optimize_use_projections=0)
    final = project.query(
        "select status, count(), sum(amount) from m final where sign = 1 group by status order by status"
    )
    assert via_projection == base == final
    parts = project.scalar(
        "select count() from system.projection_parts where database = currentDatabase() and table = 'm' and active"
    )
    assert parts > 0

    # A change is judged on the engine's formatted text: a string literal's case counts, spacing and quoting do not.
    cols_sql = "`id`, `status`, `amount`, `_version`, `sign`"
    for version, query, rebuilt in [
        (3, "select status, sum(if(status = 'A', amount, 0) * sign) group by status", True),
        (4, "select status, sum(if(status = 'a', amount, 0) * sign) group by status", True),
        (5, "SELECT `status`,  sum(if(`status` = 'a', amount, 0) * sign)   GROUP  BY status", False),
    ]:
        s.write_model(cols_sql, projections=[{"name": "by_status", "query": query}])
        run = s.run_batch([(3, "a", 3, version, 1)])
        assert ("drop projection by_status (its query changed" in run.log) is rebuilt, (query, run.log[-2000:])
    q = "select status, sum(if(status = 'a', amount, 0) * sign) from m group by status order by status"
    assert project.query(q, optimize_use_projections=1, force_optimize_projection=1) == project.query(
        q, optimize_use_projections=0
    )


def test_watermark_reads_only_new_batches(project):
    """vcmt.is_incremental() + vcmt.watermark() let a model read only input newer than the last load."""
    project.command(
        "create table src (id Int32, x Int64, _version UInt64, _batch_id UInt32) engine = MergeTree order by _batch_id"
    )
    project.model(
        "m",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id') }}
        select id, x, _version, _batch_id from src
        {% if vcmt.is_incremental() %} where _batch_id > {{ vcmt.watermark() }} {% endif %}
    """,
    )
    project.command("insert into src values (1, 1, 1, 1), (2, 2, 1, 1)")
    project.dbt("run")
    project.command("insert into src values (1, 10, 2, 2)")
    run = project.dbt("run")
    assert "1 event read (1 upsert, 0 deletes)" in run.log
    assert project.query("select argMax(watermark, loaded_at) from m__loads") == [("2",)]
    run = project.dbt("run")
    assert "0 events" in run.log
    assert project.query("select id, x from m final where sign = 1 order by id") == [(1, 10), (2, 2)]


def test_hooks_and_persist_docs_behave_as_in_dbt_clickhouse(project):
    """pre/post hooks run; persist_docs writes column comments on the target."""
    project.write(
        "models/schema.yml",
        """
        version: 2
        models:
          - name: m
            description: orders
            config:
              persist_docs: {relation: true, columns: true}
            columns:
              - name: x
                description: the amount
    """,
    )
    project.model(
        "m",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id',
                  pre_hook="create table if not exists {{ this.schema }}.hook_log (msg String) engine = MergeTree order by msg",
                  post_hook="insert into {{ this.schema }}.hook_log select 'post:' || toString(count()) from {{ this }}") }}
        select toInt32(1) as id, toInt64(5) as x, toUInt64(1) as _version
    """,
    )
    project.dbt("run")
    assert project.query("select msg from hook_log") == [("post:1",)]
    comments = dict(
        project.query("select name, comment from system.columns where database = currentDatabase() and table = 'm'")
    )
    assert comments["x"] == "the amount"


def test_stage_writer_applies_python_rows_with_the_models_own_loader(project):
    """Python rows go through vcmt.load_stage: the model's loader and merge policy (`sum` folds to one round)."""
    s = Scenario(project, COLS, {"unique_key": "id", "merge": {"x": "sum"}})
    s.run_batch([])
    events = [{"id": i % 3, "x": i, "_version": i, "sign": 1} for i in range(1, 31)]
    events.append(dict(events[-1]))
    report = project.load_rows("m", events)
    assert "31 events read" in report and "in 1 round (at most one event per key per round):" in report
    assert s.final_rows() == [
        (0, sum(range(3, 31, 3)), 30),
        (1, sum(range(1, 31, 3)), 28),
        (2, sum(range(2, 31, 3)), 29),
    ]
    s.assert_invariants()


def test_load_stage_operation_applies_a_select_through_the_loader(project):
    """dbt run-operation vcmt.load_stage applies arbitrary SQL with the same loader and report."""
    s = Scenario(project, COLS, {"unique_key": "id"})
    s.run_batch([(1, 1, 1, 1)])
    run = project.dbt(
        "run-operation",
        "vcmt.load_stage",
        "--args",
        "{model: m, sql: 'select toInt32(number) as id, toInt64(number * 10) as x, toUInt64(5) as _version, toInt8(1) as sign from numbers(3)'}",
    )
    assert "vcmt.load_stage m: 3 events" in run.log
    assert s.final_rows() == [(0, 0, 5), (1, 10, 5), (2, 20, 5)]


def test_target_run_holds_the_sql_that_loaded_the_run_and_dbt_show_inline_shows_the_state(project):
    """0.2 wrote nothing to target/run/ for a vcmt_upsert model, as if nothing had run."""
    s = Scenario(project, COLS, {"unique_key": "id", "merge": {"x": "sum"}})
    s.run_batch([(1, 1, 1, 1), (2, 2, 1, 1)])
    written = list((project.root / "target" / "run").glob("*/models/m.sql"))
    assert len(written) == 1
    text = written[0].read_text()
    assert "2 events read" in text and "insert into" in text and "m__stage" in text
    s.run_batch([(1, 5, 2, 1), (1, 6, 3, 1), (1, 7, 4, -1)])  # rounds
    text = written[0].read_text()
    assert (
        "3 events read" in text
        and "create or replace table" in text
        and "m__batch" in text
        and "_vcmt_round = 1" in text
    )
    # The README's way to see a model's current rows from dbt (`dbt show --select m` shows its SELECT).
    s.run_batch([(2, 40, 2, 1)])
    run = project.dbt("show", "--inline", "select id, x from {{ ref('m') }} final where sign = 1 order by id")
    assert re.search(r"\|\s*2\s*\|\s*42\s*\|", run.log)
