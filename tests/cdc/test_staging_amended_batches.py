"""Staging sees amended raw batches (issue 40, case 1).

A file added to a raw batch folder after that batch was staged was never staged, and nothing said so:
`stage_new_batches` skipped every batch its table held, by batch id only. Each staged batch now has a record
of the raw files it was built from (`<model>__raw_files`: file name, size, modification time), written after
the partition write; a batch whose files differ from its record, or that has none (a run killed between the
write and the record), is staged again, its partition replaced whole.

The lines are real captured Debezium lines (integration_tests/fixtures/debezium), copied into batch folders.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.cdc.test_debezium_fixtures import ROOT
from vcmt_staging import stage_new_batches, topic

pytestmark = pytest.mark.spark

AUDIT = ROOT / "postgres" / "schemas-precise" / "topics" / "pg.public.audit" / "partition=0"
COLUMNS = {"id": "int", "note": "string", "amount": "decimal(12,2)"}


class _Dbt:
    """What `stage_new_batches` reads of dbt's object in a compiled Python model."""

    def __init__(self, this: str, is_incremental: bool) -> None:
        self.this, self.is_incremental = this, is_incremental


def _captured() -> list[str]:
    (captured,) = (p for p in AUDIT.iterdir() if not p.name.endswith(".keys.json"))
    return captured.read_text(encoding="utf-8").splitlines()


def _land(topic_path: Path, batch: int, name: str, lines: list[str]) -> None:
    folder = topic_path / f"_batch_id={batch}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


class _Model:
    """One staging model's table, run as dbt's materialization does: the result saved by `save_model_result`."""

    def __init__(self, spark, tmp_path: Path, capsys) -> None:
        self.spark, self.capsys = spark, capsys
        self.topic = tmp_path / "raw" / "audit"
        self.location = str(tmp_path / "staged" / "audit")
        self.table = f"amended_{uuid.uuid4().hex[:8]}"
        self.runs = 0

    def run(self) -> str:
        from dbt.adapters.vcmt_spark.python_submissions import save_model_result

        incremental = self.runs > 0
        self.capsys.readouterr()
        df = stage_new_batches(
            _Dbt(self.table, incremental),
            self.spark,
            str(self.topic),
            "postgres",
            ["id"],
            COLUMNS,
            max_malformed_share=1,
        )
        self.runs += 1
        save_model_result(
            self.spark,
            df,
            self.table,
            "parquet",
            ["_batch_id"],
            self.location,
            mode="overwrite_partitions" if incremental else "create",
        )
        return self.capsys.readouterr().out.strip().removeprefix(f"{self.table}: ")

    def staged(self) -> Counter:
        """Rows staged per (batch, raw file)."""
        self.spark.catalog.refreshTable(self.table)
        return Counter((r._batch_id, r._source_file) for r in self.spark.table(self.table).collect())


def test_a_file_added_to_a_staged_batch_is_staged_once_and_the_run_says_so(
    spark, tmp_path: Path, capsys, monkeypatch
) -> None:
    lines = _captured()
    model = _Model(spark, tmp_path, capsys)
    _land(model.topic, 0, "a.json", lines[0:2])
    _land(model.topic, 1, "b.json", lines[2:4])
    assert model.run().startswith("staged 2 batches (0, 1), 4 lines")
    assert model.staged() == {(0, "a.json"): 2, (1, "b.json"): 2}

    # A late file in batch 0 (a retried sink task): the batch is staged again, whole; batch 1 is not read.
    _land(model.topic, 0, "a-late.json", lines[4:7])
    said = model.run()
    assert said.startswith("staged 1 batch (0; 0 restaged: 1 file added), 5 lines"), said
    assert model.staged() == {(0, "a.json"): 2, (0, "a-late.json"): 3, (1, "b.json"): 2}

    # Nothing changed since: nothing is decoded or counted, nothing restaged.
    def not_on_a_run_with_nothing_new(*args, **kwargs):
        raise AssertionError("a run with nothing new decoded or counted lines")

    with monkeypatch.context() as patched:
        patched.setattr(topic, "decode_lines", not_on_a_run_with_nothing_new)
        patched.setattr(topic, "checked", not_on_a_run_with_nothing_new)
        assert model.run() == "nothing new to stage"
    assert model.staged() == {(0, "a.json"): 2, (0, "a-late.json"): 3, (1, "b.json"): 2}

    # A file rewritten in place (other lines, other size) and a file removed: both batches restaged whole.
    _land(model.topic, 1, "b.json", lines[2:5])
    (model.topic / "_batch_id=0" / "a.json").unlink()
    said = model.run()
    assert said.startswith(
        "staged 2 batches (0, 1; 0 restaged: 1 file removed; 1 restaged: 1 file changed), 6 lines"
    ), said
    assert model.staged() == {(0, "a-late.json"): 3, (1, "b.json"): 3}

    # A batch folder pruned after staging (every file gone) keeps its staged lines; nothing to stage.
    for f in (model.topic / "_batch_id=1").iterdir():
        f.unlink()
    (model.topic / "_batch_id=1").rmdir()
    assert model.run() == "nothing new to stage"
    assert model.staged() == {(0, "a-late.json"): 3, (1, "b.json"): 3}


