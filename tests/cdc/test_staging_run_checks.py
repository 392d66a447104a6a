"""A staging run says what it staged, and refuses what would empty a mart silently (issue 33, item 2).

On the captured PostgreSQL topic (integration_tests/fixtures/debezium, without schemas, as landed batches):
a column declared plain `timestamp` whose lines carry epoch numbers is refused before any batch is decoded,
a batch whose lines are mostly malformed fails before anything is written, and every run prints one line
with its lines by kind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cdc.test_debezium_fixtures import ROOT
from vcmt_staging import topic
from vcmt_staging.topic import checked, stage_topic

pytestmark = pytest.mark.spark

VARIANT = "postgres/noschemas-precise"
COLUMNS = {"id": "bigint", "name": "string", "qty": "int", "created_us": "timestamp_micros"}


@pytest.fixture
def lake(tmp_path: Path) -> str:
    """The captured items topic, one landed batch per sink file (`_batch_id=0`, `=1`)."""
    part = ROOT / VARIANT / "topics" / "pg.public.items" / "partition=0"
    files = sorted(p for p in part.iterdir() if not p.name.endswith(".keys.json"))
    for n, f in enumerate(files):
        (tmp_path / f"_batch_id={n}").mkdir()
        shutil.copy(f, tmp_path / f"_batch_id={n}" / f.name)
    topic._PREFIXES.pop(str(tmp_path), None)
    return str(tmp_path)


def test_plain_timestamp_on_lines_without_a_schema_is_refused_naming_the_fix(spark, lake: str) -> None:
    """`created_us` holds epoch microseconds: declared plain `timestamp`, every change line was wrong_type and
    the run succeeded with an empty mart. A ZonedTimestamp (ISO text) column keeps plain `timestamp`."""
    with pytest.raises(ValueError) as refused:
        stage_topic(spark, lake, "postgres", ["id"], {**COLUMNS, "created_us": "timestamp"})
    message = str(refused.value)
    assert "`created_us` is declared `timestamp`" in message
    assert "`timestamp_micros` or `timestamp_millis`" in message
    rows = stage_topic(spark, lake, "postgres", ["id"], {"id": "bigint", "created_tz": "timestamp"}).collect()
    assert rows and all(r["_reason"] is None for r in rows)


def test_a_batch_of_mostly_malformed_lines_fails_naming_reasons_and_a_sample(spark, lake: str, capsys) -> None:
    """`name` declared `int`: its text makes every change line wrong_type (the captured lines as they are).
    The run fails before the write, naming the batch, the reason and a line; `max_malformed_share=1` stages
    the batch anyway."""
    columns = {**COLUMNS, "name": "int"}
    with pytest.raises(ValueError) as refused:
        checked(stage_topic(spark, lake, "postgres", ["id"], columns), "staging.stg_items", columns, 0.5)
    message = str(refused.value)
    assert message.startswith("staging.stg_items: batch 0: ")
    assert "are malformed, more than max_malformed_share=0.5; nothing was staged" in message
    assert 'Reasons: wrong_type 10. A wrong_type line: {"before":' in message and "max_malformed_share=1" in message

    staged = checked(stage_topic(spark, lake, "postgres", ["id"], columns), "staging.stg_items", columns, 1)
    assert {r["_kind"] for r in staged.collect()} == {"malformed", "tombstone"}
    assert "staging.stg_items: staged 2 batches (0, 1)" in capsys.readouterr().out


def test_every_run_prints_its_lines_by_kind(spark, lake: str, capsys) -> None:
    """The captured topic's lines by kind, in one line; a run with nothing new says so."""
    staged = checked(stage_topic(spark, lake, "postgres", ["id"], COLUMNS), "staging.stg_items", COLUMNS, 0.5)
    rows = staged.collect()
    out = capsys.readouterr().out.strip().splitlines()
    changes = sum(r["_kind"] == "change" for r in rows)
    tombstones = sum(r["_kind"] == "tombstone" for r in rows)
    assert out == [
        f"staging.stg_items: staged 2 batches (0, 1), {len(rows)} lines: {changes} change, {tombstones} tombstone"
    ]
    nothing = stage_topic(spark, lake, "postgres", ["id"], COLUMNS, exclude_batches=[0, 1])
    assert checked(nothing, "staging.stg_items", COLUMNS, 0.5).count() == 0
    assert capsys.readouterr().out.strip() == "staging.stg_items: nothing new to stage"


def test_a_share_of_malformed_lines_equal_to_the_threshold_is_staged(spark) -> None:
    """Exactly 29 of 100 lines malformed at max_malformed_share=0.29 is not more than 0.29: the float product
    0.29 * 100 is 28.999999999999996, and the batch was refused. 30 of 100 is refused. The lines are the
    captured id 1 snapshot row, and the same row with a fraction in its `qty` (wrong_type, hostile value)."""
    from tests.cdc.test_staging_exact_values import ITEMS, PG, captured, edited
    from vcmt_staging.topic import decode_lines

    good = captured(PG, "items", "r", 1)
    bad = edited(good, ("after", "qty"), "2.75")

    def batch(malformed: int):
        lines = [(bad if i < malformed else good, "f.json", 0) for i in range(100)]
        df = spark.createDataFrame(lines, "raw string, _source_file string, _batch_id bigint")
        return decode_lines(df, "postgres", ["id"], ITEMS)

    staged = checked(batch(29), "staging.stg_items", ITEMS, 0.29)
    assert staged.where("_kind = 'malformed'").count() == 29
    with pytest.raises(
        ValueError,
        match=r"batch 0: 30 of 100 lines \(30%\) are malformed, more than "
        r"max_malformed_share=0.29",
    ):
        checked(batch(30), "staging.stg_items", ITEMS, 0.29)
