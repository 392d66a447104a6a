"""make bench-operator: what a scheduled run of a vcmt project costs on this machine (docs/operations.md).

    python -m vcmt_lab.bench.operator [--runs N] [--lines N] [--history N] [--work PATH]   (--help)

On the example project (examples/cdc: two Debezium topics staged by Python models, two vcmt_upsert marts on
the embedded engine), in one run:

1. a warm Spark Connect server started here with `vcmt-spark-server` (its defaults): staging runs with
   nothing new and with about `--lines` new lines, each as a loop over dbt's API runs them (this process) and
   as a scheduler's `dbt run` command does (a new process); where a run with nothing new goes: dbt's own
   work and the models, and the models' Spark Connect calls by the vcmt step that made them;
2. a mart's run (`dbt run --select marts`) after each of those batches, and with nothing new;
3. vcmt's fixed cost per model: a vcmt_upsert model's own time in a run with no event;
4. Spark's start on `method: session`: a new process's first `dbt run` of the staging against its next one,
   both with nothing new.

`--history` batches land and are staged first, so the topics have a history as a schedule's would. Each
figure is the median of `--runs` runs, with the load average (1 min) while they ran: on a shared machine
compare figures of one run, not of two.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from vcmt_lab import demo
from vcmt_lab.bench.staging import _models_wall_s
from vcmt_lab.paths import EXAMPLE_ROOT, REPO_ROOT
from vcmt_lab.spark_local_cluster import quiet_spark

STAGING = demo.STAGINGS["python"]
CONNECT_TARGET = "spark_connect"
# Lines per event the generator writes for the example's topics (tombstones, redeliveries, markers on top).
LINES_PER_EVENT = 1.13
# The server's JVM compiles Spark's hot paths over its first runs: measured runs come after this many
# (as bench-staging's WARMUP: docs/staging.md, "The JIT's long tail").
WARMUP = 25
READY_TIMEOUT_S = 600


@dataclass
class Figure:
    """One measured quantity: its runs' seconds, CPU seconds, lines and the load averages (1 min) seen while
    they ran."""

    name: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    def add(self, seconds: float, lines: int = 0, cpu: float | None = None) -> None:
        self.seconds.append(seconds)
        self.loads.append(os.getloadavg()[0])
        self.lines.append(lines)
        if cpu is not None:
            self.cpu.append(cpu)

    def row(self) -> str:
        s = self.seconds
        lines = f"{statistics.median(self.lines):,.0f}" if any(self.lines) else "0"
        cpu = f"{statistics.median(self.cpu):.2f}" if self.cpu else ""
        return (
            f"| {self.name} | {statistics.median(s):.2f} | {min(s):.2f}–{max(s):.2f} | {cpu} | {len(s)} | {lines} "
            f"| {min(self.loads):.1f}–{max(self.loads):.1f} |"
        )


class Cpu:
    """CPU seconds (user + system) of this process, its finished children, and the processes under `roots`
    (the Spark server and its JVMs), from `start()` on: on a shared machine wall times stretch with the load,
    CPU times much less."""

    def __init__(self, roots: list[int] = ()) -> None:
        self.roots = [psutil.Process(pid) for pid in roots]

    def _now(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
        for root in self.roots:
            for proc in [root, *root.children(recursive=True)]:
                try:
                    t = proc.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                total += t.user + t.system
        return total

    @contextmanager
    def measure(self) -> Iterator[list[float]]:
        """The block's CPU seconds, in the yielded list once it ends."""
        spent: list[float] = []
        started = self._now()
        try:
            yield spent
        finally:
            spent.append(self._now() - started)


# The vcmt step (a function of the staging or of the adapter) a Spark Connect call is charged to, by the
# innermost frame of these files; dbt-spark's own SQL (the relation cache, schemas) is dbt's.
_OURS = ("vcmt_staging/", "dbt/adapters/vcmt_spark/")


def _step() -> str:
    for frame in reversed(traceback.extract_stack()[:-3]):
        path = frame.filename.replace(os.sep, "/")
        if any(part in path for part in _OURS):
            return f"{Path(path).name}: {frame.name}"
        if "/dbt/adapters/spark/" in path:
            return f"dbt-spark: {frame.name}"
    return "other"


@contextmanager
def connect_calls() -> Iterator[list[tuple[str, float]]]:
    """Every Spark Connect request of the block (a plan run, an analysis, a setting), as (step, seconds)."""
    from pyspark.sql.connect.client.core import SparkConnectClient

    calls: list[tuple[str, float]] = []
    originals = {name: getattr(SparkConnectClient, name) for name in ("_execute_and_fetch", "_analyze", "config")}

    def timed(original: Callable) -> Callable:
        def call(self, *args, **kwargs):
            started = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                calls.append((_step(), time.perf_counter() - started))

        return call

    for name, original in originals.items():
        setattr(SparkConnectClient, name, timed(original))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(SparkConnectClient, name, original)