def test_a_run_killed_between_the_partition_write_and_its_record_is_restaged(
    spark, tmp_path: Path, capsys, monkeypatch
) -> None:
    lines = _captured()
    model = _Model(spark, tmp_path, capsys)
    _land(model.topic, 0, "a.json", lines[0:2])
    model.run()

    # The run writes batch 0 again (a file added) and a new batch 1, then dies before recording them.
    _land(model.topic, 0, "a-late.json", lines[2:3])
    _land(model.topic, 1, "b.json", lines[3:5])

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed after the partition write")

    with monkeypatch.context() as patched:
        patched.setattr(topic, "_append_record", killed, raising=False)
        with pytest.raises(KeyboardInterrupt):
            model.run()
    assert model.staged() == {(0, "a.json"): 2, (0, "a-late.json"): 1, (1, "b.json"): 2}

    # The next run cannot tell what the partitions were built from: it stages both again, never skips them.
    said = model.run()
    assert said.startswith("staged 2 batches (0, 1; 0 restaged: 1 file added; 1 restaged: not recorded), 5 lines"), said
    assert model.staged() == {(0, "a.json"): 2, (0, "a-late.json"): 1, (1, "b.json"): 2}
    assert model.run() == "nothing new to stage"

    # A record appended to by many runs (here 2) is rewritten by the next run that stages something, with each
    # batch's latest rows only; what it says is unchanged.
    record = f"{model.table}__raw_files"
    spark.catalog.refreshTable(record)
    assert len(spark.table(record).collect()) == 4  # batch 0's first row, superseded, is still there
    monkeypatch.setattr(topic, "RECORD_COMPACT_RUNS", 2)
    _land(model.topic, 2, "c.json", lines[5:6])
    assert model.run().startswith("staged 1 batch (2), 1 line")
    spark.catalog.refreshTable(record)
    assert sorted((r._batch_id, r.file) for r in spark.table(record).collect()) == [
        (0, "a-late.json"),
        (0, "a.json"),
        (1, "b.json"),
        (2, "c.json"),
    ]
    monkeypatch.undo()
    assert model.run() == "nothing new to stage"

    # The record removed by hand: every staged batch is staged again (none skipped).
    spark.sql(f"truncate table {record}")
    said = model.run()
    assert said.startswith(
        "staged 3 batches (0, 1, 2; 0 restaged: not recorded; 1 restaged: not recorded; 2 restaged: not recorded)"
    ), said
    assert model.staged() == {(0, "a.json"): 2, (0, "a-late.json"): 1, (1, "b.json"): 2, (2, "c.json"): 1}


def test_a_changed_batch_that_cannot_be_replaced_fails_naming_its_folder(spark, tmp_path: Path, capsys) -> None:
    """A changed batch that holds no line now (a write of no row replaces no partition), and a changed batch
    written by an append (its lines would be staged twice): the run fails naming the batch, nothing written."""
    from dbt.adapters.vcmt_spark.python_submissions import save_model_result
    from dbt_common.exceptions import DbtRuntimeError

    lines = _captured()
    model = _Model(spark, tmp_path, capsys)
    _land(model.topic, 0, "a.json", lines[0:2])
    _land(model.topic, 1, "b.json", lines[2:4])
    model.run()

    _land(model.topic, 0, "a.json", [])
    with pytest.raises(ValueError, match=r"_batch_id=0 \(1 file changed\).* hold no line now"):
        model.run()
    assert model.staged() == {(0, "a.json"): 2, (1, "b.json"): 2}

    _land(model.topic, 0, "a.json", lines[0:2])
    _land(model.topic, 1, "b-late.json", lines[4:5])
    df = stage_new_batches(
        _Dbt(model.table, True), spark, str(model.topic), "postgres", ["id"], COLUMNS, max_malformed_share=1
    )
    with pytest.raises(DbtRuntimeError, match=r"raw batches 0 \(1 file changed\), 1 \(1 file added\) changed"):
        save_model_result(spark, df, model.table, "parquet", ["_batch_id"], mode="append")
    assert model.staged() == {(0, "a.json"): 2, (1, "b.json"): 2}
