"""Spark staging models through dbt-spark (session) on a small generated lake.

One lake is staged step by step in a module fixture, because each `dbt run`
on Spark costs seconds: batches 0-1 land and are staged, batch 2 lands and is
staged, a re-run with nothing new, a forced re-stage of batch 1, `dbt test`,
then a full refresh. The tests read what each step left in the lake (Parquet, with
pyarrow) and compare it with the staging contract in `reference.py`.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cdc.reference import Parsed, parse_lake
from tests.conftest import PACKAGE_ROOT, make_project
from vcmt_lab.cdc import REASONS, Manifest, generate
from vcmt_lab.dbt_project import DbtProject, DbtRun
from vcmt_lab.paths import EXAMPLE_ROOT

pytestmark = pytest.mark.spark

TOPICS = ("orders", "customers")
CHANGES = {"orders": "stg_cdc__order_changes", "customers": "stg_cdc__customer_changes"}
QUARANTINE = "stg_cdc__quarantine"
# Small, but every kind of line occurs in both topics (asserted below).
LAKE = dict(events=300, batches=3, seed=11, malformed_share=0.1, wrap_share=0.3, late_window=1, late_share=0.1)

Files = dict[str, int]  # relative path -> mtime_ns


@dataclass
class Staged:
    """What one step left under <lake>/staged: rows per model and the Parquet files."""

    rows: dict[str, list[dict[str, Any]]]
    schemas: dict[str, pa.Schema]
    files: Files


@dataclass
class StagingRun:
    lake: Path
    manifest: Manifest
    expected: dict[str, list[Parsed]]
    first: Staged  # batches 0-1 landed
    second: Staged  # batch 2 landed
    rerun: Staged  # nothing new
    restaged: Staged  # batch 1 forced again
    tests: DbtRun
    refreshed: Staged  # --full-refresh of stg_cdc__order_changes


def _partition_values(path: Path, root: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for part in path.relative_to(root).parent.parts:
        name, _, value = part.partition("=")
        values[name] = int(value) if name == "_batch_id" else value
    return values


def _read_staged(lake: Path) -> Staged:
    # pyarrow's dataset discovery skips `_`-prefixed folders such as `_batch_id=0`: read file by file.
    rows: dict[str, list[dict[str, Any]]] = {}
    schemas: dict[str, pa.Schema] = {}
    files: Files = {}
    for model in (*CHANGES.values(), QUARANTINE):
        root = lake / "staged" / model
        rows[model] = []
        for path in sorted(root.rglob("*.parquet")):
            table = pq.read_table(path)
            schemas[model] = table.schema
            rows[model] += [{**r, **_partition_values(path, root)} for r in table.to_pylist()]
            files[path.relative_to(lake).as_posix()] = path.stat().st_mtime_ns
    return Staged(rows, schemas, files)


def _land(source: Path, lake: Path, batches: range) -> None:
    for topic in TOPICS:
        for batch in batches:
            name = f"raw/{topic}/_batch_id={batch}"
            shutil.copytree(source / name, lake / name)


@pytest.fixture(scope="module")
def staging(tmp_path_factory, chdb_path: Path, lab_dir: Path) -> StagingRun:
    root = tmp_path_factory.mktemp("staging")
    source, lake = root / "source", root / "lake"
    manifest = generate(source, **LAKE)
    proj = DbtProject(
        root=root / "proj",
        package_root=PACKAGE_ROOT,
        chdb_path=chdb_path,
        schema="t_cdc_staging",
        lab_dir=lab_dir,
        example=EXAMPLE_ROOT,
    )
    proj.vars = {"vcmt_lake_root": str(lake)}

    def run(*select: str, **extra_vars: Any) -> Staged:
        proj.vars = {**proj.vars, **extra_vars}
        proj.dbt("run", "--select", *select, target="spark")
        return _read_staged(lake)

    with pytest.MonkeyPatch.context() as mp:
        # Keep anything Spark writes relative to the working directory out of the repository.
        mp.chdir(lab_dir)
        _land(source, lake, range(0, 2))
        first = run("staging.thrift")
        _land(source, lake, range(2, 3))
        second = run("staging.thrift", "--exclude", "stg_cdc__batch_audit")  # the view exists already
        rerun = run(CHANGES["orders"], QUARANTINE)
        restaged = run(CHANGES["orders"], QUARANTINE, vcmt_restage_batches=[1])
        # Tests only read: run them side by side.
        tests = proj.dbt("test", "--select", "staging.thrift", "--threads", "4", target="spark")
        refreshed = run(CHANGES["orders"], "--full-refresh")
    proj.close()
    expected = {topic: parse_lake(lake, topic) for topic in TOPICS}
    return StagingRun(lake, manifest, expected, first, second, rerun, restaged, tests, refreshed)


def _key(row: dict[str, Any]) -> tuple:
    # Values compare by value: a UTC datetime from pyarrow (zoneinfo) equals one from the reference (timezone.utc).
    return tuple(sorted(row.items()))


def _staged_multiset(rows: list[dict[str, Any]]) -> Counter:
    return Counter(_key(r) for r in rows)


def test_generated_lake_covers_every_kind_staging_handles(staging: StagingRun) -> None:
    """The lake under test holds wrapped and bare valid lines, deletes, duplicates and every malformed reason."""
    for topic in TOPICS:
        t = staging.manifest.topics[topic]
        assert t.valid_by_op["d"] and t.valid_by_op["r"] and t.duplicates and t.late and t.wrapped
        assert all(t.malformed[r] for r in REASONS), t.malformed
        texts = [p.line.text for p in staging.expected[topic] if p.reason is None]
        assert any(x.startswith('{"schema"') for x in texts) and any(x.startswith('{"before"') for x in texts)


def test_staged_rows_match_contract_with_and_without_wrapper(staging: StagingRun) -> None:
    """Every valid line, wrapped or bare, is staged once with the contract's typed columns, sign and version."""
    for topic, model in CHANGES.items():
        expected = [p.row for p in staging.expected[topic] if p.row is not None]
        assert len(expected) == staging.manifest.topics[topic].expected_staged
        assert _staged_multiset(staging.second.rows[model]) == _staged_multiset(expected)


