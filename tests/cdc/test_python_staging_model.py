"""A Python staging model built on `stage_topic`, run by dbt on the `vcmt_spark` session target.

Two landing batches, two `dbt run`s: the second stages the new batch and,
because the first batch's raw file changed in between, the first batch again
(its partition replaced whole, so each line is staged once); a SQL model
reads the change events from the Python model's table in the same run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from tests.cdc.test_debezium_decoding import b64, envelope
from tests.conftest import make_project
from vcmt_lab.dbt_project import DbtProject
from vcmt_staging import debezium as dbz

pytestmark = pytest.mark.spark

MODEL = """
from vcmt_staging import stage_new_batches


def model(dbt, session):
    dbt.config(
        materialized="incremental",
        incremental_strategy="insert_overwrite",
        file_format="parquet",
        partition_by=["_batch_id"],
    )
    # The topic's new batches only: those this table holds already are not read again.
    return stage_new_batches(
        dbt, session,
        topic_path=dbt.config.meta_get("topic_path"),
        flavour="postgres",
        key=["id"],
        columns={"id": "bigint", "amount": "decimal(12,2)", "note": "string", "created_at": "timestamp_millis"},
    )
"""


def _land(lake: Path, batch: int, lines: list) -> Path:
    folder = lake / "raw" / "orders" / f"_batch_id={batch}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"orders+0+{batch * 100}.json"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


# What the model stages from the two batches written by `run_two_batches`: (_batch_id, _kind, _reason, id).
STAGED_BY_BATCH = [
    (0, "change", None, 1),
    (0, "change", None, 2),
    (0, "change", None, 99),
    (0, "malformed", "bad_json", None),
    (0, "tombstone", None, None),
    (1, "change", None, 1),
    (1, "change", None, 2),
    (1, "truncate", None, None),
]


def python_staging_project(root: Path, chdb_path: Path, lab_dir: Path, **options) -> DbtProject:
    """A project with the Python model (its table under <root>/lake/staged) and a SQL view reading it."""
    lake = root / "lake"
    proj = make_project(root / "proj", "python_staging", chdb_path, lab_dir, **options)
    proj.write("models/stg_orders_py.py", MODEL)
    proj.write(
        "models/_models.yml",
        f"""
        version: 2
        models:
          - name: stg_orders_py
            config:
              location_root: "{lake / "staged"}"
              meta:
                topic_path: "{lake / "raw" / "orders"}"
    """,
    )
    proj.model(
        "orders_changes",
        """
        {{ config(materialized='view') }}
        select id, amount, note, _version, sign from {{ ref('stg_orders_py') }} where _kind = 'change'
    """,
    )
    return proj


def run_two_batches(lake: Path, run: Callable[[], object]) -> None:
    """Land batch 0, `run()`, add a line to batch 0's file (the batch is staged again), land batch 1, `run()`."""
    ms = 1_700_000_000_000
    first = _land(
        lake,
        0,
        [
            envelope(op="r", after={"id": 1, "amount": b64(1000), "note": "a", "created_at": ms}, lsn=10),
            envelope(op="c", after={"id": 2, "amount": "/w==", "note": None, "created_at": ms}, lsn=11),
            "",
            "{broken",
        ],
    )
    run()
    # Batch 0 is staged; its file changes (a line added), so the next run stages it again, whole.
    first.write_text(first.read_text() + json.dumps(envelope(after={"id": 99}, lsn=99)) + "\n")
    _land(
        lake,
        1,
        [
            envelope(op="u", after={"id": 1, "amount": b64(1500), "note": dbz.UNAVAILABLE, "created_at": ms}, lsn=20),
            envelope(op="d", before={"id": 2, "amount": None, "note": None, "created_at": None}, after=None, lsn=21),
            envelope(op="t", after=None, lsn=22),
        ],
    )
    run()


