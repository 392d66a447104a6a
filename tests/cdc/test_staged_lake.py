"""The staged lake between Spark and a mart (issue 31): batch ids are 64-bit end to end, and a mart reads
only batches Spark committed, never what a killed staging job left behind.

Real captured Debezium files are landed as batches, staged on Spark with `stage_topic`, and read by a
`vcmt_upsert` mart on chDB through `vcmt.lake_source()` with a `_batch_id` watermark.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.cdc.test_debezium_fixtures import ROOT
from tests.conftest import operations_queries
from vcmt_staging.topic import stage_topic

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
    assert sorted(p.name for p in (lake / "staged" / "audit").glob("_batch_id=*")) == [
        "_batch_id=3",
        "_batch_id=4294967297",
    ]

    project.vars = {"vcmt_lake_root": str(lake)}
    project.model("audit_mart", MART)
    project.dbt("run")
    assert _loaded_batches(project) == [3, 2**32 + 1]

    _land(lake / "raw" / "audit", {20270101000000: third})
    _stage(spark, lake, [20270101000000])
    project.dbt("run")
    assert _loaded_batches(project) == [3, 2**32 + 1, 20270101000000]
    assert project.scalar("select watermark from audit_mart__loads order by loaded_at desc limit 1") == "20270101000000"


def test_a_mart_before_its_staging_model_ran_says_to_run_it(project, tmp_path):
    """An empty staged dataset failed with ClickHouse's CANNOT_EXTRACT_TABLE_STRUCTURE, naming no model."""
    lake = tmp_path / "lake"
    (lake / "staged" / "audit").mkdir(parents=True)  # a folder, no committed file (as a killed first write leaves)
    project.vars = {"vcmt_lake_root": str(lake)}
    project.model("audit_mart", MART)
    failed = project.dbt("run", expect_pass=False)
    assert not failed.success
    assert f"vcmt.lake_source('audit'): no staged Parquet file under {lake}/staged/audit/" in failed.log
    assert "dbt run --select audit --target <spark target>" in failed.log
    assert "CANNOT_EXTRACT_TABLE_STRUCTURE" not in failed.log
    # A compile does not read the lake's files: it goes on, as before.
    assert project.dbt("compile", "--select", "audit_mart").success


@pytest.mark.parametrize("folder", ["9223372036854775808", "abc"])
def test_a_batch_folder_that_is_not_a_64_bit_integer_is_refused(spark, tmp_path, folder):
    raw = tmp_path / "raw"
    _land(raw, {1: _captured_changes()[0], folder: _captured_changes()[1]})
    with pytest.raises(Exception, match=r"(?s)_batch_id=<N>, N a whole number that fits 64 bits.*_batch_id=" + folder):
        stage_topic(spark, str(raw), "postgres", ["id"], COLUMNS).collect()


@pytest.mark.parametrize(
    ("staged", "folder"),
    [
        ([1], "1.5"),  # Spark typed every batch id as a double: staged as batch 1, replacing it
        ([1, 2, 3], "2.5"),  # between the staged 1 and 3: never read
        ([], "1e3"),  # staged as batch 1000
        ([1], "2026-11-26"),  # failed with Spark's cast error, naming no folder
        ([], "-1"),
        ([], "+2"),
    ],
)
def test_a_batch_folder_name_is_parsed_by_staging_not_by_spark(spark, tmp_path, staged, folder):
    """Staging parses each landed folder's name itself: one that is not a whole number fails the run naming
    the folder, before any line is read, whatever the staged batches."""
    raw = tmp_path / "raw"
    lines = _captured_changes()
    _land(raw, {**{b: lines[i % len(lines)] for i, b in enumerate(staged or [1])}, folder: lines[0]})
    with pytest.raises(
        ValueError,
        match=r"_batch_id=<N>, N a whole number that fits 64 bits.*rename the folder "
        rf"\S*/raw/_batch_id={re.escape(folder)}\. Nothing was staged",
    ):
        stage_topic(spark, str(raw), "postgres", ["id"], COLUMNS, exclude_batches=staged)


def test_a_topic_with_no_batch_folder_stages_nothing_and_its_mart_says_so(spark, project, tmp_path):
    """A topic folder without any `_batch_id=<N>` folder yet (a first run before any batch landed, or its raw
    batches pruned) failed every run with Spark's unresolved `_batch_id` column. It stages nothing; the mart
    names the empty staged folder; once a batch lands, both go on."""
    lake = tmp_path / "lake"
    (lake / "raw" / "audit").mkdir(parents=True)
    _stage(spark, lake, None)
    assert not list((lake / "staged" / "audit").glob("_batch_id=*"))
    project.vars = {"vcmt_lake_root": str(lake)}
    project.model("audit_mart", MART)
    failed = project.dbt("run", expect_pass=False)
    assert "has staged no line yet" in failed.log and "CANNOT_EXTRACT_TABLE_STRUCTURE" not in failed.log
    _land(lake / "raw" / "audit", {1: _captured_changes()[0]})
    _stage(spark, lake, [1])
    project.dbt("run")
    assert _loaded_batches(project) == [1]


