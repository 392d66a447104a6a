"""make bench-staging: where the Spark staging's time goes, next to the ClickHouse apply it feeds (issue 15).

    python -m vcmt_lab.bench.staging [--sizes S,S] [--batches N] [--warmup N] [--landed N,N] [--seed N]   (--help)

Per batch size, as `make demo` runs them in one process: land the demo's
real-encoding topics batch by batch, stage each with `dbt run` of the Python
staging models (vcmt_spark session target), apply it to the ClickHouse marts.
The first `--warmup` batches warm up (Spark compiles its code, the JVM its hot paths) and are not
counted in the rates; the report shows how their staging time fell, and the measured batches' JIT
time shows whether the JVM was still compiling. A last batch of one line per topic gives
the fixed cost, split into dbt's own work and the models', and a run after it with nothing new
what a run that stages nothing pays. Per batch: Spark's
own input metrics (records, bytes), the files and `_batch_id` folders its SQL scans read, its jobs,
CPU time (this process and the JVM) and the JVM's JIT compilation time. The memory line stages all
but the last two of 10 (100) small batches at once, then those two one by one, and reads the
driver's heap after a full GC (only there: it slows the batch after it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from vcmt_lab import demo
from vcmt_lab.paths import REPO_ROOT

# Batches staged before the measured ones, in the same process: the JVM's JIT keeps compiling Spark's,
# the Hive metastore's and Derby's code for dozens of batches, and on 2 cores that slows the staging
# (docs/staging.md, "The JIT's long tail"). A cut-off, not a proof of steady state: the report shows the
# warm-up and the measured batches' JIT time.
WARMUP = 25


@dataclass
class BatchRun:
    lines: int
    raw_bytes: int
    staging_s: float
    models_s: float  # the models' wall time, first start to last end as dbt reports it; the rest is dbt's own
    cpu_s: float  # CPU seconds of this process and the Spark JVM during the staging run
    jit_s: float  # the JVM's JIT compilation time during the staging run (CompilationMXBean), summed over its threads
    clickhouse_s: float
    records_read: int
    bytes_read: int
    files_read: int  # from Spark SQL's scan metrics of the run's queries: files opened, `_batch_id` folders read
    folders_read: int
    jobs: int
    jvm_heap_mb: float
    rss_mb: float


def _session():  # the session of dbt's `method: session` (started by the first staging run)
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def _spark_counters() -> tuple[int, int, int, float, float]:
    """Spark's own metrics so far: input records and bytes of every stage, jobs run, the JVM's CPU seconds
    and its JIT compilation seconds."""
    session = _session()
    sc = session.sparkContext
    _settle(sc)
    gateway = sc._gateway  # noqa: SLF001 - a bench probe of the local session
    stages = sc._jsc.sc().statusStore().stageList(None, False, False, gateway.new_array(gateway.jvm.double, 0), None)  # noqa: SLF001
    data = [stages.apply(i) for i in range(stages.size())]
    pid = session._jvm.java.lang.ProcessHandle.current().pid()  # noqa: SLF001
    ticks = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]
    jit_ms = session._jvm.java.lang.management.ManagementFactory.getCompilationMXBean().getTotalCompilationTime()  # noqa: SLF001
    return (
        sum(d.inputRecords() for d in data),
        sum(d.inputBytes() for d in data),
        len(sc.statusTracker().getJobIdsForGroup(None)),
        sum(map(int, ticks)) / os.sysconf("SC_CLK_TCK"),
        jit_ms / 1000,
    )


def _settle(sc) -> None:
    """Wait (10 s at most) until Spark's listeners have taken in every event so far: the status store that
    the counters read is filled from them asynchronously, after the jobs and queries have ended."""
    sc._jsc.sc().listenerBus().waitUntilEmpty(10_000)  # noqa: SLF001 - a bench probe of the local session


def _executions():
    """Spark SQL's queries (executions) in its status store, oldest retained first."""
    return _session()._jsparkSession.sharedState().statusStore().executionsList().iterator()  # noqa: SLF001


def _last_query() -> int:
    """The number of the last SQL query Spark has recorded, -1 for none."""
    last, executions = -1, _executions()
    while executions.hasNext():
        last = max(last, executions.next().executionId())
    return last


