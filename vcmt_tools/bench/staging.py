"""make bench-staging: where the Spark staging's time goes, next to the ClickHouse apply it feeds (issue 15).

    python -m vcmt_tools.bench.staging [--sizes 5000,50000] [--batches 2] [--seed 42]

For each batch size: generate the demo's real-encoding topics (PostgreSQL
with schemas, MySQL without) in `batches + 1` batches, land them one by one,
stage each with `dbt run` of the Python staging models on the vcmt_spark
session target, and apply it to the ClickHouse marts, all in this process as
`make demo` runs them. Batch 0 warms up (Spark start, first plans) and is not
counted. Then one more batch holding one line per topic measures the fixed
cost of a batch. Per batch it reads Hadoop's file-system counters of the
Spark JVM (bytes read, read operations), to show that a batch reads its own
raw files and not the batches staged before it, and the driver's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from vcmt_tools import demo


@dataclass
class BatchRun:
    lines: int
    raw_bytes: int
    staging_s: float
    clickhouse_s: float
    bytes_read: int
    read_ops: int
    jvm_heap_mb: float
    rss_mb: float


def _session():
    """The session dbt's `method: session` runs on (created by the first staging run of this process)."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def _fs_counters() -> tuple[int, int]:
    """Bytes read and read operations of every Hadoop file system of the session's JVM, so far."""
    session = _session()
    statistics = session._jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()  # noqa: SLF001 - a bench probe
    return (sum(s.getBytesRead() for s in statistics), sum(s.getReadOps() for s in statistics))


def _memory() -> tuple[float, float]:
    """The driver JVM's used heap after a GC and this process's resident memory, in MB."""
    session = _session()
    runtime = session._jvm.java.lang.Runtime.getRuntime()  # noqa: SLF001 - a bench probe
    session._jvm.java.lang.System.gc()  # noqa: SLF001
    heap = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
    rss = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return heap, rss


def _raw_bytes(lake: Path, batch: int) -> int:
    return sum(p.stat().st_size for p in (lake / "raw").glob(f"*/_batch_id={batch}/*.json"))


def _one_line_batch(landing: Path, batch: int) -> None:
    """Cut the landing's batch down to the first line of each topic's file."""
    for path in (landing / "raw").glob(f"*/_batch_id={batch}/*.json"):
        with path.open() as f:
            first = f.readline()
        path.write_text(first)


def _run_batch(pipeline: demo.Pipeline, landing: Path, lake: Path, batch: int, marts: bool = True) -> BatchRun:
    staging = demo.STAGINGS["python"]
    lines = demo._land_batch(landing, lake, batch)  # noqa: SLF001 - the demo's own landing step
    before = _fs_counters() if batch else (0, 0)  # no session before the first run
    t = time.perf_counter()
    pipeline.dbt("run", "--select", *staging.select, target=staging.target)
    staging_s = time.perf_counter() - t
    after = _fs_counters()
    clickhouse_s = 0.0
    if marts:
        t = time.perf_counter()
        pipeline.dbt("run", "--select", "marts", target="chdb")
        clickhouse_s = time.perf_counter() - t
    heap, rss = _memory()
    return BatchRun(lines, _raw_bytes(lake, batch), staging_s, clickhouse_s, after[0] - before[0],
                    after[1] - before[1], heap, rss)


def bench_size(work: Path, size: int, batches: int, seed: int) -> tuple[list[BatchRun], BatchRun]:
    from vcmt_tools.cdc import generate

    shutil.rmtree(work, ignore_errors=True)
    landing, lake = work / "landing", work / "lake"
    demo._configure_env(work)  # noqa: SLF001 - the demo's folders and profiles
    # Batch 0 warms up, batches 1..N are measured, batch N+1 is cut to one line per topic.
    generate(landing, events=size * (batches + 2), batches=batches + 2, seed=seed, encoding="debezium")
    _one_line_batch(landing, batches + 1)
    pipeline = demo.Pipeline(work, "python")
    _run_batch(pipeline, landing, lake, 0)
    runs = [_run_batch(pipeline, landing, lake, b) for b in range(1, batches + 1)]
    fixed = _run_batch(pipeline, landing, lake, batches + 1, marts=False)
    return runs, fixed


def report(results: dict[int, tuple[list[BatchRun], BatchRun]]) -> str:
    out = ["| batch size (events) | lines per batch | staging s/batch | staging lines/s | ClickHouse s/batch "
           "| ClickHouse lines/s | staging / ClickHouse rate | raw MB per batch | MB read per batch "
           "| read ops per batch | driver heap MB (first → last) |",
           "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for size, (runs, _) in results.items():
        n = len(runs)
        lines = sum(r.lines for r in runs) / n
        st = sum(r.staging_s for r in runs) / n
        ch = sum(r.clickhouse_s for r in runs) / n
        out.append(
            f"| {size:,} | {lines:,.0f} | {st:.1f} | {lines / st:,.0f} | {ch:.1f} | {lines / ch:,.0f} "
            f"| {(lines / st) / (lines / ch):.2f} | {sum(r.raw_bytes for r in runs) / n / 2**20:.1f} "
            f"| {sum(r.bytes_read for r in runs) / n / 2**20:.1f} | {sum(r.read_ops for r in runs) / n:,.0f} "
            f"| {runs[0].jvm_heap_mb:,.0f} → {runs[-1].jvm_heap_mb:,.0f} |"
        )
    out += ["", "| fixed cost: one more batch of one line per topic, `dbt run` of the staging models | seconds "
            "| MB read | read ops |", "|---|--:|--:|--:|"]
    for size, (_, fixed) in results.items():
        out.append(f"| after {size:,}-event batches | {fixed.staging_s:.1f} | {fixed.bytes_read / 2**20:.2f} "
                   f"| {fixed.read_ops:,} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-bench-staging", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5000,50000", help="comma-separated batch sizes, in events")
    parser.add_argument("--batches", type=int, default=2, help="measured batches per size (after a warm-up batch)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work", type=Path, default=demo.REPO_ROOT / ".local" / "bench-staging")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one size, as JSON
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 10 or args.batches < 1:
        parser.error(f"--sizes must list batch sizes of 10 events or more and --batches be 1 or more; "
                     f"got {args.sizes!r} and {args.batches}")
    if args.one:
        runs, fixed = bench_size(args.work.resolve() / str(sizes[0]), sizes[0], args.batches, args.seed)
        print(json.dumps({"runs": [asdict(r) for r in runs], "fixed": asdict(fixed)}))
        return 0
    results = {}
    for size in sizes:
        # One process per size: chDB opens one data directory per process, Spark one metastore.
        print(f"==> {size:,}-event batches: warm-up, {args.batches} measured, one fixed-cost batch", flush=True)
        proc = subprocess.run(
            [sys.executable, "-m", "vcmt_tools.bench.staging", "--one", "--sizes", str(size), "--batches",
             str(args.batches), "--seed", str(args.seed), "--work", str(args.work)],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
            return 1
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        results[size] = ([BatchRun(**r) for r in data["runs"]], BatchRun(**data["fixed"]))
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