# A staging job as the `vcmt_spark` target runs it (save_model_result: a first create, then an incremental
# run's dynamic partition overwrite), in its own process so that it can be killed mid-write.
KILLED_WRITER = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession, functions as F
    from dbt.adapters.vcmt_spark.python_submissions import save_model_result

    root, location = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.catalogImplementation", "in-memory")
             .config("spark.sql.warehouse.dir", root + "/warehouse").getOrCreate())

    def batches(rows, first):
        # Two tasks, no shuffle: each sorts its rows by batch, then writes for seconds.
        return spark.range(0, rows, 1, 2).select(
            F.col("id").cast("int").alias("id"), F.sha2(F.col("id").cast("string"), 256).alias("note"),
            F.lit(None).cast("decimal(12,2)").alias("amount"), F.col("id").alias("_version"),
            F.lit(1).cast("tinyint").alias("sign"), F.lit("change").alias("_kind"),
            (F.lit(first) + F.col("id") % 2).cast("bigint").alias("_batch_id"))

    save_model_result(spark, batches(100, 1), "audit", "parquet", ["_batch_id"], location)
    print("COMMITTED", flush=True)
    save_model_result(spark, batches(4_000_000, 3), "audit", "parquet", mode="overwrite_partitions")
    print("DONE", flush=True)
""")


def _kill_mid_write(tmp_path: Path, dataset: Path) -> None:
    """Run KILLED_WRITER and SIGKILL it once its second write has opened a Parquet file."""
    script = tmp_path / "writer.py"
    script.write_text(KILLED_WRITER)
    log = (tmp_path / "writer.log").open("w")
    writer = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), str(dataset)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and writer.poll() is None:
            if "COMMITTED" in (tmp_path / "writer.log").read_text() and any(
                dataset.glob(".spark-staging-*/**/part-*.parquet")
            ):
                break
            time.sleep(0.05)
        assert writer.poll() is None, (tmp_path / "writer.log").read_text()[-2000:]
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
        writer.wait()
        log.close()


def test_a_mart_reads_only_committed_batches_after_a_killed_staging_job(project, tmp_path):
    """The lake reader globbed every Parquet file under the dataset: Spark's uncommitted output of a killed
    job (`.spark-staging-*`, `_temporary/`) failed every later run (a 0-byte or footless file) or was
    loaded as part of a batch, its other lines never loaded."""
    lake = tmp_path / "lake"
    dataset = lake / "staged" / "audit"
    _kill_mid_write(tmp_path, dataset)
    leftovers = [
        p
        for p in dataset.rglob("part-*.parquet")
        if not p.parent.name.startswith("_batch_id=") or p.parent.parent != dataset
    ]
    assert leftovers, "the killed job left no uncommitted file: nothing was tested"

    project.vars = {"vcmt_lake_root": str(lake)}
    project.model("audit_mart", MART)
    project.dbt("run")
    assert _loaded_batches(project) == [1, 2]
    assert project.scalar("select count() from audit_mart final where sign = 1") == 100


def _mart_loaded(spark, project, tmp_path, batches: dict[int, str], sql: str = MART):
    """A lake under `tmp_path` with `batches` landed and staged, and the mart's (`sql`) first run over it: the
    lake and the run."""
    lake = tmp_path / "lake"
    _land(lake / "raw" / "audit", batches)
    _stage(spark, lake, list(batches))
    project.vars = {"vcmt_lake_root": str(lake)}
    project.model("audit_mart", sql)
    return lake, project.dbt("run")


def test_a_late_batch_fails_the_run_naming_it_until_a_full_refresh(spark, project, tmp_path):
    """A batch folder landing after a later one was loaded was staged, then skipped by the watermark."""
    one, two, three = _captured_changes()
    lake, _ = _mart_loaded(spark, project, tmp_path, {1: one, 3: three})

    _land(lake / "raw" / "audit", {2: two})
    _stage(spark, lake, [2])
    failed = project.dbt("run", expect_pass=False)
    assert "batch 2 landed after batch 3 was loaded" in failed.log
    assert "dbt run -s audit_mart --full-refresh" in failed.log
    assert _loaded_batches(project) == [1, 3]
    project.dbt("run", expect_pass=False)  # still refused: nothing is skipped silently

    project.dbt("run", "--full-refresh")
    assert _loaded_batches(project) == [1, 2, 3]
    project.dbt("run")
    # A model loaded before the check existed has no record: its first run records the lake, then checks.
    project.command("drop table audit_mart__lake_batches")
    project.dbt("run")


def test_a_file_added_to_a_loaded_batch_fails_the_run_naming_it(spark, project, tmp_path):
    one, two, three = _captured_changes()
    lake, _ = _mart_loaded(spark, project, tmp_path, {1: one, 2: two})

    (lake / "raw" / "audit" / "_batch_id=1" / "lines.json").write_text(three + "\n", encoding="utf-8")
    _stage(spark, lake, [1])  # appended: a second file in the staged batch 1
    failed = project.dbt("run", expect_pass=False)
    assert "batch 1 has files that were not there (or are gone) since it was loaded" in failed.log
    assert _loaded_batches(project) == [1, 2]
    project.dbt("run", "--full-refresh")
    assert project.scalar("select count() from audit_mart final where sign = 1") == 3


# The same mart reading each committed file once (`new_files=true`): no watermark, no batch filter.
MART_NEW_FILES = """
{{ config(materialized='vcmt_upsert', unique_key='id', truncate_when="_kind = 'truncate'") }}
select assumeNotNull(id) as id, note, amount, assumeNotNull(_version) as _version,
       toInt8(assumeNotNull(sign)) as sign, _kind, _batch_id