# Spark SQL's scan metrics, by their names in the SQL tab of Spark's UI.
_SCAN_METRICS = ("number of files read", "number of partitions read")


def _sql_reads(after: int) -> tuple[int, int]:
    """Files and partition folders read by the SQL queries numbered above `after` (`_last_query`), from
    their scans' metrics; call it after `_spark_counters`, which waits for Spark's listeners."""
    totals = dict.fromkeys(_SCAN_METRICS, 0)
    executions = _executions()
    while executions.hasNext():
        execution = executions.next()
        if execution.executionId() <= after:
            continue
        names, metrics = {}, execution.metrics().iterator()
        while metrics.hasNext():
            metric = metrics.next()
            if metric.name() in totals:
                names[metric.accumulatorId()] = metric.name()
        values = execution.metricValues()  # None until the query has ended
        pairs = values.iterator() if values is not None and names else None
        while pairs is not None and pairs.hasNext():
            pair = pairs.next()
            if pair._1() in names:
                totals[names[pair._1()]] += int(str(pair._2()).replace(",", ""))
    return totals[_SCAN_METRICS[0]], totals[_SCAN_METRICS[1]]


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


def _models_wall_s(results: list) -> float:
    """Seconds from the first model's start to the last one's end: the models run in threads, at the same time."""
    spans = [(t.started_at, t.completed_at) for r in results for t in r.timing if t.started_at and t.completed_at]
    return (max(e for _, e in spans) - min(s for s, _ in spans)).total_seconds() if spans else 0.0


def _run_batch(
    pipeline: demo.Pipeline, landing: Path, lake: Path, batch: int | None, marts: bool = True, memory: bool = False
) -> BatchRun:
    """Land `batch` (None: nothing), stage it with `dbt run`, apply it to the marts unless not `marts`.

    `memory`: measure the driver's heap after a full GC (the memory line only: under G1, Java's default
    collector, the batch after a forced full GC stages slower, which made the throughput runs slower).
    """
    staging = demo.STAGINGS["python"]
    lines = 0 if batch is None else demo._land_batch(landing, lake, batch)  # noqa: SLF001 - the demo's landing
    from pyspark import SparkContext

    # No counters before the process's first staging run has started the session.
    started = SparkContext._active_spark_context is not None  # noqa: SLF001
    before = _spark_counters() if started else (0, 0, 0, 0.0, 0.0)
    last_query = _last_query() if started else -1
    cpu, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    run = pipeline.dbt("run", "--select", *staging.select, target=staging.target)
    staging_s = time.perf_counter() - t
    after, cpu_after = _spark_counters(), resource.getrusage(resource.RUSAGE_SELF)
    files_read, folders_read = _sql_reads(last_query)
    python_cpu = cpu_after.ru_utime + cpu_after.ru_stime - cpu.ru_utime - cpu.ru_stime
    clickhouse_s = 0.0
    if marts:
        t = time.perf_counter()
        pipeline.dbt("run", "--select", "marts", target="chdb")
        clickhouse_s = time.perf_counter() - t
    heap, rss = _memory() if memory else (0.0, 0.0)
    return BatchRun(
        lines=lines,
        raw_bytes=0 if batch is None else _raw_bytes(lake, batch),
        staging_s=staging_s,
        models_s=_models_wall_s(run.result.result.results),
        cpu_s=python_cpu + after[3] - before[3],
        jit_s=after[4] - before[4],
        clickhouse_s=clickhouse_s,
        records_read=after[0] - before[0],
        bytes_read=after[1] - before[1],
        files_read=files_read,
        folders_read=folders_read,
        jobs=after[2] - before[2],
        jvm_heap_mb=heap,
        rss_mb=rss,
    )


