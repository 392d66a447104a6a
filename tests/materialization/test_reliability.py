"""Hostile input must never cost data or leave a model stuck (issue: reliability).

Each test reproduces a failure of vcmt 0.1.0 through dbt commands on the real
chDB engine and checks the fixed behaviour.
"""

from __future__ import annotations

import random

import pytest

from tests.conftest import make_project
from tests.materialization.scenario import Scenario, expected_rows, oracle_events
from vcmt_lab.oracle import Oracle

# The embedded engine; over HTTP too under VCMT_ENGINE_MATRIX=1 (tests/conftest.py). On a served node in make test
# too (ON_A_SERVER_TOO): what dbt-clickhouse carries differently from the embedded engine's client, i.e. settings
# (the profile's, a statement's, insert_settings) and SQL text that quoting or a trailing comment could break.
pytestmark = pytest.mark.engines("chdb", matrix=("http",))
ON_A_SERVER_TOO = pytest.mark.engines("chdb", "http")

# Every alias the 0.1.0 transform used internally, as user column names.
HOSTILE = {
    "_k0": "Int32",
    "_nv": "Int64",
    "_ov": "Int64",
    "_s": "Int8",
    "_n0": "String",
    "_o0": "String",
    "_has_old": "UInt8",
    "_tv": "Int64",
    "n": "Int32",
    "o": "Int32",
    "_version": "UInt64",
    "sign": "Int8",
}


def _random_batches(columns, keys, n_batches=4, per_batch=40, seed=7):
    rng = random.Random(seed)
    version = 0
    batches = []
    for _ in range(n_batches):
        rows = []
        for _ in range(per_batch):
            version += rng.randint(0, 2)
            row = []
            for c, t in columns.items():
                if c in keys:
                    row.append(rng.randint(1, 12))
                elif c == "_version":
                    row.append(version)
                elif c == "sign":
                    row.append(-1 if rng.random() < 0.2 else 1)
                elif t == "String":
                    row.append(rng.choice(["a", "b", "c"]))
                elif t.startswith("U"):
                    row.append(rng.randint(0, 200))
                else:
                    row.append(rng.randint(-100, 100))
            rows.append(tuple(row))
        batches.append(rows)
    return batches


def _check_against_oracle(s: Scenario, batches, merge=None):
    cols = list(s.columns)
    oracle = Oracle([c for c in cols if c not in (*s.keys, "_version", "sign")], merge)
    for rows in batches:
        s.run_batch(rows)
        oracle.apply_batch(oracle_events(rows, cols, s.keys))
    assert s.final_rows() == expected_rows(oracle, cols, s.keys)
    s.assert_invariants()


@pytest.mark.parametrize("merge", [{}, {"_nv": "sum", "_n0": "coalesce"}], ids=["fold", "rounds"])
def test_columns_named_like_internal_aliases_are_applied_exactly(project, merge):
    """0.1.0 resolved `_nv`, `_s`, `_k0`... to the user's columns: wrong versions, signs and keys."""
    s = Scenario(project, HOSTILE, {"unique_key": "_k0", "merge": merge})
    _check_against_oracle(s, _random_batches(HOSTILE, ["_k0"]), merge)


def test_reserved_prefix_is_refused_before_any_ddl(project):
    s = Scenario(project, {"id": "Int32", "_vcmt_sign": "Int8", "_version": "UInt64"}, {"unique_key": "id"})
    run = s.run_batch([(1, 1, 1)], expect_pass=False)
    assert "`_vcmt_sign` starts with `_vcmt_`" in run.log
    assert project.query("select name from system.tables where database = currentDatabase() and name != 'm_src'") == []


def _new_keys_survive(project, s: Scenario):
    s.run_batch([(1, 10, 1, 1), (2, 20, 1, 1)])
    s.run_batch([(1, 11, 2, 1), (3, 30, 1, 1), (2, 0, 2, -1)])
    assert s.final_rows() == [(1, 21, 2), (3, 30, 1)]
    s.assert_invariants()


def test_join_use_nulls_in_the_profile_changes_nothing(tmp_path, chdb_path, lab_dir):
    """0.1.0: join_use_nulls=1 in the profile made every new key vanish as 'skipped'."""
    project = make_project(
        tmp_path / "proj",
        "join_use_nulls_profile",
        chdb_path,
        lab_dir,
        custom_settings={"join_use_nulls": 1, "aggregate_functions_null_for_empty": 1},
    )
    try:
        s = Scenario(
            project,
            {"id": "Int32", "x": "Int32", "_version": "UInt64", "sign": "Int8"},
            {"unique_key": "id", "merge": {"x": "sum"}},
        )
        _new_keys_survive(project, s)
    finally:
        project.close()