def test_sign_follows_op(staging: StagingRun) -> None:
    """sign is -1 exactly for `d`, +1 for c, r and u."""
    for model in CHANGES.values():
        pairs = Counter((r["_op"], r["sign"]) for r in staging.second.rows[model])
        assert set(pairs) == {("c", 1), ("r", 1), ("u", 1), ("d", -1)}


def test_version_is_source_lsn(staging: StagingRun) -> None:
    """_version carries `source.lsn` of each valid line (delete keys come from `before`)."""
    for topic, model in CHANGES.items():
        lsns = Counter(p.row["_version"] for p in staging.expected[topic] if p.row is not None)
        assert Counter(r["_version"] for r in staging.second.rows[model]) == lsns
        deletes = [r for r in staging.second.rows[model] if r["_op"] == "d"]
        assert deletes and all(r["customer_id"] is not None for r in deletes)


def test_quarantine_reason_per_malformed_kind(staging: StagingRun) -> None:
    """Every malformed line is quarantined once, raw payload intact, under the generator's reason code."""
    quarantined = Counter(
        (r["topic"], r["_batch_id"], r["reason"], r["raw_payload"]) for r in staging.second.rows[QUARANTINE]
    )
    expected = Counter(
        (topic, p.line.batch, p.reason, p.line.text)
        for topic in TOPICS
        for p in staging.expected[topic]
        if p.reason is not None
    )
    assert quarantined == expected
    by_reason = Counter(r["reason"] for r in staging.second.rows[QUARANTINE])
    assert by_reason == Counter(staging.manifest.malformed)


def test_count_in_equals_staged_plus_quarantined(staging: StagingRun) -> None:
    """Per topic and batch, lines landed = rows staged + rows quarantined."""
    for topic, model in CHANGES.items():
        landed = Counter(p.line.batch for p in staging.expected[topic])
        staged = Counter(r["_batch_id"] for r in staging.second.rows[model])
        quarantined = Counter(r["_batch_id"] for r in staging.second.rows[QUARANTINE] if r["topic"] == topic)
        assert landed == staged + quarantined
        assert list(landed.values()) and sum(landed.values()) == staging.manifest.topics[topic].events


def test_first_run_stages_only_landed_batches(staging: StagingRun) -> None:
    """With batches 0-1 landed, the first run stages exactly those batches."""
    for model, rows in staging.first.rows.items():
        assert {r["_batch_id"] for r in rows} == {0, 1}, model
    for topic, model in CHANGES.items():
        expected = [p.row for p in staging.expected[topic] if p.row is not None and p.row["_batch_id"] < 2]
        assert _staged_multiset(staging.first.rows[model]) == _staged_multiset(expected)


