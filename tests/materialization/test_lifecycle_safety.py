"""Lifecycle safety: DDL is planned and checked with the engine before anything changes.

Schema changes that ClickHouse would refuse halfway, config errors only the
engine detects, and --full-refresh either succeed or fail with the model's
objects and data exactly as they were.
"""

from __future__ import annotations

import pytest

from tests.materialization.scenario import Scenario

# The embedded engine; over HTTP too under VCMT_ENGINE_MATRIX=1 (tests/conftest.py): the checks before DDL read
# the run's observation and ask the engine, which a served node answers as chDB does. On a served node in make
# test too (ON_A_SERVER_TOO): the engine's own errors as they reach the user through dbt-clickhouse, the first
# run's guard refusing an INSERT, the swap of a full refresh and a projection's rebuild (statements the
# lifecycle's tests over HTTP, tests/materialization/test_lifecycle.py, do not send).
pytestmark = pytest.mark.engines("chdb", matrix=("http",))
ON_A_SERVER_TOO = pytest.mark.engines("chdb", "http")

COLS = {"id": "Int32", "status": "String", "amount": "Int64", "y": "Int64", "_version": "UInt64", "sign": "Int8"}
WITH_Y = "`id`, `status`, `amount`, `y`, `_version`, `sign`"
WITHOUT_Y = "`id`, `status`, `amount`, `_version`, `sign`"
BY_Y = {"name": "by_y", "query": "select y, sum(sign), sum(amount * sign) group by y"}
BY_STATUS = {"name": "by_status", "query": "select status, sum(sign), sum(amount * sign) group by status"}


def _insert_into_stage(project, events: list[dict]) -> None:
    """What an external writer does: one INSERT into the stage, at most one event per key."""
    columns = list(events[0])
    project.client.insert("m__stage", [[e[c] for c in columns] for e in events], column_names=columns)


def _objects(project, m: str = "m") -> dict[str, str]:
    """name -> uuid of every object of model `m` (and of its full-refresh staging names); not the lock's tables,
    which every model has from its first run on, whatever else happens to it (macros/vcmt/load/lock.sql)."""
    rows = project.query(
        f"select name, toString(uuid) from system.tables where database = '{project.schema}' "
        f"and (name = '{m}' or startsWith(name, '{m}__')) and not startsWith(name, '{m}__lock')"
    )
    return dict(rows)


def _columns(project, table: str) -> list[str]:
    return [r[0] for r in project.query(f"describe table {table}")]


def _assert_groupby_matches_final(project) -> None:
    by_sign = project.query(
        "select status, sum(sign), sum(amount * sign) from m group by status having sum(sign) > 0 order by status"
    )
    final = project.query(
        "select status, count(), sum(amount) from m final where sign = 1 group by status order by status"
    )
    assert by_sign == final


def _rows(n: int, version: int, y: bool = True) -> list[tuple]:
    return [
        (i, "ab"[i % 2], i * 10 + version, i % 3, version, 1)
        if y
        else (i, "ab"[i % 2], i * 10 + version, 0, version, 1)
        for i in range(n)
    ]


def test_sync_all_columns_drops_a_column_together_with_its_projection(project):
    """Dropping a column and the projection using it: projection first, then the column; later runs are not stuck."""
    s = Scenario(
        project,
        COLS,
        {"unique_key": "id", "on_schema_change": "sync_all_columns", "projections": [BY_Y, BY_STATUS]},
        select=WITH_Y,
    )
    s.run_batch(_rows(10, 1))
    s.write_model(WITHOUT_Y, projections=[BY_STATUS])
    run = s.run_batch(_rows(10, 2))
    assert "schema change (sync_all_columns)" in run.log
    assert "y" not in _columns(project, "m") and "y" not in _columns(project, "m__stage")
    assert [
        r[0]
        for r in project.query("select name from system.projections where database = currentDatabase() and table = 'm'")
    ] == ["by_status"]
    # Later runs and external writers keep working, and sums stay exact.
    s.run_batch([(1, "b", 500, 0, 3, 1), (2, "a", 0, 0, 3, -1)])
    _insert_into_stage(
        project,
        [
            {"id": 3, "status": "b", "amount": 7, "_version": 4, "sign": 1},
            {"id": 4, "status": "a", "amount": 0, "_version": 4, "sign": -1},
        ],
    )
    s.run_batch([(5, "a", 1, 0, 5, 1)])
    assert project.query(
        "select id, status, amount from m final where sign = 1 and id in (1, 2, 3, 4, 5) order by id"
    ) == [(1, "b", 500), (3, "b", 7), (5, "a", 1)]
    _assert_groupby_matches_final(project)
    s.assert_invariants()


