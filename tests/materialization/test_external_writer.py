"""`vcmt-load-stage` and `vcmt.load_stage`: one loader, every value checked before the first INSERT."""

from __future__ import annotations

import json

import pytest

from tests.materialization.scenario import Scenario
from vcmt_cli.load_stage import LoadError, main

# The embedded engine; over HTTP too under VCMT_ENGINE_MATRIX=1 (tests/conftest.py). On a served node in make test
# too (ON_A_SERVER_TOO): files (a served node reads them with its own file(), under its user_files_path), the
# command's refusal of a local path there, and key names needing quotes.
pytestmark = pytest.mark.engines("chdb", matrix=("http",))
ON_A_SERVER_TOO = pytest.mark.engines("chdb", "http")

COLS = {"id": "Int32", "x": "Int64", "_version": "UInt64", "sign": "Int8"}


def _cli(project, path, model="m") -> int:
    return main(
        [
            str(path),
            "--model",
            model,
            "--project-dir",
            str(project.root),
            "--profiles-dir",
            str(project.root),
            "--target",
            project.ch_target,
        ]
    )


def _live(project, table="m"):
    return project.query(f"select * except sign from {table} final where sign = 1 order by 1")


@ON_A_SERVER_TOO
@pytest.mark.parametrize("bad", ["null", "NaN"])
def test_a_null_or_nan_version_fails_the_load_naming_row_and_column(module_project, m, tmp_path, bad):
    """0.1.0 wrote a NULL or NaN version as 0. (The cases share one project, each with a model of its own.)"""
    project = module_project
    s = Scenario(project, COLS, {"unique_key": "id"}, name=m)
    s.run_batch([(1, 1, 1, 1)])
    lines = [{"id": 2, "x": 2, "_version": 1, "sign": 1}, {"id": 3, "x": 3, "_version": None, "sign": 1}]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps(r).replace("null", bad) if r["id"] == 3 else json.dumps(r) for r in lines))
    with pytest.raises(LoadError) as failed:
        project.load_file(m, path)
    err = str(failed.value)
    assert "row 1 of the input" in err and "`_version`" in err and "Nothing was loaded" in err
    assert _live(project, m) == [(1, 1, 1)]


@ON_A_SERVER_TOO
def test_a_bad_value_in_a_later_round_applies_nothing(project, tmp_path):
    """0.1.0 raised on round 2 after round 1 was committed: the input was half-applied."""
    s = Scenario(project, COLS, {"unique_key": "id", "merge": {"x": "sum"}})
    s.run_batch([(1, 1, 1, 1)])
    path = tmp_path / "events.csv"
    path.write_text("id,x,_version,sign\n1,10,2,1\n2,20,1,1\n1,not-a-number,3,1\n")
    with pytest.raises(LoadError, match=r"row 2 of the input \(counting from 0\) has `x` = not-a-number"):
        project.load_file("m", path)
    assert _live(project) == [(1, 1, 1)]
    assert project.scalar("select count() from m__loads") == 1


def test_one_uuid_in_two_spellings_is_one_key(project, tmp_path):
    """0.1.0 compared keys in Python: two spellings went into one INSERT, two live rows."""
    project.command("create table m_src (id UUID, x Int64, _version UInt64) engine = MergeTree order by id")
    project.model("m", "{{ config(materialized='vcmt_upsert', unique_key='id') }}\nselect * from m_src")
    project.dbt("run")
    uid = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    project.load_rows("m", [{"id": uid, "x": 1, "_version": 1}, {"id": uid.upper(), "x": 2, "_version": 2}])
    assert project.query("select toString(id), x, _version from m final where sign = 1") == [(uid, 2, 2)]
    assert project.query("select sum(sign) from m") == [(1,)]


@ON_A_SERVER_TOO
def test_the_model_config_decides_not_the_caller(project, tmp_path):
    """Keys, version and merge policies come from the model: a file cannot contradict them."""
    s = Scenario(project, COLS, {"unique_key": "id", "merge": {"x": "sum"}})
    s.run_batch([(1, 5, 1, 1)])
    path = tmp_path / "events.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.Table.from_pylist(
            [{"id": 1, "x": 7, "_version": 2, "sign": 1}, {"id": 1, "x": 100, "_version": 1, "sign": 1}]
        ),
        path,
    )
    project.load_file("m", path)
    assert _live(project) == [(1, 12, 2)]