def _dbt_command(work: Path, *args: str, target: str) -> list[str]:
    """A scheduler's `dbt` command line for the example project (as demo.Pipeline.dbt runs it)."""
    return [
        str(Path(sys.executable).with_name("dbt")),
        *args,
        "--target",
        target,
        "--vars",
        json.dumps({"vcmt_lake_root": str(work / "lake"), "vcmt_staging": "python"}),
        "--project-dir",
        str(EXAMPLE_ROOT),
        "--profiles-dir",
        str(EXAMPLE_ROOT),
        "--target-path",
        str(work / "target" / f"{target}-cli"),
        "--log-path",
        str(work / "logs"),
        "--no-write-json",
        "--quiet",
    ]


def _timed_command(cmd: list[str], cpu: Cpu, figure: Figure, lines: int = 0) -> None:
    with cpu.measure() as spent:
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"bench-operator: {' '.join(cmd[:3])} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    figure.add(seconds, lines, spent[0])


@dataclass
class Lake:
    """The example's landing area and lake, one batch landed at a time."""

    work: Path
    next_batch: int = 0

    def land(self) -> int:
        lines = demo._land_batch(self.work / "landing", self.work / "lake", self.next_batch)  # noqa: SLF001
        self.next_batch += 1
        return lines


def _staging_run(
    pipeline: demo.Pipeline,
    threads: int,
    cpu: Cpu,
    figure: Figure | None,
    lines: int,
    breakdown: dict | None = None,
) -> Any:
    with connect_calls() as calls, cpu.measure() as spent:
        started = time.perf_counter()
        run = pipeline.dbt("run", "--select", *STAGING.select, "--threads", str(threads), target=CONNECT_TARGET)
        seconds = time.perf_counter() - started
    if figure is not None:
        figure.add(seconds, lines, spent[0])
    if breakdown is not None:
        breakdown["runs"] += 1
        breakdown["total"] += seconds
        breakdown["models"] += _models_wall_s(run.result.result.results)
        for step, s in calls:
            breakdown["calls"][step][0] += 1
            breakdown["calls"][step][1] += s
    return run


def _mart_run(pipeline: demo.Pipeline, cpu: Cpu, figure: Figure, lines: int, per_model: Figure | None = None) -> None:
    with cpu.measure() as spent:
        started = time.perf_counter()
        run = pipeline.dbt("run", "--select", "marts", target="chdb")
        seconds = time.perf_counter() - started
    figure.add(seconds, lines, spent[0])
    if per_model is not None:
        marts = [r for r in run.result.result.results if r.node.config.materialized == "vcmt_upsert"]
        for r in marts:
            per_model.add(r.execution_time)


def _start_server(work: Path) -> tuple[subprocess.Popen, int]:
    """`vcmt-spark-server` with its defaults, on a free port; returns it once it listens."""
    from vcmt_cli.processes import free_port, port_open

    port = free_port()
    log = open(work / "spark-server.log", "w")  # noqa: SIM115 - the server's, closed when it stops
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("vcmt-spark-server")), "--dir", str(work / "spark-server"), "--port",
         str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not port_open("127.0.0.1", port):
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise SystemExit(f"bench-operator: vcmt-spark-server did not listen; see {work / 'spark-server.log'}")
        time.sleep(0.5)
    return server, port


def _session_runs(work: Path, runs: int) -> tuple[list[float], float]:
    """In a new process, `runs` `dbt run`s of the staging on `method: session` (Spark starts in the first): the
    seconds of each, and of the whole process."""
    script = (
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "from vcmt_lab import demo\n"
        "from vcmt_lab.spark_local_cluster import quiet_spark\n"
        "work = Path(sys.argv[1])\n"
        "quiet_spark(work / 'logs' / 'spark-session.log')\n"
        "demo._configure_env(work)\n"
        "pipeline = demo.Pipeline(work, 'python')\n"
        "times = []\n"
        f"for _ in range({runs}):\n"
        "    t = time.perf_counter()\n"
        f"    pipeline.dbt('run', '--select', {', '.join(map(repr, STAGING.select))}, target={STAGING.target!r})\n"
        "    times.append(time.perf_counter() - t)\n"
        "print(json.dumps(times))\n"
    )
    # Not a Spark Connect client, as this process became (python_submissions.connect_session).
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", script, str(work)], capture_output=True, text=True, check=False, env=env
    )
    whole = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"bench-operator: the session runs failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), whole