def test_dropping_a_column_a_configured_projection_uses_fails_before_any_ddl(project):
    """A projection still configured on a dropped column is refused up front: nothing changes, the next good run works."""
    s = Scenario(
        project,
        COLS,
        {"unique_key": "id", "on_schema_change": "sync_all_columns", "projections": [BY_Y]},
        select=WITH_Y,
    )
    s.run_batch(_rows(6, 1))
    before = _objects(project)
    transform = project.scalar(
        "select as_select from system.tables where database = currentDatabase() and name = 'm__transform'"
    )
    s.write_model(WITHOUT_Y)
    run = s.run_batch(_rows(6, 2), expect_pass=False)
    assert "projection `by_y` is still configured but uses column(s) ['y']" in run.log
    assert "Nothing was changed" in run.log
    # Every object as it was: same objects, columns, transform; inserts still correct.
    assert _objects(project) == before
    assert "y" in _columns(project, "m") and "y" in _columns(project, "m__stage")
    assert (
        project.scalar(
            "select as_select from system.tables where database = currentDatabase() and name = 'm__transform'"
        )
        == transform
    )
    _insert_into_stage(project, [{"id": 1, "status": "z", "amount": 1, "y": 9, "_version": 7, "sign": 1}])
    _assert_groupby_matches_final(project)
    s.write_model(WITHOUT_Y, projections=[])
    s.run_batch(_rows(6, 8))
    assert "y" not in _columns(project, "m")
    _assert_groupby_matches_final(project)
    s.assert_invariants()


@ON_A_SERVER_TOO
@pytest.mark.parametrize(
    "config, message",
    [
        ({"merge": {"amount": "{old} +* {new}"}}, "`merge` for column `amount` ({old} +* {new}) is not valid SQL"),
        ({"merge": {"amount": "nofn({old}, {new})"}}, "AS `vcmt_upsert: merge for column amount`"),
        (
            {"projections": [{"name": "by_s", "query": "select status, sum(sign) group by by status"}]},
            "projection `by_s` (select status, sum(sign) group by by status) is not valid SQL",
        ),
        (
            {"projections": [{"name": "by_s", "query": "select nocol, sum(sign) group by nocol"}]},
            "Unknown expression identifier `nocol`. In scope SELECT 0 AS `vcmt_upsert: projection by_s`",
        ),
        (
            {"projections": [{"name": "by_s", "query": "select status, sum(nofn(amount) * sign) group by status"}]},
            "In scope SELECT 0 AS `vcmt_upsert: projection by_s`",
        ),
        (
            {
                "projections": [
                    {"name": "by_s", "query": "select status, sum(sign) group by status", "materialize": True}
                ]
            },
            "projection `by_s` has unknown key(s) ['materialize']",
        ),
    ],
)
def test_a_config_error_on_an_existing_model_names_the_setting(module_project, m, config, message):
    """0.2: on an existing model the new transform or projection reached the engine first, whose error showed
    internal SQL (and, for a projection, a "missing FROM" hint) without naming the setting. The cases share
    one project (a fresh one costs a full parse), each with a model of its own."""
    project = module_project
    s = Scenario(project, COLS, {"unique_key": "id"}, select=WITH_Y, name=m)
    s.run_batch(_rows(3, 1))

    def objects() -> dict[str, str]:
        return _objects(project, m)

    before = objects()
    s.write_model(WITH_Y, **config)
    run = s.run_batch(_rows(3, 2), expect_pass=False)
    assert message in run.log
    assert "does not have the FROM clause" not in run.log and "``" not in run.log
    assert objects() == before