@ON_A_SERVER_TOO
def test_the_command_loads_a_local_file_on_the_embedded_engine_only(project, tmp_path, capsys):
    """`vcmt-load-stage` hands the engine a path of this machine: the embedded engine reads it; a server
    target is refused before anything runs, saying how to load there."""
    s = Scenario(project, COLS, {"unique_key": "id"})
    s.run_batch([(1, 1, 1, 1)])
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"id": 2, "x": 2, "_version": 1, "sign": 1}) + "\n")
    if project.engine.served:
        assert _cli(project, path) == 2
        err = capsys.readouterr().err
        assert f"`{path.resolve()}` is a file on this machine" in err and "is a ClickHouse server" in err
        assert "vcmt.load_stage" in err and "file('<path on the server>'" in err
        assert _live(project) == [(1, 1, 1)]
    else:
        assert _cli(project, path) == 0
        assert "vcmt.load_stage m: 1 event" in capsys.readouterr().out
        assert _live(project) == [(1, 1, 1), (2, 2, 1)]


# -- found by review: each of these lost data or refused good input ------------
def _model(project, columns: str, config: str = "unique_key='id'", m: str = "m") -> None:
    project.command(f"create table {m}_src ({columns}) engine = MergeTree order by tuple()")
    project.model(m, f"{{{{ config(materialized='vcmt_upsert', {config}) }}}}\nselect * from {m}_src")
    project.dbt("run", "--select", m)


@ON_A_SERVER_TOO
def test_csv_text_reaches_the_cast_as_written(project, tmp_path):
    """A CSV key `01234` was read as the number 1234 and updated key `1234` instead."""
    _model(project, "id String, note String, _version UInt64")
    project.load_rows("m", [{"id": "01234", "note": "a", "_version": 1}, {"id": "1234", "note": "b", "_version": 1}])
    path = tmp_path / "events.csv"
    path.write_text("id,note,_version\n01234,1.10,2\n")
    project.load_file("m", path)
    assert project.query("select id, note from m final where sign = 1 order by id") == [
        ("01234", "1.10"),
        ("1234", "b"),
    ]


def test_rows_may_name_different_columns(project):
    """A column missing from the first row (here `sign`) was dropped for every row: a delete became an upsert."""
    _model(project, "id Int32, a String, _version UInt64, sign Int8")
    project.load_rows("m", [{"id": 1, "_version": 2, "a": "y"}, {"id": 2, "_version": 1, "a": "z"}])
    project.load_rows(
        "m", [{"id": 2, "_version": 2, "a": "z", "sign": 1}, {"id": 1, "_version": 3, "a": "y", "sign": -1}]
    )
    assert project.query("select id, _version from m final where sign = 1") == [(2, 2)]
    with pytest.raises(LoadError, match="row 0 of the input .* `sign` = NULL"):
        project.load_rows("m", [{"id": 2, "_version": 4, "a": "w"}, {"id": 2, "_version": 5, "a": "w", "sign": -1}])
    assert project.query("select id, _version from m final where sign = 1") == [(2, 2)]


def test_a_value_the_column_would_store_differently_is_refused(project):
    """Microseconds into a DateTime64(3) version made two versions equal: the newer update was skipped as stale."""
    import datetime as dt

    _model(project, "id Int32, a String, _version DateTime64(3, 'UTC')")
    t = dt.datetime(2024, 1, 2, 0, 0, 0, 100, tzinfo=dt.UTC)
    with pytest.raises(LoadError, match="row 0 of the input .* `_version`"):
        project.load_rows("m", [{"id": 1, "a": "first", "_version": t}])
    assert project.query("select count() from m") == [(0,)]