def test_python_staging_model_incremental_by_batch(
    tmp_path_factory, chdb_path: Path, lab_dir: Path, monkeypatch
) -> None:
    from pyspark.sql import SparkSession

    root = tmp_path_factory.mktemp("python_staging")
    lake = root / "lake"
    proj = python_staging_project(root, chdb_path, lab_dir)
    monkeypatch.chdir(lab_dir)
    run_two_batches(lake, lambda: proj.dbt("run", target="vcmt_spark"))

    # A run with nothing new reads no line, builds no decoding, counts nothing and writes nothing: the
    # fingerprints' listing of the topic tells it there is nothing new.
    from pyspark.sql.readwriter import DataFrameWriter

    from vcmt_staging import topic

    def not_on_a_run_with_nothing_new(*args, **kwargs):
        raise AssertionError("a run with nothing new read, decoded, counted or wrote lines")

    with monkeypatch.context() as patched:
        for name in ("read_lines", "decode_lines", "checked"):
            patched.setattr(topic, name, not_on_a_run_with_nothing_new)
        patched.setattr(DataFrameWriter, "insertInto", not_on_a_run_with_nothing_new)
        quiet = proj.dbt("run", target="vcmt_spark")
    assert f"{proj.schema}.stg_orders_py: nothing new to stage" in quiet.log
    # The listing's files get the refusals a read makes: a folder that is not a batch id, where no line is new.
    stray = lake / "raw" / "orders" / "_batch_id=abc" / "orders+0+0.json"
    stray.parent.mkdir()
    stray.write_text(json.dumps(envelope(after={"id": 7}, lsn=70)) + "\n")
    refused = proj.dbt("run", target="vcmt_spark", expect_pass=False)
    assert "a landed batch folder must be named _batch_id=<N>" in refused.log and "_batch_id=abc" in refused.log
    stray.unlink()
    stray.parent.rmdir()

    spark = SparkSession.builder.getOrCreate()
    rows = spark.table(f"{proj.schema}.stg_orders_py").collect()
    by_batch = sorted((r._batch_id, r._kind, r._reason, r.id) for r in rows)
    assert by_batch == STAGED_BY_BATCH
    changes = sorted(
        (tuple(r) for r in spark.table(f"{proj.schema}.orders_changes").collect()), key=lambda r: (r[0], r[3])
    )
    assert changes == [
        (1, Decimal("10.00"), "a", 20, 1),
        (1, Decimal("15.00"), None, 41, 1),  # the TOAST placeholder (note) is NULL, never a value
        (2, Decimal("-0.01"), None, 23, 1),
        (2, None, None, 43, -1),
        (99, None, None, 199, 1),  # added to batch 0's file after it was staged: batch 0 was staged again
    ]
    unavailable = [r._unavailable for r in rows if r._kind == "change" and r._batch_id == 1 and r.id == 1]
    assert unavailable == [["note"]]
    # The model's table is Parquet under location_root/<model>/_batch_id=N, as the SQL staging models write.
    assert sorted(p.name for p in (lake / "staged" / "stg_orders_py").iterdir() if p.is_dir()) == [
        "_batch_id=0",
        "_batch_id=1",
    ]

    # A changed declaration is refused before anything is written: the write goes by position, so a renamed
    # column's values would land under the old name.
    proj.write("models/stg_orders_py.py", MODEL.replace('"note": "string"', '"memo": "string"'))
    refused = proj.dbt("run", "--select", "stg_orders_py", target="vcmt_spark", expect_pass=False)
    assert "the model's result is not in the table's columns" in refused.log
    assert "note string" in refused.log and "memo string" in refused.log and "--full-refresh" in refused.log
    assert spark.table(f"{proj.schema}.stg_orders_py").count() == len(rows)
    # --full-refresh restages every landed batch (batch 0 with the line added to it since) with the new columns.
    proj.dbt("run", "--select", "stg_orders_py", "--full-refresh", target="vcmt_spark")
    restaged = spark.table(f"{proj.schema}.stg_orders_py")
    assert "memo" in restaged.columns and "note" not in restaged.columns
    assert sorted((r._batch_id, r.id) for r in restaged.where("_kind = 'change'").collect()) == [
        (0, 1),
        (0, 2),
        (0, 99),
        (1, 1),
        (1, 2),
    ]
    proj.close()


def test_the_run_summary_is_in_dbts_record(tmp_path_factory, chdb_path: Path, lab_dir: Path, monkeypatch) -> None:
    """The staging's summary line is in dbt.log, the model's status line and run_results.json (message and
    adapter_response), as vcmt_upsert's counts are: not on stdout only."""
    root = tmp_path_factory.mktemp("python_staging_summary")
    proj = python_staging_project(root, chdb_path, lab_dir)
    proj.write_json = True  # this test reads run_results.json
    monkeypatch.chdir(lab_dir)
    ms = 1_700_000_000_000
    _land(
        root / "lake",
        1,
        [
            *(
                envelope(op="c", after={"id": i, "amount": b64(100 * i), "note": "n", "created_at": ms}, lsn=10 + i)
                for i in range(1, 6)
            ),
            envelope(op="c", after={"id": 6, "amount": b64(1), "note": "n", "created_at": 10**18}, lsn=16),
            envelope(op="t", after=None, lsn=17),
            envelope(op="c", after={"id": 7, "amount": b64(1), "note": "n", "created_at": ms}, lsn=18),
        ],
    )
    # The in-process runs keep the console quiet (--log-level none); the file log as a user's dbt writes it.
    run = proj.dbt("run", "--select", "stg_orders_py", "--log-level-file", "info", target="vcmt_spark")
    said = "staged 1 batch (1), 8 lines: 6 change, 1 truncate, 1 malformed (1 wrong_type)"
    assert f"{proj.schema}.stg_orders_py: {said}" in run.log
    dbt_log = re.sub(r"\x1b\[[0-9;]*m", "", (proj.root / "logs" / "dbt.log").read_text())
    assert f"{proj.schema}.stg_orders_py: {said}" in dbt_log
    # The status line: "1 of 1 OK created python incremental model <schema>.stg_orders_py [<message> in 2.1s]".
    assert re.search(rf"OK created python .*stg_orders_py +\[{re.escape(said)} in ", dbt_log), dbt_log[-3000:]
    results = json.loads((proj.root / "target" / "run_results.json").read_text())["results"]
    (result,) = [r for r in results if r["unique_id"] == "model.vcmt_test_project.stg_orders_py"]
    assert result["message"] == said
    assert result["adapter_response"] == {"_message": said, "code": "VCMT_STAGING"}

    # A batch the malformed threshold refuses: the run fails, and its summary is in dbt.log all the same.
    _land(root / "lake", 2, ["{broken", "{broken", envelope(op="t", after=None, lsn=30)])
    proj.dbt("run", "--select", "stg_orders_py", "--log-level-file", "info", target="vcmt_spark", expect_pass=False)
    dbt_log = (proj.root / "logs" / "dbt.log").read_text()
    assert f"{proj.schema}.stg_orders_py: staged 1 batch (2), 3 lines: 1 truncate, 2 malformed (2 bad_json)" in dbt_log
    assert "more than max_malformed_share=0.5" in dbt_log
    proj.close()