from {{ vcmt.lake_source('audit', new_files=true) }}
where _kind in ('change', 'truncate')
"""


def _claims(project) -> list[tuple[str, int]]:
    """(batch folder, claims) per batch folder over every claim of the mart's loads."""
    return [
        tuple(r)
        for r in project.query(
            "select extract(path, '_batch_id=([0-9]+)'), count() from audit_mart__lake_files where path != '' and fingerprint != 'gone' "
            "group by 1 order by 1"
        )
    ]


def test_new_files_reads_a_late_batch_and_a_file_added_to_a_loaded_batch_in_the_next_run(spark, project, tmp_path):
    """Issue 40, cases 1-3 on the mart side: with `new_files=true` a late batch and a file added to a loaded
    batch reach the mart in the next ordinary run; each file is read once, and a run with nothing new reads
    no file."""
    one, two, three = _captured_changes()
    lake, first = _mart_loaded(spark, project, tmp_path, {1: one, 3: three}, MART_NEW_FILES)
    assert "2 files to read (every file: a first run or a full refresh)" in first.log, first.log[-2000:]
    assert _loaded_batches(project) == [1, 3]

    _land(lake / "raw" / "audit", {2: two})
    _stage(spark, lake, [2])
    late = project.dbt("run")
    assert "1 file to read, not loaded before" in late.log, late.log[-2000:]
    assert _loaded_batches(project) == [1, 2, 3]

    # A second file in loaded batch 1 (the same line again under a new version would be a change: the
    # captured line re-staged is a duplicate, which the mart skips; the file is still read once).
    (lake / "raw" / "audit" / "_batch_id=1" / "lines.json").write_text(three + "\n", encoding="utf-8")
    _stage(spark, lake, [1])
    added = project.dbt("run")
    assert "1 file to read, not loaded before" in added.log, added.log[-2000:]
    assert "1 event read" in added.log, added.log[-2000:]
    nothing = project.dbt("run")
    assert "0 files to read" in nothing.log and "0 events read" in nothing.log, nothing.log[-2000:]
    assert project.scalar("select count() from audit_mart final where sign = 1") == 3
    assert _claims(project) == [("1", 2), ("2", 1), ("3", 1)]