def run(args: argparse.Namespace) -> str:
    from vcmt_lab.cdc import generate

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    (work / "logs").mkdir(parents=True)
    quiet_spark(work / "logs" / "spark.log")
    demo._configure_env(work)  # noqa: SLF001 - the demo's folders and profiles
    batches = args.history + args.warmup + 2 * args.runs + 2
    generate(
        work / "landing",
        events=round(args.lines / LINES_PER_EVENT) * batches,
        batches=batches,
        seed=args.seed,
        encoding="debezium",
    )
    lake = Lake(work)
    for _ in range(args.history):
        lake.land()
    print(f"==> starting vcmt-spark-server ({args.history} batches landed)", flush=True)
    server, port = _start_server(work)
    figures: dict[str, Figure] = {}

    def figure(name: str) -> Figure:
        return figures.setdefault(name, Figure(name))

    breakdowns: dict[str, dict[str, Any]] = {
        kind: {"runs": 0, "total": 0.0, "models": 0.0, "calls": defaultdict(lambda: [0, 0.0])}
        for kind in ("nothing new", "new lines")
    }
    cpu = Cpu([server.pid])
    try:
        os.environ["SPARK_CONNECT_HOST"], os.environ["SPARK_CONNECT_PORT"] = "127.0.0.1", str(port)
        pipeline = demo.Pipeline(work, "python")
        print("==> the first runs: every landed batch staged and applied, then warm-up runs", flush=True)
        _staging_run(pipeline, args.threads, cpu, figure("first staging run of a new server (stages the history)"), 0)
        pipeline.dbt("run", "--select", "marts", target="chdb")
        for n in range(args.warmup):
            _staging_run(pipeline, args.threads, cpu, None, lake.land())
            pipeline.dbt("run", "--select", "marts", target="chdb")
            print(f"    warm-up {n + 1}/{args.warmup} (load average {os.getloadavg()[0]:.1f})", flush=True)
        print(f"==> {args.runs} runs of each kind", flush=True)
        staging_cli = _dbt_command(
            work, "run", "--select", *STAGING.select, "--threads", str(args.threads), target=CONNECT_TARGET
        )
        for n in range(args.runs):
            _staging_run(
                pipeline,
                args.threads,
                cpu,
                figure("warm server, nothing new: loop over dbt's API"),
                0,
                breakdowns["nothing new"],
            )
            _mart_run(
                pipeline, cpu, figure("mart run (two marts), nothing new"), 0, figure("vcmt_upsert model, no event")
            )
            lines = lake.land()
            _staging_run(
                pipeline, args.threads, cpu, figure("warm server, new lines: loop over dbt's API"), lines,
                breakdowns["new lines"],
            )  # fmt: skip
            _mart_run(pipeline, cpu, figure("mart run (two marts), after the new lines"), lines)
            _timed_command(staging_cli, cpu, figure("warm server, nothing new: a new `dbt run` process"))
            lines = lake.land()
            _timed_command(staging_cli, cpu, figure("warm server, new lines: a new `dbt run` process"), lines)
            _mart_run(pipeline, cpu, figure("mart run (two marts), after the new lines"), lines)
            print(f"    run {n + 1}/{args.runs} (load average {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    print("==> Spark's start on method: session (new processes; the first stages the lake on its own tables)",
          flush=True)  # fmt: skip
    _session_runs(work, 1)
    for _ in range(max(1, args.runs // 2)):
        with Cpu().measure() as spent:
            (first, second), whole = _session_runs(work, 2)
        figure("method: session, nothing new: a process's first run").add(first)
        figure("method: session, nothing new: the same process's next run").add(second)
        figure("method: session: Spark's start (first run minus next)").add(first - second)
        figure("method: session, nothing new: the whole new process").add(whole, cpu=spent[0])
    return report(figures, breakdowns)


def report(figures: dict[str, Figure], breakdowns: dict[str, dict[str, Any]]) -> str:
    out = [
        "| what | median s | range s | CPU s (median) | runs | lines | load average (1 min) |",
        "|---|--:|--:|--:|--:|--:|--:|",
        *(f.row() for f in figures.values()),
    ]
    for kind, breakdown in breakdowns.items():
        n = breakdown["runs"]
        if not n:
            continue
        total, models = breakdown["total"] / n, breakdown["models"] / n
        calls = breakdown["calls"]
        grpc = sum(s for _, s in calls.values()) / n
        out += [
            "",
            f"A warm server's run, {kind}, loop over dbt's API, mean of {n}: {total:.2f} s in all; the two models "
            f"(their wall time, side by side) {models:.2f} s; dbt's own work {total - models:.2f} s; Spark Connect "
            f"requests {grpc:.2f} s (summed over both models).",
            "",
            f"| Spark Connect requests per run ({kind}), by step | requests | s |",
            "|---|--:|--:|",
            *(
                f"| {step} | {count / n:.1f} | {seconds / n:.2f} |"
                for step, (count, seconds) in sorted(calls.items(), key=lambda kv: -kv[1][1])
            ),
        ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-bench-operator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs of each kind")
    parser.add_argument(
        "--warmup", type=int, default=WARMUP, help="staging runs with new lines before the measured ones (JIT)"
    )
    parser.add_argument("--threads", type=int, default=2, help="dbt threads of the staging runs (its two models)")
    parser.add_argument("--lines", type=int, default=100, help="lines per new batch (both topics), about")
    parser.add_argument("--history", type=int, default=20, help="batches landed and staged before the measures")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".local" / "bench-operator")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.lines < 10 or args.history < 1 or args.warmup < 0:
        parser.error("--runs and --history must be 1 or more, --lines 10 or more, --warmup 0 or more")
    from vcmt_lab.bench.machine import describe

    print(f"machine: {describe()}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
