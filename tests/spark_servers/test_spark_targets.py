"""The CDC pipeline through each Spark server target: Spark Connect and Thrift.

`make demo`'s pipeline at a small size (300 events, 2 batches) runs once per
server target, each in its own process with its own lake and marts (on a
served ClickHouse node for Spark Connect, `--clickhouse server`; on chDB for
Thrift), through `--spark-server` (the local session target runs the same
pipeline in tests/e2e and tests/cdc/test_staging_spark.py). Each run must equal the
oracle, the two staged lakes must hold the same rows, the Spark console output must stay
quiet, and each server's work must have run in separate executor JVMs. A
Python staging model (tests/cdc/test_python_staging_model.py) also runs
through Spark Connect.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from tests.cdc.reference import parse_lake
from tests.cdc.test_python_staging_model import STAGED_BY_BATCH, python_staging_project, run_two_batches
from tests.cdc.test_staging_spark import CHANGES, _partition_values, _read_staged, _staged_multiset
from vcmt_lab.spark_local_cluster import SparkServer

pytestmark = pytest.mark.spark

TARGETS = ("connect", "thrift")
PIPELINE_TIMEOUT_S = 900


def _demo(work: Path, target: str, servers: dict[str, SparkServer]) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "vcmt_lab.demo",
        "--events",
        "300",
        "--batches",
        "2",
        "--seed",
        "5",
        "--staging",
        "sql",
        "--work",
        str(work),
        "--spark",
        target,
    ]
    if target != "session":
        cmd += ["--spark-server", f"127.0.0.1:{servers[target].port}"]
    if target == "connect":
        # `vcmt-demo --spark connect --clickhouse server`: the marts on a served node, which reads the lake
        # under its user_files_path (it failed at its first mart when the lake was elsewhere).
        cmd += ["--clickhouse", "server"]
    out = open(work.parent / f"{target}.out", "w")  # noqa: SIM115 - closed with the process below
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def pipelines(request, tmp_path_factory) -> dict[str, tuple[Path, str, float]]:
    """Work folder, console output and seconds of the demo's pipeline on each target (run side by side)."""
    root = tmp_path_factory.mktemp("targets")
    started = time.monotonic()
    spark_servers = request.getfixturevalue("spark_servers")
    procs = {t: _demo(root / t, t, spark_servers) for t in TARGETS}
    results = {}
    for target, proc in procs.items():
        try:
            proc.wait(max(1.0, PIPELINE_TIMEOUT_S - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            for p in procs.values():
                p.kill()
        proc.stdout.close() if proc.stdout else None
        output = (root / f"{target}.out").read_text()
        assert proc.returncode == 0, f"demo --spark {target} failed (exit {proc.returncode}):\n{output[-6000:]}"
        results[target] = (root / target, output, time.monotonic() - started)
    return results


@pytest.mark.parametrize("target", TARGETS)
def test_pipeline_equals_oracle(pipelines, target: str) -> None:
    """Marts and the downstream aggregate equal the oracle; every line is staged or quarantined."""
    _, out, _ = pipelines[target]
    last = out.splitlines()[-1]
    assert "make demo: OK" in last and "marts equal the oracle" in last and ", 0 failed" in last, out[-3000:]
    assert "| count in = staged + quarantined | yes |" in out
    assert "| quarantine = malformed generated | yes |" in out
    assert "downstream aggregate agg_orders_by_tenant_status vs oracle:" in out and ", 0 differ" in out
    assert f"Spark: {target} server 127.0.0.1:" in out
    assert ("==> ClickHouse: a node served on 127.0.0.1:" in out) == (target == "connect")


def test_server_targets_stage_identical_parquet(pipelines) -> None:
    """The staged Parquet of every model holds the same rows, with the same schema, on both servers."""
    staged = {t: _read_staged(pipelines[t][0] / "lake") for t in TARGETS}
    reference = staged["connect"]
    assert all(reference.rows.values()) and len(reference.rows) == 3
    for target in ("thrift",):
        assert staged[target].schemas == reference.schemas, target
        for model, rows in reference.rows.items():
            assert _staged_multiset(staged[target].rows[model]) == _staged_multiset(rows), (target, model)
    # And what they staged is the staging contract (tests/cdc/reference.py), which the local session's staging
    # meets in tests/cdc/test_staging_spark.py: the three targets stage the same rows.
    lake = pipelines["connect"][0] / "lake"
    for topic, model in CHANGES.items():
        expected = [p.row for p in parse_lake(lake, topic) if p.row is not None]
        assert expected and _staged_multiset(reference.rows[model]) == _staged_multiset(expected), model


def test_spark_log_stays_off_the_console(pipelines) -> None:
    """No Spark or py4j log line reaches the demo's output; the report names the file that holds them."""
    for target in TARGETS:
        work, out, _ = pipelines[target]
        noisy = [
            line
            for line in out.splitlines()
            if any(mark in line for mark in (" WARN ", " INFO ", "WARNING", "[Stage "))
        ]
        assert not noisy, (target, noisy[:5])
        assert f"Spark's log: {work / 'logs' / 'spark.log'}" in out
    assert all((pipelines[t][0] / "logs" / "spark.log").exists() for t in TARGETS)


def test_servers_ran_the_work_in_separate_executor_jvms(pipelines, spark_servers: dict[str, SparkServer]) -> None:
    """Each server has two executor processes besides its driver, and both executors ran tasks."""
    for kind, server in spark_servers.items():
        jvms = [p for p in psutil.Process(server.process.pid).children(recursive=True) if p.name() == "java"]
        driver = [p for p in jvms if any(c.endswith(("SparkConnectServer", "HiveThriftServer2")) for c in p.cmdline())]
        executors = [p for p in jvms if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in p.cmdline()]
        assert len(driver) == 1 and len(executors) == 2, (kind, [p.cmdline()[-6:] for p in jvms])
        assert driver[0].pid not in {p.pid for p in executors}
        finished = {
            log.parent.name: log.read_text(errors="replace").count("Finished task") for log in server.executor_logs
        }
        assert len(finished) >= 2 and sum(1 for n in finished.values() if n) >= 2, (kind, finished)


def test_python_model_through_spark_connect(
    tmp_path_factory, chdb_path: Path, lab_dir: Path, spark_servers: dict[str, SparkServer]
) -> None:
    """The Python staging model runs on the Spark Connect server, incremental by batch, as on the session."""
    root = tmp_path_factory.mktemp("python_connect")
    lake = root / "lake"
    proj = python_staging_project(
        root, chdb_path, lab_dir, spark_servers={"connect": ("127.0.0.1", spark_servers["connect"].port)}
    )
    run_two_batches(lake, lambda: proj.dbt_subprocess("run", target="spark_connect"))
    # A run with nothing new: its empty result (built without the decoding) is written through the Connect
    # session and changes no partition.
    quiet = proj.dbt_subprocess("run", target="spark_connect")
    assert f"{proj.schema}.stg_orders_py: nothing new to stage" in quiet.stdout, quiet.stdout[-3000:]
    table = lake / "staged" / "stg_orders_py"
    rows = [
        {**r, **_partition_values(path, table)}
        for path in sorted(table.rglob("*.parquet"))
        for r in pq.read_table(path).to_pylist()
    ]
    assert sorted((r["_batch_id"], r["_kind"], r["_reason"], r["id"]) for r in rows) == STAGED_BY_BATCH
    assert Counter(str(r["_unavailable"]) for r in rows if r["_batch_id"] == 1 and r["id"] == 1) == {"['note']": 1}
    proj.close()