def test_new_files_claimed_by_a_failed_load_are_read_by_the_next_run(spark, project, tmp_path):
    """A load that claimed files and failed before recording itself in `<model>__loads` has loaded nothing:
    the next run claims and reads the same files (crash safety of the bookkeeping)."""
    one, two, _ = _captured_changes()
    lake, _ = _mart_loaded(spark, project, tmp_path, {1: one}, MART_NEW_FILES)

    _land(lake / "raw" / "audit", {2: two})
    _stage(spark, lake, [2])
    # The SELECT fails on batch 2's line: after the claim, before any INSERT and the load's record.
    project.model(
        "audit_mart",
        MART_NEW_FILES.replace(
            "assumeNotNull(id) as id", "toInt32(assumeNotNull(id) + throwIf(_batch_id = 2, 'a failing load')) as id"
        ),
    )
    failed = project.dbt("run", expect_pass=False)
    assert "1 file to read, not loaded before" in failed.log, failed.log[-2000:]
    assert _loaded_batches(project) == [1]
    # docs/operations.md's queries say so: one file loaded, one claimed by a load that did not finish, one
    # staged file not loaded.
    queries = _operations_queries(project, lake)
    assert project.query(queries["files loaded per dataset"]) == [("audit", 1, 1)]
    assert project.query(queries["files_not_loaded"]) == [(1,)]
    project.model("audit_mart", MART_NEW_FILES)
    again = project.dbt("run")
    assert "1 file to read, not loaded before" in again.log, again.log[-2000:]
    assert _loaded_batches(project) == [1, 2]
    assert _claims(project) == [("1", 1), ("2", 2)]
    assert project.query(queries["files loaded per dataset"]) == [("audit", 2, 1)]
    assert project.query(queries["files_not_loaded"]) == [(0,)]
    # The loads: the mart's two, newest first; every model's `__loads` through merge(); the lock released.
    assert [r[1] for r in project.query(queries["the last ten loads"])] == [1, 1]
    ((loads, _, age_s),) = project.query(queries["when each model last loaded"])
    assert loads == "audit_mart__loads" and 0 <= age_s < 3600
    assert [(r[0], r[1]) for r in project.query(queries["the last hour per model"])] == [("audit_mart__loads", 2)]
    ((lock, holder, kind, what, _),) = project.query(queries["each model's lock"])
    assert lock == "audit_mart__lock" and kind == "released" and holder.startswith("vcmt load by dbt invocation "), (
        holder
    )


def _operations_queries(project, lake: Path) -> dict[str, str]:
    """docs/operations.md's SQL, by a phrase of its comment or text, on this project's mart (`audit_mart`, its
    schema, its lake) instead of the page's `fct_orders` in `analytics`."""
    found = {}
    for query in operations_queries():
        sql = query.replace("analytics", project.schema).replace("fct_orders", "audit_mart")
        sql = sql.replace("'/lake/staged/stg_pg__orders/", f"'{lake}/staged/audit/")
        found[query] = sql
    named = {}
    for phrase in ("files loaded per dataset", "files_not_loaded", "the last ten loads", "when each model last loaded",
                   "the last hour per model", "each model's lock"):  # fmt: skip
        (named[phrase],) = (sql for query, sql in found.items() if phrase in query)
    return named


def test_new_files_refuses_a_loaded_file_rewritten_in_place_and_keeps_one_that_is_gone(spark, project, tmp_path):
    """Case 4: a staged file rewritten in place after it was loaded (same name, other rows) fails the run,
    naming it, until a full refresh; a loaded file that is gone (retention) is counted, not an error."""
    one, two, three = _captured_changes()
    lake, _ = _mart_loaded(spark, project, tmp_path, {1: one, 2: two}, MART_NEW_FILES)

    (loaded,) = (lake / "staged" / "audit" / "_batch_id=1").glob("*.parquet")
    other = tmp_path / "other"
    _land(other / "raw" / "audit", {1: three})
    _stage(spark, other, [1])
    (rewritten,) = (other / "staged" / "audit" / "_batch_id=1").glob("*.parquet")
    loaded.write_bytes(rewritten.read_bytes())
    os.utime(loaded, (time.time() + 5, time.time() + 5))
    failed = project.dbt("run", expect_pass=False)
    assert "1 file(s) changed after this model loaded them" in failed.log, failed.log[-2000:]
    assert loaded.name in failed.log and "--full-refresh" in failed.log
    assert _loaded_batches(project) == [1, 2]

    project.dbt("run", "--full-refresh")  # batch 1 now holds the third line instead of the first
    assert project.query("select id from audit_mart final where sign = 1 order by id") == project.query(
        f"select id from file('{lake}/staged/audit/*=*/*.parquet', 'Parquet') order by id"
    )
    for path in (lake / "staged" / "audit" / "_batch_id=2").glob("*.parquet"):
        path.unlink()
    pruned = project.dbt("run")
    assert "1 loaded file no longer in the lake, kept in the model" in pruned.log, pruned.log[-2000:]
    assert project.scalar("select count() from audit_mart final where sign = 1") == 2
    assert "no longer in the lake" not in project.dbt("run").log  # said once


