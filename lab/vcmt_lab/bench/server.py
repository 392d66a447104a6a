"""The bench's server leg: one vcmt_upsert model loaded through `dbt run` on the embedded engine and on a
ClickHouse node served on 127.0.0.1 over HTTP and native, so users see what a round trip per statement costs.

    python -m vcmt_lab.bench.server [--rows 1000000] [--batches 1,10000,200000] [--repeat 3]

Each load is a `dbt run` of the same model in this process (dbt's own cost included, as users pay it). The
same base table and batches on every engine; the report prints the seconds per load, the statements a load
sends, and each server leg's ratio to the embedded engine, measured in this run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from vcmt_lab.bench.cli import _positive
from vcmt_lab.clickhouse_server import served_node
from vcmt_lab.dbt_project import DbtProject, Engine
from vcmt_lab.paths import BENCH_ROOT, REPO_ROOT

MODEL = (
    "{{ config(materialized='vcmt_upsert', unique_key='id', merge={'n': 'sum'}) }}\n"
    "select id, status, n, _version from src"
)


def _load(project: DbtProject, rows: int, batch: int, version: int) -> tuple[float, int]:
    """Replace `src` with `batch` events (updates of existing keys, some new) and time one `dbt run`."""
    project.command("truncate table src")
    project.command(
        f"insert into src select cityHash64(number, {version}) % {rows * 11 // 10}, "
        f"['new', 'paid', 'shipped'][number % 3 + 1], number % 100, {version} from numbers({batch})"
    )
    started = time.perf_counter()
    run = project.dbt("run", "--select", "m")
    return time.perf_counter() - started, run.log.count("SQL status: OK")


def measure(project: DbtProject, rows: int, batches: Sequence[int], repeat: int) -> dict[int, tuple[float, int]]:
    project.command(
        "create table src (id UInt64, status String, n Int64, _version UInt64) engine = MergeTree order by id"
    )
    project.model("m", MODEL)
    project.command(f"insert into src select number, 'new', 1, 1 from numbers({rows})")
    project.dbt("run", "--select", "m")
    version = 1
    out = {}
    for batch in batches:
        samples = []
        for _ in range(repeat):
            version += 1
            samples.append(_load(project, rows, batch, version))
        out[batch] = (statistics.median(s for s, _ in samples), samples[-1][1])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vcmt_lab.bench.server", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=_positive, default=1_000_000, help="base rows (default 1M)")
    p.add_argument("--batches", default="1,10000,200000", help="events per load (default 1,10000,200000)")
    p.add_argument("--repeat", type=_positive, default=3, help="loads per size, median reported (default 3)")
    p.add_argument("--work", type=Path, default=BENCH_ROOT / "work" / "server")
    args = p.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    results: dict[str, dict[int, tuple[float, int]]] = {}
    with served_node(work / "node") as node:
        for kind in ("chdb", "http", "native"):
            engine = Engine("chdb", chdb_path=work / "chdb") if kind == "chdb" else Engine(kind, node=node)
            project = DbtProject(
                work / f"project_{kind}", REPO_ROOT, work / "chdb", f"vcmt_bench_{kind}", lab_dir=work, engine=engine
            )
            try:
                print(f"bench server: {kind} ...", flush=True)
                results[kind] = measure(project, args.rows, batches, args.repeat)
            finally:
                project.close()
    lines = [
        f"## Server leg: `dbt run` of one model, {args.rows:,} base rows, median of {args.repeat}",
        "",
        "| events per load | embedded (s) | HTTP (s) | native (s) | HTTP / embedded | native / embedded "
        "| statements per load |",
        "|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for batch in batches:
        c, h, n = (results[k][batch][0] for k in ("chdb", "http", "native"))
        lines.append(
            f"| {batch:,} | {c:.2f} | {h:.2f} | {n:.2f} | {h / c:.2f} | {n / c:.2f} | {results['http'][batch][1]} |"
        )
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
