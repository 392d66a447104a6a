"""`make bench-statements` at a tiny size, on the embedded engine and on a node it serves over HTTP.

No speed assertions: at this size the numbers mean nothing. What is checked is what docs/performance.md's
"Statements" rests on: each engine's table has every row, the statements counted from dbt's log, and the
engine's own time of both models' statements, read from a system.query_log the bench switched on (a query log
left off, or statements the filter misses, read 0).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import make_project
from vcmt_lab.bench.statements import engine_ms
from vcmt_lab.clickhouse_server import served_node
from vcmt_lab.dbt_project import Engine


def _rows(report: str, engine: str) -> dict[str, tuple[str, str]]:
    """row label -> (vcmt_upsert, incremental) of `engine`'s table."""
    table = report.split(f"## {engine}:", 1)[1].split("\n## ", 1)[0]
    return {m[1]: (m[2], m[3]) for m in re.finditer(r"^\| ([^|]+?) \| ([^|]+) \| ([^|]+) \|", table, re.M)}


def test_the_statements_bench_reads_the_engines_time_of_both_models(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vcmt_lab.bench.statements", "--engines", "chdb", "http", "--models", "1",
         "--repeat", "1", "--rows", "100", "--batch", "10", "--work", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for engine in ("chdb", "http"):
        rows = _rows(done.stdout, engine)
        assert rows["statements, a steady-state run"] == ("10", "11"), rows
        vcmt_ms, incremental_ms = rows["engine milliseconds, a steady-state run (system.query_log)"]
        assert float(vcmt_ms) > 0 and float(incremental_ms) > 0, (engine, rows)
        assert "wall seconds, 1 models, --threads 4" in rows, rows


def test_engine_ms_sums_the_statements_dbt_sent_since_and_no_other(tmp_path: Path, chdb_path: Path, lab_dir: Path):
    """Only statements carrying dbt's query comment count, and only those started at `since` or later: the
    bench's own statements (its fill, its flush of the logs) and earlier runs do not."""
    dbt_comment = '/* {"app": "dbt", "dbt_version": "1.11", "node_id": "model.p.m"} */ '
    with served_node(tmp_path / "node", query_logs=True) as node:
        project = make_project(tmp_path / "proj", "engine_ms", chdb_path, lab_dir, engine=Engine("http", node=node))
        try:
            project.command(dbt_comment + "select sleep(1)")  # before `since`
            since = project.scalar("select toString(now64(6))")
            project.command("select sleep(1)")  # not dbt's
            assert engine_ms(project, since) == 0
            project.command(dbt_comment + "select sleep(0.1)")
            assert 100 <= engine_ms(project, since) < 1000  # 0.1 s, and neither 1 s: bounds a busy machine keeps
        finally:
            project.close()