def test_watermark_counts_redelivered_events(project):
    """The watermark was taken after duplicates were removed: a re-read batch re-applied an unconditional delete."""
    project.command(
        "create table m_src (id Int32, a String, _version UInt64, sign Int8, _batch_id UInt32) "
        "engine = MergeTree order by tuple()"
    )
    project.model(
        "m",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id', delete_mode='unconditional', watermark='_batch_id') }}
        select * from m_src {% if vcmt.is_incremental() %} where _batch_id > {{ vcmt.watermark(default=0) }} {% endif %}
    """,
    )
    project.command("insert into m_src values (1, '', 1, -1, 5), (1, 'live', 2, 1, 5), (1, '', 1, -1, 6)")
    project.dbt("run")
    project.dbt("run")
    assert project.query("select id, a from m final where sign = 1") == [(1, "live")]
    assert project.query("select events, deletes, watermark from m__loads where events > 0") == [(3, 2, "6")]


def _load_select(project, sql: str, **args) -> str:
    """`dbt run-operation vcmt.load_stage` of `sql`; returns its log."""
    return project.dbt("run-operation", "vcmt.load_stage", "--args", json.dumps({"model": "m", "sql": sql, **args})).log


def test_watermark_is_compared_as_the_targets_type(project):
    """An epoch-seconds watermark from a file was compared as a number with a date text: recorded as NULL."""
    _model(project, "id Int32, _version UInt64, ts DateTime('UTC')", "unique_key='id', watermark='ts'")
    for i, ts in enumerate([1700000000, 1800000000, 1600000000]):
        _load_select(project, f"select toInt32({i}) as id, toUInt64(1) as _version, {ts} as ts", move_watermark=True)
    assert [w for (w,) in project.query("select watermark from m__loads where events > 0 order by loaded_at")] == [
        "2023-11-14 22:13:20",
        "2027-01-15 08:00:00",
        "2027-01-15 08:00:00",
    ]


@ON_A_SERVER_TOO
def test_key_names_with_quotes_and_backticks(project):
    """The order_by check compared escaped names with raw ones and refused such keys."""
    project.command(
        'create table m_src (`a"b` Int32, `c\\`d` Int32, x Int32, _version UInt64) engine = MergeTree order by tuple()'
    )
    project.model("m", """{{ config(materialized='vcmt_upsert', unique_key=['a"b', 'c`d']) }}\nselect * from m_src""")
    project.command("insert into m_src values (1, 2, 3, 1)")
    project.dbt("run")
    project.command("insert into m_src values (1, 2, 4, 2)")
    project.dbt("run")
    assert project.query("select x from m final where sign = 1") == [(4,)]


@ON_A_SERVER_TOO
def test_rows_the_reader_cannot_parse_fail_the_load(tmp_path, chdb_path, lab_dir, engine):
    """With input_format_allow_errors_num in the profile, a malformed CSV row (a delete) was skipped silently."""
    from tests.conftest import make_project

    project = make_project(
        tmp_path / "proj",
        "allow_errors",
        chdb_path,
        lab_dir,
        engine=engine,
        custom_settings={"input_format_allow_errors_num": 10},
    )
    try:
        _model(project, "id Int32, _version UInt64, sign Int8")
        project.load_rows("m", [{"id": 1, "_version": 1, "sign": 1}, {"id": 2, "_version": 1, "sign": 1}])
        path = tmp_path / "events.csv"
        path.write_text('id,_version,sign\n1,2,-1\n2,"2\n')
        with pytest.raises(LoadError):
            project.load_file("m", path)
        assert project.query("select id from m final where sign = 1 order by id") == [(1,), (2,)]
    finally:
        project.close()


@ON_A_SERVER_TOO
def test_a_path_with_glob_characters_is_refused(project, tmp_path):
    """file() expanded `ev?.csv` and loaded other files' events too."""
    _model(project, "id Int32, _version UInt64")
    (tmp_path / "ev1.csv").write_text("id,_version\n999,1\n")
    (tmp_path / "ev?.csv").write_text("id,_version\n1,1\n")
    with pytest.raises(LoadError, match="contains one of"):
        project.load_file("m", tmp_path / "ev?.csv")


def test_an_unknown_enum_element_names_row_and_column(project):
    _model(project, "id Int32, state Enum8('new' = 1, 'done' = 2), _version UInt64")
    with pytest.raises(LoadError, match="row 1 of the input .* `state` = gone"):
        project.load_rows("m", [{"id": 1, "state": "new", "_version": 1}, {"id": 2, "state": "gone", "_version": 1}])
    project.load_rows("m", [{"id": 1, "state": "done", "_version": 1}])
    assert project.query("select id, toString(state) from m final where sign = 1") == [(1, "done")]


WATERMARKED = """
{{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id') }}
select * from m_src {% if vcmt.is_incremental() %} where _batch_id > {{ vcmt.watermark(default=-1) }} {% endif %}
"""


@ON_A_SERVER_TOO
def test_an_external_load_leaves_the_models_watermark_unless_asked(project, tmp_path, capsys):
    """0.2 recorded an external file's highest `_batch_id`: the next dbt run skipped batches of its own source."""
    project.command(
        "create table m_src (id Int32, x Int64, _version UInt64, _batch_id UInt32) engine = MergeTree order by tuple()"
    )
    project.model("m", WATERMARKED)
    project.command("insert into m_src values (1, 1, 1, 1)")
    project.dbt("run")
    report = project.load_rows("m", [{"id": 9, "x": 9, "_version": 1, "_batch_id": 5}])
    assert "watermark not moved (this load's `_batch_id` reaches 5; pass move_watermark=true to move it)" in report
    project.command("insert into m_src values (2, 2, 1, 2)")
    project.dbt("run")
    assert _live(project) == [(1, 1, 1, 1), (2, 2, 1, 2), (9, 9, 1, 5)]
    assert project.query("select watermark from m__loads order by loaded_at") == [("1",), (None,), ("2",)]

    if project.engine.served:
        run = _load_select(project, "select 8 as id, 8 as x, 1 as _version, 7 as _batch_id", move_watermark=True)
    else:
        path = tmp_path / "backfill.jsonl"
        path.write_text(json.dumps({"id": 8, "x": 8, "_version": 1, "_batch_id": 7}))
        assert (
            main(
                [
                    str(path),
                    "--model",
                    "m",
                    "--project-dir",
                    str(project.root),
                    "--profiles-dir",
                    str(project.root),
                    "--target",
                    project.ch_target,
                    "--move-watermark",
                ]
            )
            == 0
        )
        run = capsys.readouterr().out
    assert "vcmt.load_stage m: 1 event read" in run and "watermark not moved" not in run
    project.command("insert into m_src values (3, 3, 1, 6)")  # at or below the moved watermark: not read
    project.dbt("run")
    assert project.query("select argMax(watermark, loaded_at) from m__loads where watermark is not null") == [("7",)]
    assert [r[0] for r in _live(project)] == [1, 2, 8, 9]


KINDS = (
    "id String, u UUID, n Int64, d Decimal(18, 4), f Float64, dt DateTime64(3, 'UTC'), day Date, "
    "e Enum8('a' = 1, 'b' = 2), ns Nullable(String), lc LowCardinality(String), b Bool, arr Array(Int32), "
    "_version UInt64, sign Int8"
)
UID = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
KIND_ROW = {
    "id": "007",
    "u": UID,
    "n": -9000000000,
    "d": "1.2345",
    "f": 0.5,
    "dt": "2026-01-02 03:04:05.678",
    "day": "2026-01-02",
    "e": "b",
    "ns": None,
    "lc": "x",
    "b": True,
    "arr": [1, 2],
}


def _kinds_file(tmp_path, fmt: str, events: list[dict]):
    """Valid events as a CSV with a header, or as JSON lines whose sign is quoted (as some producers write it)."""
    if fmt == "csv":

        def text(v):
            return "" if v is None else "true" if v is True else f'"{json.dumps(v)}"' if isinstance(v, list) else str(v)

        lines = [",".join(events[0])] + [",".join(text(v) for v in e.values()) for e in events]
        path = tmp_path / "events.csv"
    else:
        lines = [json.dumps({**e, "sign": str(e["sign"])}) for e in events]
        path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@ON_A_SERVER_TOO
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_valid_text_files_load_for_every_column_kind(module_project, m, tmp_path, fmt):
    """A CSV for a model with a sign column, and JSON lines with a quoted sign, failed with NO_COMMON_TYPE: the text
    sign met `sign < 0`. Valid files load, every documented column kind arriving as written, deletes included.
    (The cases share one project, each with a model of its own.)"""
    project = module_project
    _model(project, KINDS, m=m)
    events = [
        {**KIND_ROW, "_version": 1, "sign": 1},
        {**KIND_ROW, "id": "008", "_version": 1, "sign": 1},
        {**KIND_ROW, "id": "008", "_version": 2, "sign": -1},
    ]
    project.load_file(m, _kinds_file(tmp_path, fmt, events))
    assert project.query(
        "select id, toString(u), n, toString(d), f, toString(dt), toString(day), toString(e), ns, lc, "
        f"b, arr, _version from {m} final where sign = 1"
    ) == [
        (
            "007",
            UID,
            -9000000000,
            "1.2345",
            0.5,
            "2026-01-02 03:04:05.678",
            "2026-01-02",
            "b",
            None,
            "x",
            True,
            [1, 2],
            1,
        )
    ]
    assert project.query(f"select events, deletes, inserted from {m}__loads where events > 0") == [(3, 1, 1)]


@ON_A_SERVER_TOO
@pytest.mark.parametrize("sign", ["abc", "1.5", ""])
def test_a_sign_that_is_no_integer_fails_the_load_naming_row_and_column(module_project, m, tmp_path, sign):
    """A text sign is checked like any value: no integer, nothing loaded. (The cases share one project, each
    with a model of its own.)"""
    project = module_project
    _model(project, KINDS, m=m)
    path = tmp_path / "events.csv"
    path.write_text(
        "id,u,n,d,f,dt,day,e,ns,lc,b,arr,_version,sign\n"
        f'007,{UID},1,1,1,2026-01-02 00:00:00,2026-01-02,a,,x,true,"[1]",1,1\n'
        f'008,{UID},1,1,1,2026-01-02 00:00:00,2026-01-02,a,,x,true,"[1]",1,{sign}\n'
    )
    with pytest.raises(LoadError, match="row 1 of the input .* `sign`"):
        project.load_file(m, path)
    assert project.query(f"select count() from {m}") == [(0,)]


@pytest.mark.engines("chdb")
def test_a_repeated_block_is_applied_at_a_target_that_keeps_a_deduplication_log(project):
    """A Replicated target keeps a log of its latest blocks and drops what a view writes for an INSERT whose
    block repeats an earlier one. Under unconditional deletes a delete sent again is a real event (README,
    "Guarantees and limits"): it removes the row a later upsert put back. On ClickHouse 26.9
    `insert_deduplicate = 0` no longer turns that off (`deduplicate_insert`, default `enable`, supersedes it);
    `deduplicate_blocks_in_dependent_materialized_views = 0` does: vcmt pins it, and a writer into `m__stage`
    sets it (docs/servers.md, "Replicated tables"). The target here keeps the same log without replication
    (`non_replicated_deduplication_window`)."""
    project.command("create table src (id Int32, x Int64, _version UInt64, sign Int8) engine = MergeTree order by id")
    project.model(
        "m",
        "{{ config(materialized='vcmt_upsert', unique_key='id', delete_mode='unconditional', "
        "settings={'non_replicated_deduplication_window': 100}) }}\nselect id, x, _version, sign from src",
    )
    # upsert, delete, upsert of a newer version, the same delete again: the key ends deleted.
    events = [(5, 1, 1), (0, 0, -1), (6, 2, 1), (0, 0, -1)]
    for step, (x, version, sign) in enumerate(events):  # through vcmt's loads
        project.command("truncate table src")
        project.command(f"insert into src values (1, {x}, {version}, {sign})")
        project.dbt("run")
        assert _live(project) == ([(1, 6, 2)] if step == 2 else [(1, 5, 1)] if step == 0 else []), step
    for step, (x, version, sign) in enumerate(events):  # a writer's own INSERTs, with docs/servers.md's settings
        project.command(
            "insert into m__stage (id, x, _version, sign) settings insert_deduplicate = 0, "
            f"deduplicate_blocks_in_dependent_materialized_views = 0 values (2, {x}, {version}, {sign})"
        )
        assert _live(project) == ([(2, 6, 2)] if step == 2 else [(2, 5, 1)] if step == 0 else []), step


@pytest.mark.engines("chdb")
def test_a_data_directory_in_use_is_one_line(project, tmp_path, chdb_path):
    """vcmt-load-stage on a chDB path another process holds (here: this one) printed a 43-line traceback. With
    the profile's `path_lock_timeout: 0` it fails at once, in one line naming the path and the process."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    Scenario(project, COLS, {"unique_key": "id"}).run_batch([(1, 1, 1, 1)])
    profiles = project.root / "profiles.yml"
    profile = yaml.safe_load(profiles.read_text())
    profile["vcmt_test"]["outputs"]["chdb"]["path_lock_timeout"] = 0
    profiles.write_text(yaml.safe_dump(profile))
    path = tmp_path / "events.csv"
    path.write_text("id,x,_version,sign\n2,2,1,1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("vcmt-load-stage")),
            str(path),
            "--model",
            "m",
            "--project-dir",
            str(project.root),
            "--profiles-dir",
            str(project.root),
            "--target",
            "chdb",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2
    message = proc.stderr.strip()
    assert "\n" not in message and message.startswith(
        f"chdb: the data directory '{os.path.abspath(chdb_path)}' is in use by process {os.getpid()} ("
    ), proc.stderr
    assert _live(project) == [(1, 1, 1)]