@pytest.mark.parametrize(
    "expression, message",
    [
        ("{old} +* {new}", "`merge` for column `amount` ({old} +* {new}) is not valid SQL"),
        ("no_such_function({old}, {new})", "merge for column amount"),
    ],
)
def test_bad_merge_expression_on_first_run_leaves_no_object(project, expression, message):
    """A merge expression the engine rejects fails the first run before any object exists; nothing is silently lost."""
    s = Scenario(project, COLS, {"unique_key": "id", "merge": {"amount": expression}}, select=WITH_Y)
    run = s.run_batch(_rows(3, 1), expect_pass=False)
    assert message in run.log
    assert _objects(project) == {}
    # No stage without its transform: an external writer gets an error, not a silent drop.
    with pytest.raises(Exception, match="m__stage"):
        project.command("insert into m__stage (id, status, amount, y, _version, sign) values (1, 'a', 1, 1, 1, 1)")
    s.write_model(WITH_Y, merge={"amount": "{old} + {new}"})
    s.run_batch(_rows(3, 1))
    # The stage the views were attached to is the real one (the guard that held its name is gone).
    assert "CONSTRAINT" not in project.scalar(
        "select create_table_query from system.tables where database = currentDatabase() and name = 'm__stage'"
    )
    assert _objects(project).keys() == {
        "m",
        "m__stage",
        "m__transform",
        "m__tombstones",
        "m__tombstones_writer",
        "m__applied",
        "m__applied_writer",
        "m__loads",
        "m__truncates",
    }
    s.run_batch(_rows(3, 2))
    assert project.query("select id, amount from m final where sign = 1 order by id") == [(0, 3), (1, 23), (2, 43)]


def test_full_refresh_with_bad_partition_by_keeps_the_old_table(project):
    """--full-refresh with a partition_by typo fails before touching anything: old objects, data and loading intact."""
    s = Scenario(project, COLS, {"unique_key": "id"}, select=WITH_Y)
    s.run_batch(_rows(5, 1))
    s.run_batch([(0, "a", 0, 0, 2, -1)])
    before = _objects(project)
    rows = s.final_rows()
    s.write_model(WITH_Y, partition_by="intDiv(idd, 10)")
    run = s.run_batch(_rows(5, 3), "--full-refresh", expect_pass=False)
    assert "idd" in run.log and "vcmt_upsert: partition_by" in run.log
    assert _objects(project) == before
    assert s.final_rows() == rows
    assert project.scalar("select count() from m__tombstones") == 1
    # The next good run loads on top of the old data, tombstones included.
    s.write_model(WITH_Y, partition_by=None)
    s.run_batch([(0, "a", 5, 0, 1, 1), (1, "b", 99, 0, 4, 1)])
    assert s.final_rows() == [r if r[0] != 1 else (1, "b", 99, 0, 4) for r in rows]
    _assert_groupby_matches_final(project)
    s.assert_invariants()


@ON_A_SERVER_TOO
def test_full_refresh_swaps_in_new_objects_and_keeps_the_stage_served(project):
    """--full-refresh builds beside the old objects and exchanges them: old data and staging names are gone,
    the views serve the new tables, and the transform is never dropped (the stage always has it)."""
    s = Scenario(project, COLS, {"unique_key": "id"}, select=WITH_Y)
    s.run_batch(_rows(5, 1))
    s.run_batch([(0, "a", 0, 0, 2, -1)])
    before = _objects(project)
    s.write_model(WITH_Y, merge={"amount": "sum"}, delete_mode="unconditional", projections=[BY_STATUS])
    run = s.run_batch([(7, "b", 70, 1, 1, 1)], "--full-refresh")
    after = _objects(project)
    assert set(after) == set(before) | {"m__tombstones_from_cancels"}
    for name in ["m", "m__stage", "m__tombstones", "m__applied", "m__loads"]:
        assert after[name] != before[name], f"{name} was not replaced"
    assert after["m__transform"] == before["m__transform"], "the transform was dropped: the stage was left without it"
    assert "swapping them in" in run.log
    assert s.final_rows() == [(7, "b", 70, 1, 1)]
    assert project.scalar("select count() from m__tombstones") == 0
    assert project.scalar("select count() from m__loads") == 1
    # An external writer and the next run reach the new target with the new config (sum, projection).
    _insert_into_stage(
        project,
        [
            {"id": 7, "status": "b", "amount": 5, "y": 1, "_version": 2, "sign": 1},
            {"id": 8, "status": "a", "amount": 3, "y": 0, "_version": 1, "sign": 1},
        ],
    )
    s.run_batch([(8, "a", 4, 0, 2, 1)])
    assert s.final_rows() == [(7, "b", 75, 1, 2), (8, "a", 7, 0, 2)]
    q = "select status, sum(sign), sum(amount * sign) from m group by status order by status"
    assert project.query(q, optimize_use_projections=1, force_optimize_projection=1) == project.query(
        q, optimize_use_projections=0
    )
    _assert_groupby_matches_final(project)
    s.assert_invariants()