@ON_A_SERVER_TOO
def test_join_use_nulls_in_a_direct_insert_changes_nothing(project):
    """An external writer's session setting cannot change what the transform computes."""
    s = Scenario(project, {"id": "Int32", "x": "Int32", "_version": "UInt64", "sign": "Int8"}, {"unique_key": "id"})
    s.run_batch([(1, 10, 1, 1)])
    project.command("insert into m__stage (id, x, _version, sign) values (2, 20, 1, 1)", join_use_nulls=1)
    project.command("insert into m__stage (id, x, _version, sign) values (1, 11, 2, 1)", join_use_nulls=1)
    assert s.final_rows() == [(1, 11, 2), (2, 20, 1)]
    s.assert_invariants()


@ON_A_SERVER_TOO
def test_insert_settings_cannot_change_a_pinned_setting(project):
    s = Scenario(
        project,
        {"id": "Int32", "x": "Int32", "_version": "UInt64"},
        {"unique_key": "id", "insert_settings": {"join_use_nulls": 1}},
    )
    run = s.run_batch([(1, 1, 1)], expect_pass=False)
    assert "`insert_settings` cannot set `join_use_nulls`" in run.log


@ON_A_SERVER_TOO
def test_insert_settings_cannot_set_the_log_comment_that_names_the_load(project):
    """Another load of the model sees that this one still runs by its statements' `log_comment`."""
    s = Scenario(
        project,
        {"id": "Int32", "x": "Int32", "_version": "UInt64"},
        {"unique_key": "id", "insert_settings": {"log_comment": "mine"}},
    )
    run = s.run_batch([(1, 1, 1)], expect_pass=False)
    assert "`insert_settings` cannot set `log_comment`" in run.log and "Remove it from `insert_settings`" in run.log


@ON_A_SERVER_TOO
def test_insert_settings_may_tune_the_loader(project):
    s = Scenario(
        project,
        {"id": "Int32", "x": "Int32", "_version": "UInt64"},
        {"unique_key": "id", "insert_settings": {"max_insert_threads": 2, "insert_deduplicate": 0}},
    )
    s.run_batch([(1, 1, 1), (2, 2, 1)])
    assert s.final_rows() == [(1, 1, 1), (2, 2, 1)]


# -- the watermark ------------------------------------------------------------
WATERMARKED = """
{{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id') }}
select id, x, _version, _batch_id from src
{% if vcmt.is_incremental() %} where _batch_id > {{ vcmt.watermark(default=-1) }} {% endif %}
"""


def _loads(project):
    return project.query("select events, watermark from m__loads order by loaded_at")


def test_watermark_empty_runs_move_nothing_and_batch_zero_is_read(project):
    """0.1.0 recorded '0' for an empty run, so batch 0 was skipped for ever."""
    project.command(
        "create table src (id Int32, x Int32, _version UInt64, _batch_id UInt32) engine = MergeTree order by id"
    )
    project.model("m", WATERMARKED)
    project.dbt("run")  # deployed before any data lands
    project.dbt("run")  # and run again, still empty
    assert _loads(project) == [(0, None), (0, None)]
    project.command("insert into src values (1, 10, 1, 0), (2, 20, 1, 0)")
    project.dbt("run")
    assert project.query("select id, x from m final where sign = 1 order by id") == [(1, 10), (2, 20)]
    project.dbt("run")  # empty again: moves nothing, the next run reads only batch 1
    project.command("insert into src values (1, 11, 2, 1)")
    project.dbt("run")
    assert _loads(project)[2:] == [(2, "0"), (0, None), (1, "1")]


def test_watermark_compares_as_numbers_and_backfills_never_lower_it(project):
    project.command(
        "create table src (id Int32, x Int32, _version UInt64, _batch_id UInt32) engine = MergeTree order by id"
    )
    project.command(
        "create table old_batches (id Int32, x Int32, _version UInt64, _batch_id UInt32) engine = MergeTree order by id"
    )
    project.model("m", WATERMARKED)
    project.command("insert into src values (1, 1, 1, 9)")
    project.dbt("run")
    project.command("insert into src values (2, 1, 1, 10)")  # '10' < '9' as text
    project.dbt("run")
    assert _loads(project)[-1] == (1, "10")
    project.command("insert into old_batches values (3, 1, 1, 2)")
    project.dbt(
        "run-operation",
        "vcmt.load_stage",
        "--args",
        "{model: m, sql: 'select id, x, _version, _batch_id from old_batches', move_watermark: true}",
    )
    assert _loads(project)[-1] == (1, "10")
    project.command("insert into src values (4, 1, 1, 11)")
    project.dbt("run")
    assert _loads(project)[-1] == (1, "11")
    assert project.query("select id from m final where sign = 1 order by id") == [(1,), (2,), (3,), (4,)]


