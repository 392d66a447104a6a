"""The staged lake between Spark and a mart (issue 31): batch ids are 64-bit end to end.

Real captured Debezium files are landed as batches, staged on Spark with `stage_topic`, and read by a
`vcmt_upsert` mart on chDB through `vcmt.lake_source()` with a `_batch_id` watermark.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cdc.test_debezium_fixtures import ROOT
from vcmt_tools.staging.topic import stage_topic

pytestmark = pytest.mark.spark

AUDIT = ROOT / "postgres" / "schemas-precise" / "topics" / "pg.public.audit" / "partition=0"
COLUMNS = {"id": "int", "note": "string", "amount": "decimal(12,2)"}

MART = """
{{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id',
          truncate_when="_kind = 'truncate'") }}
select assumeNotNull(id) as id, note, amount, assumeNotNull(_version) as _version,
       toInt8(assumeNotNull(sign)) as sign, _kind, _batch_id
from {{ vcmt.lake_source('audit') }}
where _kind in ('change', 'truncate')
{% if vcmt.is_incremental() %} and _batch_id > {{ vcmt.watermark(default=-1) }} {% endif %}
"""


def _captured_changes() -> list[str]:
    """The captured inserts of distinct keys after the topic's truncate, one line each."""
    (captured,) = (p for p in AUDIT.iterdir() if not p.name.endswith(".keys.json"))
    lines = captured.read_text(encoding="utf-8").splitlines()
    return [lines[4], lines[5], lines[7]]


def _land(raw: Path, batches: dict[int | str, str]) -> None:
    for batch, line in batches.items():
        folder = raw / f"_batch_id={batch}"
        folder.mkdir(parents=True)
        (folder / "lines.json").write_text(line + "\n", encoding="utf-8")


def _stage(spark, lake: Path, batches) -> None:
    df = stage_topic(spark, str(lake / "raw" / "audit"), "postgres", ["id"], COLUMNS, only_batches=batches)
    df.write.mode("append").partitionBy("_batch_id").parquet(str(lake / "staged" / "audit"))


def _loaded_batches(project) -> list[int]:
    return [r[0] for r in project.query("select distinct _batch_id from audit_mart order by 1")]


def test_batch_ids_are_64_bit_from_the_landed_folder_to_the_mart_watermark(spark, project, tmp_path):
    """4294967297 was staged as batch 1 and 20270101000000 as a negative batch, behind the watermark."""
    first, second, third = _captured_changes()
    lake = tmp_path / "lake"
    _land(lake / "raw" / "audit", {3: first, 2**32 + 1: second})
    _stage(spark, lake, [3, 2**32 + 1])
    assert sorted(p.name for p in (lake / "staged" / "audit").glob("_batch_id=*")) \
        == ["_batch_id=3", "_batch_id=4294967297"]

    project.vars = {"vcmt_lake_root": str(lake)}
    project.model("audit_mart", MART)
    project.dbt("run")
    assert _loaded_batches(project) == [3, 2**32 + 1]

    _land(lake / "raw" / "audit", {20270101000000: third})
    _stage(spark, lake, [20270101000000])
    project.dbt("run")
    assert _loaded_batches(project) == [3, 2**32 + 1, 20270101000000]
    assert project.scalar("select watermark from audit_mart__loads order by loaded_at desc limit 1") \
        == "20270101000000"


@pytest.mark.parametrize("folder", ["9223372036854775808", "abc"])
def test_a_batch_folder_that_is_not_a_64_bit_integer_is_refused(spark, tmp_path, folder):
    raw = tmp_path / "raw"
    _land(raw, {1: _captured_changes()[0], folder: _captured_changes()[1]})
    with pytest.raises(Exception, match=r"(?s)_batch_id=<N>, N a whole number that fits 64 bits.*_batch_id="
                       + folder):
        stage_topic(spark, str(raw), "postgres", ["id"], COLUMNS).collect()