def test_dropping_a_partition_key_column_fails_before_any_ddl(project):
    """A column ClickHouse cannot drop in place (here: in the partition key) is refused with the fix, nothing changed."""
    s = Scenario(
        project,
        COLS,
        {"unique_key": "id", "on_schema_change": "sync_all_columns", "partition_by": "intDiv(y, 10)"},
        select=WITH_Y,
    )
    s.run_batch(_rows(4, 1))
    before = _objects(project)
    s.write_model(WITHOUT_Y)
    run = s.run_batch(_rows(4, 2), expect_pass=False)
    assert "cannot drop column `y`" in run.log and "partition key" in run.log and "--full-refresh" in run.log
    assert _objects(project) == before
    assert "y" in _columns(project, "m") and "y" in _columns(project, "m__stage")
    # Rebuilding with the partition key still on `y` is refused by the check, the old table stays.
    run = s.run_batch(_rows(4, 3), "--full-refresh", expect_pass=False)
    assert "intDiv(y, 10)" in run.log
    assert _objects(project) == before
    s.write_model(WITHOUT_Y, partition_by=None)
    s.run_batch(_rows(4, 3), "--full-refresh")
    assert "y" not in _columns(project, "m")
    _assert_groupby_matches_final(project)


def test_a_model_left_half_changed_is_picked_up_where_it_stopped(project):
    """The state an interrupted sync_all_columns left behind (transform and stage without `y`, the target still
    with `y` and a projection on it) is finished by the next run instead of failing forever."""
    s = Scenario(
        project,
        COLS,
        {"unique_key": "id", "on_schema_change": "sync_all_columns", "projections": [BY_Y, BY_STATUS]},
        select=WITH_Y,
    )
    s.run_batch(_rows(6, 1))
    # Reproduce the stuck state: a twin model without `y` lends its transform query.
    project.model(
        "m2", f"{{{{ config(materialized='vcmt_upsert', unique_key='id') }}}}\nselect {WITHOUT_Y} from `m_src`"
    )
    project.dbt("run", "--select", "m2")
    twin = project.scalar(
        "select as_select from system.tables where database = currentDatabase() and name = 'm2__transform'"
    )
    project.command(f"alter table m__transform modify query {twin.replace('.m2', '.m')}")
    project.command("alter table m__stage drop column y")
    assert "y" in _columns(project, "m") and "y" not in _columns(project, "m__stage")
    s.write_model(WITHOUT_Y, projections=[BY_STATUS])
    s.run_batch(_rows(6, 2))
    assert "y" not in _columns(project, "m")
    s.run_batch([(1, "b", 500, 0, 3, 1), (2, "a", 0, 0, 3, -1)])
    assert project.query("select id, amount from m final where sign = 1 and id in (1, 2)") == [(1, 500)]
    _assert_groupby_matches_final(project)
    s.assert_invariants()


@pytest.mark.parametrize(
    "config, message",
    [
        # Only TTLs that keep every row are accepted (see test_validation); one that recompresses still uses `y`.
        (
            {"ttl": "toDateTime(y) + interval 100 year recompress codec(ZSTD(3))"},
            "the table's TTL (toDateTime(y) + toIntervalYear(100) RECOMPRESS CODEC(ZSTD(3))) uses them",
        ),
        (
            {"post_hook": "alter table {{ this }} add index if not exists iy y type minmax granularity 1"},
            "skip index `iy` uses them",
        ),
    ],
)
def test_dropping_a_column_the_ttl_or_a_skip_index_uses_fails_before_any_ddl(project, config, message):
    """TTL and skip indexes block a column drop in ClickHouse: refused up front, and the model keeps loading."""
    s = Scenario(project, COLS, {"unique_key": "id", "on_schema_change": "sync_all_columns", **config}, select=WITH_Y)
    s.run_batch(_rows(4, 1))
    before = _objects(project)
    s.write_model(WITHOUT_Y)
    run = s.run_batch(_rows(4, 2), expect_pass=False)
    assert message in run.log and "Nothing was changed" in run.log
    assert _objects(project) == before
    assert "y" in _columns(project, "m") and "y" in _columns(project, "m__stage")
    s.write_model(WITH_Y)
    s.run_batch([(1, "b", 500, 7, 3, 1)])
    assert project.query("select id, amount, y from m final where sign = 1 and id = 1") == [(1, 500, 7)]
    _assert_groupby_matches_final(project)