def bench_size(
    work: Path, size: int, batches: int, seed: int, landed: int = 0, warmup: int = 1
) -> tuple[list[BatchRun], list[BatchRun], list[BatchRun]]:
    """(warm-up runs, measured runs, the fixed-cost runs: one line per topic, then nothing new) of one batch
    size, or of the memory line (`landed`: its first run is the warm-up, no fixed-cost run)."""
    from vcmt_lab.cdc import generate

    shutil.rmtree(work, ignore_errors=True)
    landing, lake = work / "landing", work / "lake"
    demo._configure_env(work)  # noqa: SLF001 - the demo's folders and profiles
    pipeline = demo.Pipeline(work, "python")
    if landed:  # the memory line: all but the last two batches staged by one run, then those two measured
        generate(landing, events=size * landed, batches=landed, seed=seed, encoding="debezium")
        for b in range(landed - 3):
            demo._land_batch(landing, lake, b)  # noqa: SLF001
        runs = [_run_batch(pipeline, landing, lake, b, marts=False, memory=True) for b in range(landed - 3, landed)]
        return runs[:1], runs[1:], []
    # Batches 0..W-1 warm up, the next N are measured, the last one is cut to one line per topic.
    total = warmup + batches + 1
    generate(landing, events=size * total, batches=total, seed=seed, encoding="debezium")
    _one_line_batch(landing, total - 1)
    warm = [_run_batch(pipeline, landing, lake, b) for b in range(warmup)]
    runs = [_run_batch(pipeline, landing, lake, b) for b in range(warmup, warmup + batches)]
    fixed = [
        _run_batch(pipeline, landing, lake, total - 1, marts=False),
        _run_batch(pipeline, landing, lake, None, marts=False),
    ]
    return warm, runs, fixed


def _mean(runs: list[BatchRun], field: str) -> float:
    return sum(getattr(r, field) for r in runs) / len(runs)


# The warm-up table's groups of batches (1-based, inclusive; None: to the last): the first batch (Spark
# starts, compiles the plans' code), the next few (the JVM compiles the hot paths), the JIT's long tail,
# and the default warm-up's last batches.
WARMUP_GROUPS = ((1, 1), (2, 8), (9, WARMUP - 1), (WARMUP, None))


def _warmup_cells(warm: list[BatchRun]) -> list[str]:
    cells = []
    for lo, hi in WARMUP_GROUPS:
        group = warm[lo - 1 : hi]
        cells.append(f"{_mean(group, 'staging_s'):.1f} ({_mean(group, 'jit_s'):.1f})" if group else "")
    return cells


