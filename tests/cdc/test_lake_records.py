"""What a mart reading `vcmt.lake_source()` keeps of the lake and how it reads the lake's layout (issue 60):
a `new_files=true` record means the file whatever the session's time zone, a loaded file that is gone is
never an error, a batch restaged over two runs is never replayed under unconditional deletes, and a file or
folder the staging never writes is refused, named, before anything is read.

The lake's files are written by the engine itself (Parquet, `insert into function file`), on chDB beside the
test and on a served node under its user_files_path, where its file() reads.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from vcmt_lab.dbt_project import DbtProject
from vcmt_staging.topic import BATCH_FOLDER

# On chDB, and on a served node where its file() reads the lake or its session settings differ.
ON_A_SERVER_TOO = pytest.mark.engines("chdb", "http")

MART = """
{{{{ config(materialized='vcmt_upsert', unique_key='id', delete_mode='{delete_mode}') }}}}
select id, x, v as _version, sign from {{{{ vcmt.lake_source('stg_orders', new_files=true) }}}}
"""

WATERMARKED = """
{{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id') }}
select id, x, v as _version, sign, _batch_id from {{ vcmt.lake_source('stg_orders') }}
{% if vcmt.is_incremental() %} where _batch_id > {{ vcmt.watermark(default=-1) }} {% endif %}
"""

# How the record printed a file's fingerprint before it kept Unix times: the time as text in the session's
# time zone (records written so are upgraded by the next run).
TEXT_FINGERPRINT = (
    "concat(toString(ifNull(_size, 0)), ' bytes, modified ', ifNull(toString(_time), 'at an unknown time'))"
)


@pytest.fixture
def lake(project: DbtProject, tmp_path: Path) -> Iterator[Path]:
    """The lake root the mart reads (var vcmt_lake_root): beside the test on chDB; on a served node under its
    user_files_path, removed at the end."""
    if not project.engine.served:
        lake = tmp_path / "lake"
    else:
        user_files = Path(project.scalar("select value from system.server_settings where name = 'user_files_path'"))
        lake = user_files / f"vcmt_lake_{uuid.uuid4().hex[:8]}"
    created = next(p for p in reversed([lake, *lake.parents]) if not p.exists())
    project.vars = {"vcmt_lake_root": str(lake)}
    try:
        yield lake
    finally:
        shutil.rmtree(created, ignore_errors=True)


def _dataset(lake: Path) -> Path:
    return lake / "staged" / "stg_orders"


def _land(project: DbtProject, lake: Path, batch: int | str, name: str, *events: tuple[int, int, int]) -> Path:
    """One Parquet file `name` in the batch folder `batch`, of (id, version, sign) events."""
    path = _dataset(lake) / f"_batch_id={batch}" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = " union all ".join(
        f"select toInt32({i}) as id, toInt64({10 * v}) as x, toUInt64({v}) as v, toInt8({s}) as sign"
        for i, v, s in events
    )
    project.command(f"insert into function file('{path}', 'Parquet') {rows}")
    return path


def _run(project: DbtProject, m: str, *args: str, expect_pass: bool = True):
    """`dbt run` of the test's model `m` alone."""
    return project.dbt("run", "--select", m, *args, expect_pass=expect_pass)


def _live(project: DbtProject, m: str) -> list[tuple]:
    return project.query(f"select id, _version from {m} final where sign = 1 order by id")


def _file_records(project: DbtProject, m: str) -> list[str]:
    """The latest fingerprint recorded for each file."""
    return [
        r[0]
        for r in project.query(
            f"select argMax(fingerprint, claimed_at) from {m}__lake_files where path != '' group by path order by path"
        )
    ]


@ON_A_SERVER_TOO
def test_a_time_zone_set_between_runs_keeps_every_loaded_file_loaded(project: DbtProject, lake: Path, m: str) -> None:
    """A fingerprint kept the file's time as text in the session's time zone: once the profile set
    `session_timezone`, every loaded file was "changed after this model loaded them", every run."""
    project.model(m, MART.format(delete_mode="versioned"))
    first = _land(project, lake, 1, "part-0.parquet", (1, 1, 1))
    _run(project, m)
    for n, zone in enumerate(["Asia/Kathmandu", "America/St_Johns"], start=2):
        project.use_custom_settings({"session_timezone": zone})
        _land(project, lake, n, "part-0.parquet", (n, n, 1))
        run = _run(project, m)
        assert "1 file to read, not loaded before" in run.log, run.log[-3000:]
    assert _live(project, m) == [(1, 1), (2, 2), (3, 3)]

    # A rewrite is still refused, named by what changed, its times in UTC whatever the session's zone.
    before = int(first.stat().st_mtime)
    os.utime(first, (before + 7, before + 7))
    refused = _run(project, m, expect_pass=False)
    shown = [datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") for t in (before, before + 7)]
    assert f"{first} (modified {shown[0]} -> {shown[1]})" in refused.log, refused.log[-3000:]


def _as_text_records(project: DbtProject, lake: Path, m: str, zone: str) -> None:
    """The record's fingerprints printed as before, with the time in `zone` (the session's of the loads that
    wrote them)."""
    listing = f"file('{_dataset(lake)}/*=*/**/*.parquet', 'One')"
    project.command(
        f"create table {m}_text_records engine = Memory as select r.dataset as dataset, r.path as path, "
        f"if(l._path = '', r.fingerprint, {TEXT_FINGERPRINT.replace('_size', 'l._size').replace('_time', 'l._time')})"
        " as fingerprint, r.invocation_id as invocation_id, r.claimed_at as claimed_at "
        f"from {m}__lake_files as r left join (select _path, _size, _time from {listing}) as l on l._path = r.path",
        session_timezone=zone,
        join_use_nulls=0,
    )
    project.command(f"truncate table {m}__lake_files")
    project.command(f"insert into {m}__lake_files select * from {m}_text_records")
    project.command(f"drop table {m}_text_records")


@ON_A_SERVER_TOO
def test_records_with_the_time_as_text_are_upgraded_and_keep_their_files_loaded(
    project: DbtProject, lake: Path, m: str
) -> None:
    """Records written before fingerprints kept Unix times hold the time as text in the zone of the session
    that wrote them: read in another zone they were "changed". They are upgraded by the next run, which reads
    no loaded file again; a rewrite is still refused after, by what changed."""
    project.model(m, MART.format(delete_mode="versioned"))
    first = _land(project, lake, 1, "part-0.parquet", (1, 1, 1))
    _land(project, lake, 2, "part-0.parquet", (2, 2, 1))
    _run(project, m)
    _as_text_records(project, lake, m, "America/St_Johns")
    assert all(" bytes, modified " in f for f in _file_records(project, m)), _file_records(project, m)

    project.use_custom_settings({"session_timezone": "Asia/Kathmandu"})
    upgraded = _run(project, m)
    assert "0 files to read, not loaded before" in upgraded.log, upgraded.log[-3000:]
    assert not [f for f in _file_records(project, m) if " bytes, modified " in f], _file_records(project, m)
    assert "0 files to read" in _run(project, m).log

    stat = first.stat()
    first.write_bytes(first.read_bytes() + b"\0")  # rewritten in place, one byte longer, at the same time
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    refused = _run(project, m, expect_pass=False)
    assert "1 file(s) changed after this model loaded them" in refused.log, refused.log[-3000:]
    assert f"{first} (size {stat.st_size} -> {stat.st_size + 1} bytes)" in refused.log, refused.log[-3000:]
    assert _live(project, m) == [(1, 1), (2, 2)]


def test_a_text_record_of_a_file_rewritten_since_is_refused(project: DbtProject, lake: Path, m: str) -> None:
    """An upgrade keeps no record of a file that changed since it was loaded: the run is refused naming it."""
    project.model(m, MART.format(delete_mode="versioned"))
    first = _land(project, lake, 1, "part-0.parquet", (1, 1, 1))
    _run(project, m)
    _as_text_records(project, lake, m, "Asia/Kathmandu")
    stat = first.stat()
    os.utime(first, (stat.st_atime + 7, stat.st_mtime + 7))  # rewritten 7 s later, same size
    refused = _run(project, m, expect_pass=False)
    assert "1 file(s) changed after this model loaded them" in refused.log, refused.log[-3000:]
    assert str(first) in refused.log and "modified" in refused.log
    assert all(" bytes, modified " in f for f in _file_records(project, m)), _file_records(project, m)


@ON_A_SERVER_TOO
def test_a_loaded_file_pruned_under_unconditional_deletes_is_kept_in_the_model(
    project: DbtProject, lake: Path, m: str
) -> None:
    """Under unconditional deletes a pruned loaded file failed every run (`MappedSequence object has no
    element 0`): no new batch was read again. It is counted, as under versioned deletes."""
    project.model(m, MART.format(delete_mode="unconditional"))
    _land(project, lake, 1, "part-0.parquet", (1, 1, 1))
    _land(project, lake, 2, "part-0.parquet", (2, 2, 1))
    _run(project, m)
    shutil.rmtree(_dataset(lake) / "_batch_id=1")  # retention
    _land(project, lake, 3, "part-0.parquet", (3, 3, 1))
    pruned = _run(project, m)
    assert "1 file to read, not loaded before; 1 loaded file no longer in the lake, kept in the model" in pruned.log, (
        pruned.log[-3000:]
    )
    assert _live(project, m) == [(1, 1), (2, 2), (3, 3)]


def test_a_batch_restaged_over_two_runs_is_refused_under_unconditional_deletes(
    project: DbtProject, lake: Path, m: str
) -> None:
    """A batch restaged (same lines, new file names) with its old file removed before one run and its new one
    landed before the next: the second run found no loaded file gone (the first had recorded it) and read the
    batch again, replaying its delete, which removed the key's later row. It is refused, naming the folder, as
    a restage within one run is. A file back under its own path after it was found gone is the same replay."""
    project.model(m, MART.format(delete_mode="unconditional"))
    _land(project, lake, 1, "part-0.parquet", (1, 1, 1), (2, 1, 1))
    old = _land(project, lake, 2, "part-0.parquet", (1, 2, -1))
    _land(project, lake, 3, "part-0.parquet", (1, 3, 1))
    _run(project, m)
    assert _live(project, m) == [(1, 3), (2, 1)]

    old.rename(old.with_name("restaging"))
    removed = _run(project, m)
    assert "1 loaded file no longer in the lake, kept in the model" in removed.log, removed.log[-3000:]
    old.with_name("restaging").rename(old.with_name("part-1.parquet"))  # the restaged batch 2, same line
    refused = _run(project, m, expect_pass=False)
    assert f"batch folder(s) {old.parent} were staged again" in refused.log, refused.log[-3000:]
    assert "--full-refresh" in refused.log
    assert _live(project, m) == [(1, 3), (2, 1)]
    old.with_name("part-1.parquet").rename(old)  # the file back under its own path: the same lines again
    refused = _run(project, m, expect_pass=False)
    assert f"batch folder(s) {old.parent} were staged again" in refused.log, refused.log[-3000:]
    _run(project, m, "--full-refresh")
    assert _live(project, m) == [(1, 3), (2, 1)]
    # After the full refresh the folder's files are loaded: a file added to it is read, not refused.
    _land(project, lake, 2, "part-2.parquet", (3, 1, 1))
    assert "1 file to read, not loaded before" in _run(project, m).log
    assert _live(project, m) == [(1, 3), (2, 1), (3, 1)]


@ON_A_SERVER_TOO
def test_a_stray_file_beside_the_batch_folders_is_refused_naming_it(project: DbtProject, lake: Path, m: str) -> None:
    """One Parquet file at the dataset's top level made a mart read it alone: every batch folder was hidden, in
    silence, and with new_files=true every loaded file recorded as gone. Both kinds of mart are refused."""
    project.model(m, MART.format(delete_mode="versioned"))
    project.model(f"{m}_w", WATERMARKED)
    _land(project, lake, 1, "part-0.parquet", (1, 1, 1))
    _run(project, m, f"{m}_w")
    stray = _dataset(lake) / "stray.parquet"
    project.command(
        f"insert into function file('{stray}', 'Parquet') "
        "select toInt32(9) as id, toInt64(90) as x, toUInt64(9) as v, toInt8(1) as sign, toInt64(9) as _batch_id"
    )
    _land(project, lake, 2, "part-0.parquet", (2, 2, 1))
    refused = _run(project, m, f"{m}_w", expect_pass=False)
    named = f"1 file directly in {_dataset(lake)}/ beside its partition folders: {stray}"
    assert refused.log.count(named) >= 2 and "ERROR=2" in refused.log, refused.log[-3000:]
    stray.unlink()
    _run(project, m, f"{m}_w")
    assert _live(project, m) == [(1, 1), (2, 2)]
    assert project.query(f"select id, _version from {m}_w final where sign = 1 order by id") == [(1, 1), (2, 2)]
    assert "gone" not in _file_records(project, m)


@ON_A_SERVER_TOO
def test_a_batch_folder_that_is_not_a_64_bit_batch_id_is_refused_naming_it(
    project: DbtProject, lake: Path, m: str
) -> None:
    """A hand-made `_batch_id=18446744073709551615` folder was read as batch -1, in silence."""
    project.model(m, MART.format(delete_mode="versioned"))
    _land(project, lake, 1, "part-0.parquet", (1, 1, 1))
    folders = ["18446744073709551615", "9223372036854775808", "-1", "__HIVE_DEFAULT_PARTITION__"]
    for folder in folders:
        _land(project, lake, folder, "part-0.parquet", (2, 2, 1))
    refused = _run(project, m, expect_pass=False)
    named = ", ".join(sorted(f"{_dataset(lake)}/_batch_id={folder}" for folder in folders))
    assert f"(0 to 9223372036854775807); {named} are not." in refused.log, refused.log[-3000:]
    assert project.query(f"select name from system.tables where database = '{project.schema}' and name = '{m}'") == []


def test_a_mart_names_a_batch_folder_as_staging_does() -> None:
    """The rule a staged folder's name keeps is the landed folder's (vcmt_staging.topic), said the same way."""
    assert f"return('{BATCH_FOLDER}')" in (REPO_ROOT / "macros" / "lake" / "lake_source.sql").read_text()