@ON_A_SERVER_TOO
def test_the_first_run_guard_refuses_inserts_loudly(project):
    """While a first run attaches the views, `m__stage` is a guard that fails every INSERT with a message."""
    project.write(
        "macros/make_guard.sql",
        """
        {% macro make_guard() %}
          {%- set rel = api.Relation.create(schema=target.schema, identifier='g__stage', type='table') -%}
          {%- do run_query(vcmt._guard_stage_sql(rel, [{'name': 'id', 'data_type': 'Int32'}])) -%}
        {% endmacro %}
    """,
    )
    project.dbt("run-operation", "make_guard")
    with pytest.raises(Exception, match="vcmt_upsert_stage_not_ready_yet_run_dbt_run"):
        project.command("insert into g__stage values (1)")


@ON_A_SERVER_TOO
def test_retyping_a_column_a_projection_groups_by_rebuilds_the_projection(project):
    """ClickHouse refuses MODIFY COLUMN on a projection's GROUP BY column: the projection is dropped, the column
    retyped, the projection re-added and materialized."""
    s = Scenario(
        project,
        COLS,
        {"unique_key": "id", "on_schema_change": "sync_all_columns", "projections": [BY_STATUS]},
        select=WITH_Y,
    )
    s.run_batch(_rows(10, 1))
    s.write_model("`id`, toLowCardinality(`status`) as `status`, `amount`, `y`, `_version`, `sign`")
    run = s.run_batch([(1, "b", 500, 0, 2, 1), (2, "a", 0, 0, 2, -1)])
    assert "adding projection by_status" in run.log
    assert {r[0]: r[1] for r in project.query("describe table m")}["status"] == "LowCardinality(String)"
    q = "select status, sum(sign), sum(amount * sign) from m group by status order by status"
    assert project.query(q, optimize_use_projections=1, force_optimize_projection=1) == project.query(
        q, optimize_use_projections=0
    )
    _assert_groupby_matches_final(project)
    s.assert_invariants()


def test_full_refresh_whose_load_fails_keeps_the_old_data(project):
    """The load runs before the swap: a source that errors half-way through a --full-refresh leaves the old table,
    its data and its objects serving, and the next good full refresh replaces them."""
    s = Scenario(project, COLS, {"unique_key": "id"}, select=WITH_Y)
    s.run_batch(_rows(5, 1))
    s.run_batch([(0, "a", 0, 0, 2, -1)])
    rows = s.final_rows()
    before = {k: v for k, v in _objects(project).items() if "vcmt_new" not in k}
    # The SELECT's schema reads no row; the load reads them and fails on the source's error.
    s.write_model(WITH_Y + " from `m_src` where throwIf(`amount` = 999, 'source broke mid-load') = 0 --")
    run = s.run_batch(_rows(5, 3) + [(9, "a", 999, 0, 3, 1)], "--full-refresh", expect_pass=False)
    assert "source broke mid-load" in run.log
    assert {k: v for k, v in _objects(project).items() if "vcmt_new" not in k} == before
    assert s.final_rows() == rows
    assert project.scalar("select count() from m__tombstones") == 1
    _insert_into_stage(project, [{"id": 1, "status": "z", "amount": 1, "y": 9, "_version": 7, "sign": 1}])
    assert project.query("select amount from m final where sign = 1 and id = 1") == [(1,)]
    # The next full refresh clears what the failed one left under the staging names.
    s.run_batch(_rows(2, 4), "--full-refresh")
    assert s.final_rows() == [(0, "a", 4, 0, 4), (1, "b", 14, 1, 4)]
    assert not [k for k in _objects(project) if "vcmt_new" in k]
    _assert_groupby_matches_final(project)


