"""`vcmt-load-stage` and `vcmt.load_stage`: one loader, every value checked before the first INSERT."""

from __future__ import annotations

import json

import pytest

from tests.materialization.scenario import Scenario
from vcmt_tools.stage_writer import LoadError, load_file, main

COLS = {"id": "Int32", "x": "Int64", "_version": "UInt64", "sign": "Int8"}


def _cli(project, path, model="m") -> int:
    return main([str(path), "--model", model, "--project-dir", str(project.root), "--profiles-dir",
                 str(project.root), "--target", "chdb"])


def _live(project, table="m"):
    return project.query(f"select * except sign from {table} final where sign = 1 order by 1")


@pytest.mark.parametrize("bad", ["null", "NaN"])
def test_a_null_or_nan_version_fails_the_load_naming_row_and_column(project, tmp_path, capsys, bad):
    """0.1.0 wrote a NULL or NaN version as 0."""
    s = Scenario(project, COLS, {"unique_key": "id"})
    s.run_batch([(1, 1, 1, 1)])
    lines = [{"id": 2, "x": 2, "_version": 1, "sign": 1}, {"id": 3, "x": 3, "_version": None, "sign": 1}]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps(r).replace("null", bad) if r["id"] == 3 else json.dumps(r) for r in lines))
    assert _cli(project, path) == 2
    err = capsys.readouterr().err
    assert "row 1 of the input" in err and "`_version`" in err and "Nothing was loaded" in err
    assert _live(project) == [(1, 1, 1)]


def test_a_bad_value_in_a_later_round_applies_nothing(project, tmp_path):
    """0.1.0 raised on round 2 after round 1 was committed: the input was half-applied."""
    s = Scenario(project, COLS, {"unique_key": "id", "merge": {"x": "sum"}})
    s.run_batch([(1, 1, 1, 1)])
    path = tmp_path / "events.csv"
    path.write_text("id,x,_version,sign\n1,10,2,1\n2,20,1,1\n1,not-a-number,3,1\n")
    with pytest.raises(LoadError, match=r"row 2 of the input \(counting from 0\) has `x` = not-a-number"):
        load_file(path, "m", project.root, profiles_dir=project.root, target="chdb")
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


def test_the_model_config_decides_not_the_caller(project, tmp_path):
    """Keys, version and merge policies come from the model: a file cannot contradict them."""
    s = Scenario(project, COLS, {"unique_key": "id", "merge": {"x": "sum"}})
    s.run_batch([(1, 5, 1, 1)])
    path = tmp_path / "events.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.Table.from_pylist([{"id": 1, "x": 7, "_version": 2, "sign": 1},
                                         {"id": 1, "x": 100, "_version": 1, "sign": 1}]), path)
    assert _cli(project, path) == 0
    assert _live(project) == [(1, 12, 2)]