def report(
    results: dict[int, tuple[list[BatchRun], list[BatchRun], list[BatchRun]]], landed: dict[int, list[BatchRun]]
) -> str:
    out = [
        "| batch size (events) | lines per batch | staging s/batch (CPU s) | JVM JIT s/batch | staging lines/s "
        "| ClickHouse s/batch | ClickHouse lines/s | staging / ClickHouse rate | lines read by Spark per batch "
        "| files read per batch | batch folders read per batch | raw MB per batch | MB read by Spark per batch "
        "| Spark jobs per batch |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for size, (_, runs, _) in results.items():
        lines, st, ch = _mean(runs, "lines"), _mean(runs, "staging_s"), _mean(runs, "clickhouse_s")
        out.append(
            f"| {size:,} | {lines:,.0f} | {st:.1f} ({_mean(runs, 'cpu_s'):.1f}) | {_mean(runs, 'jit_s'):.1f} "
            f"| {lines / st:,.0f} | {ch:.1f} | {lines / ch:,.0f} | {ch / st:.2f} | {_mean(runs, 'records_read'):,.0f} "
            f"| {_mean(runs, 'files_read'):.0f} | {_mean(runs, 'folders_read'):.0f} "
            f"| {_mean(runs, 'raw_bytes') / 2**20:.1f} | {_mean(runs, 'bytes_read') / 2**20:.1f} "
            f"| {_mean(runs, 'jobs'):.0f} |"
        )
    heads = [f"batch {lo}" if lo == hi else f"batches {lo}–{hi or 'last'}" for lo, hi in WARMUP_GROUPS]
    out += ["", "| warm-up, staging s/batch (JVM JIT s) | " + " | ".join(heads) + " |", "|---|" + "--:|" * len(heads)]
    for size, (warm, _, _) in results.items():
        count = f"{len(warm)} batch" if len(warm) == 1 else f"{len(warm)} batches"
        out.append(f"| {count} of {size:,} events | " + " | ".join(_warmup_cells(warm)) + " |")
    out += [
        "",
        "| fixed cost, after the batches above | `dbt run` s (CPU s) "
        "| of which the two models (wall) s | of which dbt itself s | lines read | files read | Spark jobs "
        "| models' wall / one-line batch's |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for size, (_, _, fixed) in results.items():
        for what, f in zip(("one more batch of one line per topic", "then a run with nothing new"), fixed, strict=True):
            ratio = f"{f.models_s / fixed[0].models_s:.2f}" if fixed[0].models_s else ""
            out.append(
                f"| after {size:,}-event batches: {what} | {f.staging_s:.1f} ({f.cpu_s:.1f}) | {f.models_s:.1f} "
                f"| {f.staging_s - f.models_s:.1f} | {f.records_read} | {f.files_read} | {f.jobs} | {ratio} |"
            )
    if landed:
        out += [
            "",
            "| landed batches | staging s per batch (CPU s) | lines read per batch | files read per batch "
            "| Spark jobs per batch | driver JVM heap MB | process RSS MB |",
            "|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for n, runs in landed.items():
            out.append(
                f"| {n} | {_mean(runs, 'staging_s'):.1f} ({_mean(runs, 'cpu_s'):.1f}) "
                f"| {_mean(runs, 'records_read'):,.0f} | {_mean(runs, 'files_read'):.0f} "
                f"| {_mean(runs, 'jobs'):.0f} "
                f"| {runs[-1].jvm_heap_mb:,.0f} | {runs[-1].rss_mb:,.0f} |"
            )
    return "\n".join(out)


def _measure(
    args: argparse.Namespace, size: int, landed: int = 0
) -> tuple[list[BatchRun], list[BatchRun], list[BatchRun]] | None:
    # Its own process: chDB opens one data directory per process, Spark one metastore.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vcmt_lab.bench.staging",
            "--one",
            "--sizes",
            str(size),
            "--batches",
            str(args.batches),
            "--seed",
            str(args.seed),
            "--work",
            str(args.work),
            "--landed",
            str(landed),
            "--warmup",
            str(args.warmup),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
        return None
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return (
        [BatchRun(**r) for r in data["warmup"]],
        [BatchRun(**r) for r in data["runs"]],
        [BatchRun(**r) for r in data["fixed"]],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-bench-staging", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5000,50000", help="comma-separated batch sizes, in events")
    parser.add_argument("--batches", type=int, default=3, help="measured batches per size (after the warm-up)")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="batches staged first and not counted, per size")
    parser.add_argument("--landed", default="10,100", help="landed batch counts of the memory line ('' to skip)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".local" / "bench-staging")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one size, as JSON
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    counts = [int(n) for n in str(args.landed).split(",") if n.strip() and int(n)]
    if not sizes or min(sizes) < 10 or args.batches < 1 or args.warmup < 1 or min(counts, default=4) < 4:
        parser.error(
            f"--sizes must list batch sizes of 10 events or more, --batches and --warmup be 1 or more and "
            f"--landed list counts of 4 or more; got {args.sizes!r}, {args.batches}, {args.warmup} and "
            f"{args.landed!r}"
        )
    if args.one:
        work = args.work.resolve() / f"{sizes[0]}-{counts[0] if counts else 0}"
        warm, runs, fixed = bench_size(work, sizes[0], args.batches, args.seed, counts[0] if counts else 0, args.warmup)
        print(
            json.dumps(
                {
                    "warmup": [asdict(r) for r in warm],
                    "runs": [asdict(r) for r in runs],
                    "fixed": [asdict(r) for r in fixed],
                }
            )
        )
        return 0
    results, landed = {}, {}
    for size in sizes:
        print(
            f"==> {size:,}-event batches: {args.warmup} warm-up, {args.batches} measured, one fixed-cost batch",
            flush=True,
        )
        if (measured := _measure(args, size)) is None:
            return 1
        results[size] = measured
    for n in counts:
        print(f"==> memory: {n} landed batches of 100 events", flush=True)
        if (measured := _measure(args, 100, n)) is None:
            return 1
        landed[n] = measured[1]
    print(report(results, landed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