def test_full_refresh_names_the_downstream_views_to_rebuild(project):
    """A user's materialized view on `m` (the README's downstream aggregate) never counts rows twice: the rebuild's
    inserts do not reach it, the run names it with what to run, and doing so makes it equal the model."""
    s = Scenario(project, COLS, {"unique_key": "id"}, select=WITH_Y)
    s.run_batch(_rows(4, 1))
    project.command("create table agg (status String, n Int64, amount Int64) engine = SummingMergeTree order by status")
    view = "select status, sum(sign) as n, sum(amount * sign) as amount from m group by status"
    project.command(f"create materialized view agg_writer to agg as {view}")
    project.command(f"insert into agg {view}")
    s.run_batch([(1, "b", 100, 0, 2, 1), (7, "a", 7, 0, 1, 1)])
    totals = "select status, sum(n), sum(amount) from agg group by status having sum(n) != 0 order by status"
    model = "select status, sum(sign), sum(amount * sign) from m group by status having sum(sign) != 0 order by status"
    assert project.query(totals) == project.query(model)
    old = project.query(totals)
    run = s.run_batch(_rows(2, 5), "--full-refresh")
    assert f"materialized view {project.schema}.agg_writer reads m" in run.log
    assert f"TRUNCATE TABLE {project.schema}.agg" in run.log
    assert project.query(totals) == old, "the rebuild's inserts reached the downstream view"
    project.command("truncate table agg")
    project.command(f"insert into agg {view}")
    assert project.query(totals) == project.query(model) == [("a", 1, 5), ("b", 1, 15)]
    # Later runs keep it exact.
    s.run_batch([(0, "a", 1, 0, 6, 1), (1, "b", 0, 0, 6, -1)])
    assert project.query(totals) == project.query(model)


TYPED = {"id": "Int32", "s": "String", "n": "Int64", "d": "Decimal(18, 4)", "_version": "UInt64", "sign": "Int8"}
TYPED_SELECT = ["`id`", "`s`", "`n`", "`d`", "`_version`", "`sign`"]


@pytest.mark.parametrize(
    "column, expression, old, new, sample",
    [
        ("n", "toInt32(`n`) as `n`", "Int64", "Int32", "1099511627776"),
        ("d", "cast(`d` as Decimal(18, 2)) as `d`", "Decimal(18, 4)", "Decimal(18, 2)", "1.2345"),
        ("s", "toInt64OrZero(`s`) as `s`", "String", "Int64", "abc"),
    ],
)
def test_a_type_change_the_stored_rows_cannot_take_fails_before_any_ddl(
    module_project, m, column, expression, old, new, sample
):
    """sync_all_columns checks a type change against every stored row with the loader's rule: a narrowing that would
    rewrite values, or a retype the data cannot take, is refused naming the column, both types and a value. The
    cases share one project, each with a model of its own."""
    project = module_project
    s = Scenario(
        project,
        TYPED,
        {"unique_key": "id", "on_schema_change": "sync_all_columns"},
        select=", ".join(TYPED_SELECT),
        name=m,
    )
    s.run_batch([(1, "abc", 2**40, "1.2345", 1, 1), (2, "7", 5, "2.5", 1, 1)])
    before, rows = _objects(project, m), s.final_rows()
    s.write_model(", ".join(expression if c == f"`{column}`" else c for c in TYPED_SELECT))
    run = s.run_batch([(3, "9", 1, "1", 2, 1)], expect_pass=False)
    assert f"cannot change the type of column `{column}`" in run.log, run.log[-3000:]
    assert f"from {old} to {new}" in run.log and f"e.g. {sample}" in run.log and "Nothing was changed" in run.log
    assert _objects(project, m) == before
    assert {r[0]: r[1] for r in project.query(f"describe table {m}")}[column] == old
    assert s.final_rows() == rows
    assert (
        project.scalar(f"select count() from system.mutations where database = currentDatabase() and table = '{m}'")
        == 0
    )


def test_a_type_change_the_stored_rows_can_take_is_applied(project):
    """The same check lets through what keeps every value: a wider integer, a scale the values fit, digits in text."""
    s = Scenario(
        project, TYPED, {"unique_key": "id", "on_schema_change": "sync_all_columns"}, select=", ".join(TYPED_SELECT)
    )
    s.run_batch([(1, "42", 7, "1.25", 1, 1), (2, "-3", 5, "2.5", 1, 1)])
    s.write_model(
        "`id`, toInt64OrZero(`s`) as `s`, toInt32(`n`) as `n`, cast(`d` as Decimal(18, 2)) as `d`, `_version`, `sign`"
    )
    s.run_batch([(2, "8", 6, "3.75", 2, 1)])
    types = {r[0]: r[1] for r in project.query("describe table m")}
    assert (types["s"], types["n"], types["d"]) == ("Int64", "Int32", "Decimal(18, 2)")
    assert project.query("select id, s, n, toString(d) from m final where sign = 1 order by id") == [
        (1, 42, 7, "1.25"),
        (2, 8, 6, "3.75"),
    ]
    s.assert_invariants()