@ON_A_SERVER_TOO
def test_watermark_value_with_a_backslash(project):
    """0.1.0 wrote the value unescaped: the next run's SELECT could not parse it."""
    project.command(
        "create table src (id Int32, x Int32, _version UInt64, _batch String) engine = MergeTree order by id"
    )
    project.model(
        "m",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch') }}
        select id, x, _version, _batch from src
        {% if vcmt.is_incremental() %} where _batch > {{ vcmt.watermark(default="''") }} {% endif %}
    """,
    )
    project.command("insert into src values (1, 1, 1, 'a\\\\b''c')")
    project.dbt("run")
    project.command("insert into src values (2, 1, 1, 'b')")
    project.dbt("run")
    project.dbt("run")
    assert _loads(project) == [(1, "a\\b'c"), (1, "b"), (0, None)]


@pytest.mark.engines("chdb")
@pytest.mark.parametrize(
    ("column_type", "first", "second"),
    [
        ("UInt256", "toUInt256(pow(2, 200)) + 1", "toUInt256(pow(2, 200)) + 2"),
        ("Int128", "toInt128(-pow(2, 100)) + 1", "toInt128(-pow(2, 100)) + 2"),
        ("Float32", "toFloat32(149 / 7)", "toFloat32(150 / 7)"),
        ("String", "'1'", "'2'"),
    ],
)
def test_watermark_of_any_type_reads_each_batch_once(project, column_type, first, second):
    """vcmt.watermark() rendered a recorded number as a number literal, which the engine reads as a 64-bit
    number: a UInt256 watermark skipped the next batch, an Int128 or a Float32 one read its last batch again,
    and a String one made of digits failed the run (no supertype for String and UInt8). It gives the recorded
    text, which the engine converts to the column's type where the column is compared with it."""
    project.command(
        f"create table src (id Int32, x Int32, _version UInt64, _batch {column_type}) engine = MergeTree order by id"
    )
    project.model(
        "m",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch') }}
        select id, x, _version, _batch from src
        {% if vcmt.is_incremental() %} where _batch > {{ vcmt.watermark() }} {% endif %}
    """,
    )
    project.command(f"insert into src select 1, 1, 1, {first}")
    project.dbt("run")
    project.command(f"insert into src select 2, 2, 1, {second}")
    project.dbt("run")
    assert [events for events, _ in _loads(project)] == [1, 1]
    assert project.query("select id from m final where sign = 1 order by id") == [(1,), (2,)]


# -- SQL text the user writes --------------------------------------------------
@ON_A_SERVER_TOO
def test_model_ending_in_a_line_comment_loads_on_every_run(project):
    project.command("create table src (id Int32, x Int32, _version UInt64) engine = MergeTree order by id")
    project.command("insert into src values (1, 1, 1)")
    project.model("m", "{{ config(materialized='vcmt_upsert', unique_key='id') }}\nselect * from src\n-- the end")
    project.dbt("run")
    project.command("insert into src values (1, 2, 2)")
    project.dbt("run")
    assert project.query("select id, x from m final where sign = 1") == [(1, 2)]


@ON_A_SERVER_TOO
def test_column_name_with_a_backtick_and_a_backslash(project):
    """0.1.0 built once, then failed in the view comparison on every later run."""
    col = "`we\\`ird\\\\name`"  # the identifier we`ird\name, quoted
    project.command(
        f"create table src (id Int32, {col} Int32, x Int32, _version UInt64) engine = MergeTree order by id"
    )
    project.model(
        "m",
        "{{ config(materialized='vcmt_upsert', unique_key='id', merge={'x': 'sum'}) }}\n"
        f"select id, {col}, x, _version from src",
    )
    for version in (1, 2, 3):
        project.command("truncate table src")
        project.command(f"insert into src values (1, {version}, {version}, {version})")
        project.dbt("run")
    assert project.query(f"select id, {col}, x from m final where sign = 1") == [(1, 3, 6)]


@ON_A_SERVER_TOO
def test_partition_key_with_a_trailing_comment(project):
    s = Scenario(
        project,
        {"id": "Int32", "x": "Int32", "_version": "UInt64"},
        {"unique_key": "id", "partition_by": "id % 4 -- four partitions"},
    )
    s.run_batch([(1, 1, 1), (2, 2, 1)])
    s.run_batch([(1, 5, 2)])
    assert s.final_rows() == [(1, 5, 2), (2, 2, 1)]