def test_second_run_adds_new_batch_and_keeps_old_files(staging: StagingRun) -> None:
    """When batch 2 lands, the next run writes only batch 2; files of batches 0-1 stay untouched."""
    new_files = set(staging.second.files) - set(staging.first.files)
    assert new_files and all("_batch_id=2/" in f for f in new_files)
    assert all(staging.second.files[f] == mtime for f, mtime in staging.first.files.items())


def test_rerun_without_new_batches_is_noop(staging: StagingRun) -> None:
    """A run with no new batch rewrites nothing: same files, same modification times."""
    assert staging.rerun.files == staging.second.files


def test_restaged_batch_replaces_partition_without_duplicates(staging: StagingRun) -> None:
    """Re-staging batch 1 (var vcmt_restage_batches) rewrites its partition; row counts do not change."""
    for model in (CHANGES["orders"], QUARANTINE):
        assert _staged_multiset(staging.restaged.rows[model]) == _staged_multiset(staging.second.rows[model])
    rewritten = {f for f, m in staging.restaged.files.items() if staging.second.files.get(f) != m}
    assert rewritten and all("_batch_id=1/" in f for f in rewritten)
    assert all("stg_cdc__customer_changes" not in f for f in rewritten)


def test_full_refresh_rebuilds_folder_without_duplicates(staging: StagingRun) -> None:
    """--full-refresh re-stages every batch into the existing folder, replacing its files."""
    model = CHANGES["orders"]
    assert _staged_multiset(staging.refreshed.rows[model]) == _staged_multiset(staging.second.rows[model])
    old = {f for f in staging.restaged.files if f.startswith(f"staged/{model}/")}
    new = {f for f in staging.refreshed.files if f.startswith(f"staged/{model}/")}
    assert new and not old & new


def test_staged_parquet_types_clickhouse_friendly(staging: StagingRun) -> None:
    """Staged Parquet uses the mart's types: Int32/Int64 keys, Int8 sign, Int64 version, UTC microsecond timestamps."""
    ts = pa.timestamp("us", tz="UTC")
    orders = staging.second.schemas[CHANGES["orders"]]
    assert [(f.name, f.type) for f in orders] == [
        ("tenant_id", pa.int32()),
        ("order_id", pa.int64()),
        ("customer_id", pa.int64()),
        ("status", pa.string()),
        ("amount", pa.float64()),
        ("note", pa.string()),
        ("created_at", ts),
        ("_version", pa.int64()),
        ("sign", pa.int8()),
        ("_op", pa.string()),
        ("_source_ts", ts),
    ]
    customers = staging.second.schemas[CHANGES["customers"]]
    assert [(f.name, f.type) for f in customers] == [
        ("customer_id", pa.int64()),
        ("name", pa.string()),
        ("email", pa.string()),
        ("tier", pa.string()),
        ("lifetime_value", pa.float64()),
        ("_version", pa.int64()),
        ("sign", pa.int8()),
        ("_op", pa.string()),
        ("_source_ts", ts),
    ]
    assert [f.name for f in staging.second.schemas[QUARANTINE]] == ["reason", "raw_payload", "source_file"]


def test_dbt_schema_tests_pass_on_staged_lake(staging: StagingRun) -> None:
    """`dbt test --select staging` passes, the batch audit (count in = staged + quarantined) included."""
    assert staging.tests.success
    assert "accepted_values_stg_cdc__batch_audit_unaccounted" in staging.tests.log


def test_the_example_stages_under_the_lake_root_its_vars_name(tmp_path, chdb_path: Path, lab_dir: Path) -> None:
    """The example's Python staging models take their folders from yml configs over var `vcmt_lake_root`. Its
    default was Jinja (an env_var), which a yml config does not render again: with no --vars, Spark was asked
    for `{{ env_var(...) }}/raw/pg.public.orders`. Parsed as a user runs it, the paths are plain."""
    proj = make_project(
        tmp_path / "proj", "cdc_example_parse", chdb_path, lab_dir, example=EXAMPLE_ROOT, write_json=True
    )
    proj.dbt("parse", target="vcmt_spark")
    nodes = json.loads((proj.root / "target" / "manifest.json").read_text())["nodes"].values()
    configs = {n["name"]: n["config"] for n in nodes if n["name"] in ("stg_pg__orders", "stg_mysql__customers")}
    assert configs["stg_pg__orders"]["location_root"] == ".local/lake/staged", configs
    assert configs["stg_pg__orders"]["meta"]["topic_path"] == ".local/lake/raw/pg.public.orders", configs
    assert configs["stg_mysql__customers"]["meta"]["topic_path"] == ".local/lake/raw/mysql.shop.customers", configs
    proj.close()
