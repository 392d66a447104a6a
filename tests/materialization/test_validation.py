"""Bad config and bad SELECTs fail at compile time, before any DDL, with a message that says how to fix it."""

from __future__ import annotations

import time

import pytest

from tests.materialization.scenario import Scenario

# The embedded engine; over HTTP too under VCMT_ENGINE_MATRIX=1 (tests/conftest.py). These checks are vcmt's macros
# and the engine's own parse of the config's SQL, which a served node runs as chDB does. What reaches a served
# node through dbt-clickhouse (names needing quotes) runs there in make test too: ON_A_SERVER_TOO.
pytestmark = pytest.mark.engines("chdb", matrix=("http",))
ON_A_SERVER_TOO = pytest.mark.engines("chdb", "http")

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
        "{'unique_key': 'id'}",
        SRC.replace("toUInt64(1) as _version", "'1' as _version"),
        "needs a non-Nullable integer, Date, Date32, DateTime or DateTime64",
    ),
    "float_version": (
        "{'unique_key': 'id'}",
        SRC.replace("toUInt64(1) as _version", "toFloat64(1) as _version"),
        "has type Float64",
    ),
    "unknown_merge_policy": (
        "{'unique_key': 'id', 'merge': {'x': 'avg'}}",
        SRC,
        "`merge` for column `x` must be one of ['replace', 'keep', 'greatest', 'least', 'sum', 'coalesce']",
    ),
    "merge_on_key": (
        "{'unique_key': 'id', 'merge': {'id': 'sum'}}",
        SRC,
        "key, version and sign columns are never merged",
    ),
    "merge_unknown_column": ("{'unique_key': 'id', 'merge': {'y': 'sum'}}", SRC, "`merge` names column `y`"),
    "bad_delete_mode": ("{'unique_key': 'id', 'delete_mode': 'soft'}", SRC, "`delete_mode` must be one of"),
    "misspelt_config_key": (
        "{'unique_key': 'id', 'delete_mod': 'unconditional'}",
        SRC,
        "unknown config key `delete_mod`: did you mean `delete_mode`?",
    ),
    "misspelt_dbt_config_key": (
        "{'unique_key': 'id', 'tag': ['daily']}",
        SRC,
        "unknown config key `tag`: did you mean `tags`?",
    ),
    # Every misspelt key in one run, not the first one per run.
    "two_misspelt_config_keys": (
        "{'unique_key': 'id', 'delete_mod': 'unconditional', 'virtual_shard': 2}",
        SRC,
        "unknown config keys `delete_mod` (did you mean `delete_mode`?), `virtual_shard` (did you mean "
        "`virtual_shards`?): vcmt_upsert reads unique_key,",
    ),
    "unknown_config_key": (
        "{'unique_key': 'id', 'owner_team': 'sales'}",
        SRC,
        "unknown config key `owner_team`: vcmt_upsert reads unique_key, version, sign,",
    ),
    # A comment to the end of the line swallows what follows it in one string: `id` is not in the sorting key.
    "order_by_key_in_a_comment": (
        "{'unique_key': 'id', 'order_by': 'x -- by x, id'}",
        SRC,
        "`order_by` must contain every `unique_key` column",
    ),
    "order_by_key_after_a_slash_comment": (
        "{'unique_key': 'id', 'order_by': 'x // by x, id'}",
        SRC,
        "`order_by` must contain every `unique_key` column",
    ),
    "order_by_without_key": (
        "{'unique_key': 'id', 'order_by': ['x']}",
        SRC,
        "`order_by` must contain every `unique_key` column",
    ),
    "projection_count": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select x, count() group by x'}]}",
        SRC,
        "uses the aggregate `count()`",
    ),
    "projection_max": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select max(x) group by id'}]}",
        SRC,
        "uses the aggregate `max()`",
    ),
    "projection_unweighted_sum": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x) group by id'}]}",
        SRC,
        "uses `sum(x)`, which is not weighted by `sign`",
    ),
    "projection_sign_not_top_level": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x + x * sign) group by id'}]}",
        SRC,
        "is not weighted by `sign`",
    ),
    # Projections: an allow-list checked on the engine's parse tree (issue #9).
    "projection_group_bitmap": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select x, groupBitmap(id) group by x'}]}",
        SRC,
        "uses the aggregate `groupBitmap()`, which collapsing cannot keep correct",
    ),
    "projection_sign_squared": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x * sign * sign) group by id'}]}",
        SRC,
        "uses `sum(x * sign * sign)`, which is not weighted by `sign`",
    ),
    "projection_sign_inside_factor": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(sign * if(sign > 0, x, -x)) group by id'}]}",
        SRC,
        "uses `sum(sign * if(sign > 0, x, -x))`, which is not weighted by `sign`",
    ),
    "projection_negated_sign": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x * -sign) group by id'}]}",
        SRC,
        "uses `sum(x * -sign)`, which is not weighted by `sign`",
    ),
    # The argument quoted in the message is cut at its own closing parenthesis, not at one inside a string.
    "projection_sum_paren_in_string": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': \"select id, sum(x * (toString(x) != ')')) group by id\"}]}",
        SRC,
        "uses `sum(x * (toString(x) != ')'))`, which is not weighted by `sign`",
    ),
    "projection_sum_if": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sumIf(x * sign, x > 1) group by id'}]}",
        SRC,
        "Write sumIf(x, cond) as sum(if(cond, x, 0) * sign)",
    ),
    "projection_sum_distinct": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(distinct x * sign) group by id'}]}",
        SRC,
        "uses the aggregate `sumDistinct()`",
    ),
    "projection_count_combinator": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, uniqExactArrayIf([x], x > 0) group by id'}]}",
        SRC,
        "uses the aggregate `uniqExactArrayIf()`",
    ),
    "projection_group_by_sign": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select sign, sum(x * sign) group by sign'}]}",
        SRC,
        "uses `sign` outside a sign-weighted sum",
    ),
    "projection_where_on_sign": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x * sign) where sign > 0 group by id'}]}",
        SRC,
        "uses `sign` outside a sign-weighted sum",
    ),
    "projection_product_of_sums": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x * sign) * sum(sign) group by id'}]}",
        SRC,
        "uses the aggregate `sum()` inside an expression",
    ),
    "projection_subquery": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(x * sign) where x in (select 1) group by id'}]}",
        SRC,
        "uses a subquery, a window or `*`",
    ),
    "projection_non_deterministic": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select id, sum(if(toDateTime(x) < now(), x, 0) * sign) group by id'}]}",
        SRC,
        "uses `now()`, whose result can differ between a state row and the cancel row",
    ),
    "projection_with": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'with 2 as k select id, sum(x * sign) group by id'}]}",
        SRC,
        "must start with SELECT (no WITH)",
    ),
    # TTL: anything that removes rows breaks +1/-1 pairs (see test_ttl_that_drops_parts_breaks_collapsing).
    "ttl_delete": (
        "{'unique_key': 'id', 'ttl': 'toDateTime(x) + interval 1 day'}",
        SRC,
        "`ttl` may only move or recompress parts",
    ),
    # Commented out, the move is gone: what is left deletes rows.
    "ttl_move_commented_out": (
        "{'unique_key': 'id', 'ttl': \"toDateTime(x) + interval 1 day -- to disk 'default'\"}",
        SRC,
        "`ttl` may only move or recompress parts",
    ),
    "ttl_delete_where_after_a_move": (
        "{'unique_key': 'id', 'ttl': \"toDateTime(x) + interval 1 day to disk 'default', toDateTime(x) + interval 2 day delete where x > 1\"}",
        SRC,
        "got `toDateTime(x) + toIntervalDay(2) WHERE x > 1` (as ClickHouse reads it), which removes or rolls up rows",
    ),
    "ttl_only_drop_parts": (
        "{'unique_key': 'id', 'settings': {'ttl_only_drop_parts': 1}}",
        SRC,
        "`settings` may not set `ttl_only_drop_parts`; got `1`",
    ),
    # Float keys: 0.0 and -0.0 are equal yet two keys to GROUP BY and IN.
    "float_key": (
        "{'unique_key': 'id'}",
        SRC.replace("toInt32(number) as id", "toFloat64(number) as id"),
        "`unique_key` column `id` is Float64; floating-point key columns cannot identify a row",
    ),
    "float32_in_composite_key": (
        "{'unique_key': ['id', 'f']}",
        SRC.replace(" from numbers", ", toFloat32(number) as f from numbers"),
        "`unique_key` column `f` is Float32",
    ),
    "projection_not_aggregating": (
        "{'unique_key': 'id', 'projections': [{'name': 'p', 'query': 'select * order by x'}]}",
        SRC,
        "must be an aggregating projection",
    ),
    "indexes_not_a_list": (
        "{'unique_key': 'id', 'indexes': 'id TYPE bloom_filter GRANULARITY 1'}",
        SRC,
        "`indexes` must be a list of skip indexes, e.g. indexes=[{'name': 'key_bf', 'definition': 'id TYPE bloom_filter(0.0001) GRANULARITY 1'}]",
    ),
    "index_without_definition": (
        "{'unique_key': 'id', 'indexes': [{'name': 'bf'}]}",
        SRC,
        "each entry of `indexes` must be a dict with a `name` and a `definition`",
    ),
    "index_definition_not_sql": (
        "{'unique_key': 'id', 'indexes': [{'name': 'bf', 'definition': 'id TYPE bloom_filter( GRANULARITY'}]}",
        SRC,
        "`indexes` entry `bf` (id TYPE bloom_filter( GRANULARITY)",
    ),
    "index_on_unknown_column": (
        "{'unique_key': 'id', 'indexes': [{'name': 'bf', 'definition': 'nope TYPE bloom_filter GRANULARITY 1'}]}",
        SRC,
        "Missing columns: 'nope'",
    ),
    "virtual_shards_not_a_count": (
        "{'unique_key': 'id', 'virtual_shards': 0}",
        SRC,
        "`virtual_shards` must be a whole number of parallel streams from 1 to 64, or 'auto'; got `0`. Fix it in the model's config",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_model_fails_before_any_ddl(module_project, case):
    """Each validation rule raises its own message and creates no object. The cases share one project (a
    fresh one costs a full parse), whose schema therefore stays empty only while every case creates nothing."""
    config, sql, message = CASES[case]
    module_project.model("m", f"{{{{ config(materialized='vcmt_upsert', **{config}) }}}}\n{sql}")
    run = module_project.dbt("run", "--select", "m", expect_pass=False)
    assert message in run.log, run.log[-3000:]
    assert module_project.query(f"select name from system.tables where database = '{module_project.schema}'") == []


def test_projection_error_explains_why_collapsing_breaks_it(project):
    """The projection message explains which aggregates stay exact and why."""
    config, sql, _ = CASES["projection_count"]
    project.model("m", f"{{{{ config(materialized='vcmt_upsert', **{config}) }}}}\n{sql}")
    run = project.dbt("run", "--select", "m", expect_pass=False)
    assert "a cancel row subtracts exactly what its state row added" in run.log
    assert "Use sum(sign) for counts" in run.log


@ON_A_SERVER_TOO
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
    proj = project.query(
        "select `group`, sum(`from` * `op sign`) from m group by `group`",
        optimize_use_projections=1,
        force_optimize_projection=1,
    )
    assert proj == [("g", 5)]


@pytest.mark.parametrize("before", ["table", "view"])
def test_table_not_built_by_vcmt_upsert_asks_for_full_refresh(project, before):
    """Switching an existing plain table or view to vcmt_upsert needs --full-refresh, and says so, also for a
    model partitioned by its key (whose default sorting key is then read from the relation, which a view has
    none of)."""
    project.model("m", f"{{{{ config(materialized='{before}', order_by='id') }}}}\n" + SRC)
    project.dbt("run")
    project.model("m", "{{ config(materialized='vcmt_upsert', unique_key='id', partition_by='id % 2') }}\n" + SRC)
    run = project.dbt("run", expect_pass=False)
    assert "was not built by vcmt_upsert" in run.log and "--full-refresh" in run.log
    project.dbt("run", "--full-refresh")
    assert (
        project.scalar("select engine from system.tables where database = currentDatabase() and name = 'm'")
        == "VersionedCollapsingMergeTree"
    )


def test_exact_projection_forms_are_accepted_and_agree_with_final(project):
    """Every form the projection check accepts builds, and stays equal to the base table and FINAL through updates and deletes."""
    cols = {"id": "Int32", "g": "String", "x": "Int64", "_version": "UInt64", "sign": "Int8"}
    query = (
        "select g, sum(sign) as n, sum(x * sign), sum(sign * (x + 1)), sum(2 * x * sign), "
        "sum(if(x > 5, x, 0) * sign) where x != 3 group by g"
    )
    s = Scenario(project, cols, {"unique_key": "id", "projections": [{"name": "p", "query": query}]})
    s.run_batch([(i, "ab"[i % 2], i, 1, 1) for i in range(10)])
    s.run_batch([(1, "a", 30, 2, 1), (2, "b", 3, 2, 1), (4, "a", 0, 2, -1), (3, "a", 7, 2, 1)])
    q = (
        "select g, sum(sign), sum(x * sign), sum(sign * (x + 1)), sum(2 * x * sign), sum(if(x > 5, x, 0) * sign) "
        "from m where x != 3 group by g order by g"
    )
    via_projection = project.query(q, optimize_use_projections=1, force_optimize_projection=1)
    base = project.query(q, optimize_use_projections=0)
    final = project.query(
        "select g, count(), sum(x), sum(x + 1), sum(2 * x), sum(if(x > 5, x, 0)) "
        "from m final where sign = 1 and x != 3 group by g order by g"
    )
    assert via_projection == base == final


def test_ttl_that_drops_parts_breaks_collapsing(project):
    """Why `ttl_only_drop_parts` is refused: the engine drops the expired +1's part and keeps its -1, for good."""
    project.command(
        "create table pairs (k Int32, d DateTime, v UInt64, sign Int8) "
        "engine = VersionedCollapsingMergeTree(sign, v) order by k ttl d + interval 1 day "
        "settings ttl_only_drop_parts = 1, merge_with_ttl_timeout = 0"
    )
    # Key 1's state (+1), then its cancel (-1) in a later part next to a fresh row: what the transform writes.
    project.command("insert into pairs values (1, now() - interval 10 day, 1, 1)")
    project.command("insert into pairs values (1, now() - interval 10 day, 1, -1), (2, now(), 1, 1)")
    deadline = time.time() + 60
    while project.scalar("select count() from pairs where k = 1 and sign = 1") and time.time() < deadline:
        time.sleep(0.2)
    # The +1 part is gone, the -1 is not: GROUP BY with sign says key 1 has -1 rows, FINAL says none.
    assert project.query("select k, sum(sign) from pairs group by k order by k") == [(1, -1), (2, 1)]
    assert project.query("select k from pairs final where sign = 1 order by k") == [(2,)]
    # ... which is why the model config is refused before any DDL.
    project.model(
        "m",
        "{{ config(materialized='vcmt_upsert', unique_key='id', ttl='toDateTime(x) + interval 1 day', "
        "settings={'ttl_only_drop_parts': 1}) }}\n" + SRC,
    )
    run = project.dbt("run", "--select", "m", expect_pass=False)
    assert (
        "may not set `ttl_only_drop_parts`" in run.log
        and "GROUP BY with sign arithmetic no longer equals FINAL" in run.log
    )
    assert "m" not in [r[0] for r in project.query("select name from system.tables where database = currentDatabase()")]


def test_ttl_that_only_moves_or_recompresses_parts_is_accepted(project):
    """TO DISK / TO VOLUME / RECOMPRESS keep every row, so pairs stay intact and the table is built with them."""
    ttl = "toDateTime(x) + interval 1 day to disk 'default', toDateTime(x) + interval 2 day recompress codec(ZSTD(3))"
    project.model("m", f"{{{{ config(materialized='vcmt_upsert', unique_key='id', ttl=\"{ttl}\") }}}}\n" + SRC)
    project.dbt("run", "--select", "m")
    create = project.scalar(
        "select create_table_query from system.tables where database = currentDatabase() and name = 'm'"
    )
    assert "TO DISK 'default'" in create and "RECOMPRESS CODEC(ZSTD(3))" in create


COLS = {"id": "Int32", "x": "Int64", "_version": "UInt64", "sign": "Int8"}

LAYOUT_CHANGES = {
    "order_by": ({}, {"order_by": ["id", "x"]}, "`order_by` changed", "stored `(id)`; got `(id, x)`"),
    "partition_by": ({}, {"partition_by": "x % 2"}, "`partition_by` changed", "stored `none`; got `(x % 2)`"),
    "primary_key": (
        {"order_by": ["id", "x"]},
        {"order_by": ["id", "x"], "primary_key": "id"},
        "`primary_key` changed",
        "stored `none`; got `(id)`",
    ),
    "ttl": (
        {"ttl": "toDateTime(x) + interval 1 day to disk 'default'"},
        {"ttl": "toDateTime(x) + interval 9 day to disk 'default'"},
        "`ttl` changed",
        "got `toDateTime(x) + toIntervalDay(9) TO DISK 'default'`",
    ),
    "setting_changed": (
        {"settings": {"index_granularity": 4096}},
        {"settings": {"index_granularity": 1024}},
        "`settings` changed",
        "got `index_granularity: 4096 -> 1024`",
    ),
    "setting_removed": (
        {"settings": {"index_granularity": 4096}},
        {},
        "`settings` changed",
        "got `index_granularity: 4096 -> default`",
    ),
}


@pytest.mark.parametrize("case", sorted(LAYOUT_CHANGES))
def test_layout_change_without_full_refresh_fails_before_any_ddl(module_project, case):
    """A changed table layout is no longer ignored in silence: the run fails, names old and new, and --full-refresh applies it."""
    project, m = module_project, f"layout_{case}"  # one project for every case (a fresh one costs a full parse)
    before, after, setting, values = LAYOUT_CHANGES[case]
    s = Scenario(project, COLS, {"unique_key": "id", **before}, name=m)
    s.run_batch([(1, 1, 1, 1), (2, 2, 1, 1)])
    s.run_batch([(3, 3, 1, 1)])  # an unchanged config runs again without complaint
    stored = f"select create_table_query from system.tables where database = currentDatabase() and name = '{m}'"
    create_before = project.scalar(stored)
    s.config = {"unique_key": "id"}
    s.write_model("`id`, `x`, `_version`, `sign`", **after)
    run = s.run_batch([(4, 4, 1, 1)], expect_pass=False)
    assert setting in run.log and values in run.log and "--full-refresh" in run.log, run.log[-3000:]
    assert project.scalar(stored) == create_before
    assert s.final_rows() == [(1, 1, 1), (2, 2, 1), (3, 3, 1)]
    s.run_batch([(4, 4, 1, 1)], "--full-refresh")
    assert s.final_rows() == [(4, 4, 1)]
    s.run_batch([(5, 5, 1, 1)])


BLOOM = [{"name": "key_bf", "definition": "id TYPE bloom_filter(0.0001) GRANULARITY 1"}]


def test_indexes_are_created_with_the_target_and_a_missing_one_is_named_with_how_to_add_it(project):
    """dbt-clickhouse's `indexes` config was accepted and ignored; now its skip indexes are created with the
    target. An existing target that lacks one fails before any DDL with the ALTER statements that add it, and
    runs again once they ran; results are the same with and without the index."""
    s = Scenario(project, COLS, {"unique_key": "id", "partition_by": "id % 4", "indexes": BLOOM})
    s.run_batch([(i, i, 1, 1) for i in range(40)])
    indexes = (
        "select name, type_full, granularity from system.data_skipping_indices "
        "where database = currentDatabase() and table = 'm'"
    )
    assert project.query(indexes) == [("key_bf", "bloom_filter(0.0001)", 1)]
    s.run_batch([(3, 30, 2, 1), (7, 0, 2, -1), (41, 41, 1, 1)])
    with_index = s.final_rows()

    s.config.pop("indexes")
    s.write_model("`id`, `x`, `_version`, `sign`")
    s.run_batch([(i, i, 1, 1) for i in range(40)], "--full-refresh")
    assert project.query(indexes) == []
    s.run_batch([(3, 30, 2, 1), (7, 0, 2, -1), (41, 41, 1, 1)])
    assert s.final_rows() == with_index

    s.write_model("`id`, `x`, `_version`, `sign`", indexes=BLOOM)
    run = s.run_batch([(5, 50, 3, 1)], expect_pass=False)
    assert "`indexes` lists ['key_bf'], which the existing table" in run.log, run.log[-3000:]
    assert "ADD INDEX `key_bf` id TYPE bloom_filter(0.0001) GRANULARITY 1;" in run.log
    assert "MATERIALIZE INDEX `key_bf`;" in run.log and "--full-refresh" in run.log
    assert s.final_rows() == with_index
    project.command("alter table m add index key_bf id TYPE bloom_filter(0.0001) GRANULARITY 1")
    s.run_batch([(5, 50, 3, 1)])
    assert project.query(indexes) == [("key_bf", "bloom_filter(0.0001)", 1)]
    assert (5, 50, 3) in s.final_rows()


def test_unique_key_change_fails_before_any_ddl_with_how_to_fix(project):
    """Changing unique_key used to fail inside the transform ("Correlated subqueries are not supported in JOINs")."""
    s = Scenario(project, COLS, {"unique_key": "id", "order_by": ["id", "x"]})
    s.run_batch([(1, 1, 1, 1), (2, 2, 1, 1)])
    s.write_model("`id`, `x`, `_version`, `sign`", unique_key=["id", "x"])
    run = s.run_batch([(1, 5, 2, 1)], expect_pass=False)
    assert "`unique_key` changed" in run.log and "keyed by ['id']" in run.log and "got `['id', 'x']`" in run.log, (
        run.log[-3000:]
    )
    assert "--full-refresh" in run.log and "Correlated subqueries" not in run.log
    assert s.final_rows() == [(1, 1, 1), (2, 2, 1)]
    s.run_batch([(1, 5, 2, 1)], "--full-refresh")
    assert s.final_rows() == [(1, 5, 2)]


def test_dbt_and_dbt_clickhouse_config_keys_pass_and_delete_mode_shows(project):
    """dbt's own keys and dbt-clickhouse's are not mistaken for typos; a non-default delete_mode is on the run
    line."""
    project.model(
        "m",
        "{{ config(materialized='vcmt_upsert', unique_key='id', delete_mode='unconditional', "
        "tags=['t'], alias='m', meta={'owner': 'x'}, docs={'show': true}, persist_docs={}, "
        "grants={}, contract={'enforced': false}, full_refresh=none, enabled=true, "
        "on_schema_change='fail', pre_hook=[], post_hook=[], engine='ignored', "
        "query_settings={}, settings={}, order_by=['id'], sql_header=none) }}\n" + SRC,
    )
    run = project.dbt("run", "--select", "m")
    assert "vcmt_upsert m (delete_mode=unconditional): 3 events read" in run.log, run.log[-3000:]


def test_the_known_config_keys_cover_what_dbt_clickhouse_reads():
    """_clickhouse_config_keys lists every field of dbt-clickhouse's model config (dbt's own keys are told apart
    at run time: dbt keeps only unknown keys in its config's `extra`; vcmt's own keys are the declared options,
    tests/test_layout.py)."""
    import dataclasses
    import re
    from pathlib import Path

    from dbt.adapters.clickhouse.impl import ClickHouseConfig

    text = (Path(__file__).resolve().parents[2] / "macros" / "vcmt" / "model" / "config.sql").read_text()

    def listed(macro: str) -> set[str]:
        body = text.split(f"{{% macro {macro}() %}}", 1)[1].split("{% endmacro %}", 1)[0]
        return set(re.findall(r"'([a-z_]+)'", body))

    clickhouse = {f.name for f in dataclasses.fields(ClickHouseConfig)} - {"_extra"}
    assert len(listed("_clickhouse_config_keys")) >= 15
    assert clickhouse - listed("_clickhouse_config_keys") == set(), "dbt-clickhouse keys missing"