def test_new_files_is_refused_beside_a_batch_watermark_and_shows_what_a_run_would_read(spark, project, tmp_path):
    one, two, _ = _captured_changes()
    lake = tmp_path / "lake"
    _land(lake / "raw" / "audit", {1: one})
    _stage(spark, lake, [1])
    project.vars = {"vcmt_lake_root": str(lake)}
    project.model("audit_mart", MART_NEW_FILES.replace("unique_key='id',", "unique_key='id', watermark='_batch_id',"))
    refused = project.dbt("run", expect_pass=False)
    assert "also sets watermark='_batch_id'" in refused.log, refused.log[-2000:]

    project.model("audit_mart", MART_NEW_FILES)
    project.dbt("run")
    _land(lake / "raw" / "audit", {2: two})
    _stage(spark, lake, [2])
    shown = project.dbt("show", "--select", "audit_mart", "--output", "json")
    assert '"_batch_id": 2' in shown.log and '"_batch_id": 1' not in shown.log, shown.log[-2000:]
    assert _loaded_batches(project) == [1]


@pytest.mark.parametrize("delete_mode", ["versioned", "unconditional"])
def test_a_watermarked_mart_switched_to_new_files_reads_every_file_once_more(spark, project, tmp_path, delete_mode):
    """A mart loaded with the `_batch_id` watermark, switched to `new_files=true`: its first run reads every
    file again, exact under versioned deletes (replay changes nothing) and refused under unconditional ones,
    where a delete read again would remove its row again."""
    one, two, _ = _captured_changes()
    mode = f"delete_mode='{delete_mode}', "
    with_mode = MART.replace("unique_key='id', ", "unique_key='id', " + mode)
    lake, _ = _mart_loaded(spark, project, tmp_path, {1: one, 2: two}, with_mode)
    project.model("audit_mart", MART_NEW_FILES.replace("unique_key='id', ", "unique_key='id', " + mode))
    if delete_mode == "unconditional":
        refused = project.dbt("run", expect_pass=False)
        assert "loaded before without new_files=true" in refused.log and "--full-refresh" in refused.log
        project.dbt("run", "--full-refresh")
    else:
        switched = project.dbt("run")
        assert "every file of the dataset is read once more" in switched.log, switched.log[-2000:]
        assert "2 files to read, not loaded before" in switched.log
    assert project.scalar("select count() from audit_mart final where sign = 1") == 2
    again = project.dbt("run")
    assert "0 files to read" in again.log and "read once more" not in again.log, again.log[-2000:]
    assert lake.exists()


@pytest.mark.parametrize("delete_mode", ["versioned", "unconditional"])
def test_new_files_accepts_batches_restaged_with_the_same_lines(spark, project, tmp_path, delete_mode):
    """Issue 42 (moving between Spark targets restages every batch under new file names): with
    `new_files=true` the next run reads the restaged files, whose lines are the same, and stays exact; the
    files it had loaded are gone, which is counted, not an error. (The watermark's listing fails it.)"""
    one, two, _ = _captured_changes()
    with_mode = MART_NEW_FILES.replace("unique_key='id', ", f"unique_key='id', delete_mode='{delete_mode}', ")
    lake, _ = _mart_loaded(spark, project, tmp_path, {1: one, 2: two}, with_mode)
    before = project.query("select id, note, amount, _version from audit_mart final where sign = 1 order by id")
    for _ in range(2 if delete_mode == "versioned" else 1):  # to another Spark target and back
        old_files = sorted(p.name for p in (lake / "staged" / "audit").rglob("*.parquet"))
        shutil.rmtree(lake / "staged" / "audit")
        _stage(spark, lake, [1, 2])  # another Spark target's staging: the same lines, other file names
        assert sorted(p.name for p in (lake / "staged" / "audit").rglob("*.parquet")) != old_files
        _assert_restaged_read_once(project, delete_mode, before)


def _assert_restaged_read_once(project, delete_mode: str, before: list) -> None:
    if delete_mode == "unconditional":
        # Its earlier lines again: a delete among them would remove its row again. Refused, naming the folders.
        refused = project.dbt("run", expect_pass=False)
        assert "were staged again (files not loaded yet beside loaded files" in refused.log, refused.log[-2000:]
        assert "_batch_id=1" in refused.log and "--full-refresh" in refused.log
        restaged = project.dbt("run", "--full-refresh")
        assert "2 files to read (every file" in restaged.log, restaged.log[-2000:]
    else:
        restaged = project.dbt("run")
        assert "2 files to read, not loaded before; 2 loaded files no longer in the lake" in restaged.log, restaged.log[
            -2000:
        ]
    assert project.query("select id, note, amount, _version from audit_mart final where sign = 1 order by id") == before
    assert project.scalar("select count() from audit_mart where sign = 1") == len(before)  # no row applied twice
