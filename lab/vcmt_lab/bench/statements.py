"""What a `dbt run` of a vcmt_upsert model sends, read from dbt's own log, next to dbt-clickhouse's `incremental`
model (`delete+insert` on the key) loading the same events (issue 58).

    python -m vcmt_lab.bench.statements [--rows 10000] [--batch 100] [--repeat 3] [--models 20] [--threads 4]
                                        [--engines chdb http]

On each engine (the embedded one, and a node served over HTTP), in one run:

- one model of each kind over the same source of `--rows` keys; then, `--repeat` times, a batch of `--batch`
  updates of existing keys replaces the source and each model is loaded by its own `dbt run`. For each run: the
  statements dbt's debug log shows (`SQL status` lines: every statement dbt and the package send, dbt's own
  catalog reads included) and the seconds they took (the sum of those lines' times, each rounded to 10 ms by
  the log), medians; and the milliseconds the engine itself spent on those statements (system.query_log's
  `query_duration_ms`, kept on for the bench), medians;
- an empty batch: the statements of a run that has nothing to load;
- a project of `--models` models of each kind, each over its own source with a batch of `--batch` updates,
  loaded by one `dbt run --threads <--threads>` per kind: its wall time.

It prints one table per engine and the ratios vcmt / incremental, measured in this run.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vcmt_lab.bench.cli import _positive
from vcmt_lab.clickhouse_server import served_node
from vcmt_lab.dbt_project import DbtProject, Engine
from vcmt_lab.paths import BENCH_ROOT, REPO_ROOT

VCMT = "{{ config(materialized='vcmt_upsert', unique_key='id') }}\nselect id, status, n, _version from {src}"
INCREMENTAL = (
    "{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id', "
    "order_by='id') }}\nselect id, status, n, _version from {src}"
)
KINDS = {"vcmt": VCMT, "incremental": INCREMENTAL}
_STATUS = re.compile(r"SQL status: \S+ in ([0-9.]+) seconds")


@dataclass(frozen=True)
class RunFigures:
    statements: int
    sql_s: float
    wall_s: float
    engine_ms: float = 0.0


def read_log(log: str, wall_s: float, engine_ms: float = 0.0) -> RunFigures:
    """Statements and their seconds, from a dbt invocation's debug log."""
    times = [float(t) for t in _STATUS.findall(log)]
    return RunFigures(len(times), sum(times), wall_s, engine_ms)


# One statement in dbt-clickhouse's debug log: the connection's line, the SQL, then its status line.
_SENT = re.compile(r"dbt_clickhouse adapter: On [^:\n]+: (.*?)\n[^\n]*dbt_clickhouse adapter: SQL status", re.S)


def sent_verbs(log: str) -> list[str]:
    """The first word of each statement a dbt invocation's debug log shows, in order (query comments left out)."""
    verbs = []
    for sql in _SENT.findall(log):
        words = re.sub(r"/\*.*?\*/", " ", sql, flags=re.S).split(None, 1)
        verbs.append(words[0].lower().lstrip("(") if words else "")
    return verbs


def _run(project: DbtProject, *args: str) -> RunFigures:
    since = project.scalar("select toString(now64(6))")
    started = time.perf_counter()
    run = project.dbt("run", *args)
    wall_s = time.perf_counter() - started
    return read_log(run.log, wall_s, engine_ms(project, since))


def engine_ms(project: DbtProject, since: str) -> float:
    """Milliseconds the engine spent on the statements dbt sent (its query comment, which dbt puts first, marks
    them; a query naming the comment, as this one does, is not one) that started at `since` or later, from
    system.query_log."""
    project.command("system flush logs")
    return float(
        project.scalar(
            "select sum(query_duration_ms) from system.query_log where type = 'QueryFinish' "
            f"and query_start_time_microseconds >= toDateTime64('{since}', 6) "
            'and startsWith(query, \'/* {"app": "dbt"\')'
        )
        or 0
    )


def _fill(project: DbtProject, src: str, rows: int, batch: int, version: int) -> None:
    """`src` holds `batch` updates of distinct existing keys at `version` (nothing when batch is 0)."""
    project.command(f"truncate table {src}")
    if batch:
        # 7919 is prime: numbers below `rows` map to distinct keys unless `rows` is a multiple of it.
        project.command(
            f"insert into {src} select (number * 7919 + {version}) % {rows}, 'v{version}', {version}, {version} "
            f"from numbers({min(batch, rows)})"
        )


def measure_one(project: DbtProject, rows: int, batch: int, repeat: int) -> dict[str, dict[str, float]]:
    """Per kind: median statements and SQL seconds of a steady-state run, and the statements of an empty one."""
    project.command(
        "create table src (id UInt64, status String, n Int64, _version UInt64) engine = MergeTree order by id"
    )
    project.command(f"insert into src select number, 'v1', 1, 1 from numbers({rows})")
    for kind, sql in KINDS.items():
        project.model(kind, sql.replace("{src}", "src"))
    project.dbt("run")
    samples: dict[str, list[RunFigures]] = {kind: [] for kind in KINDS}
    for r in range(repeat):
        _fill(project, "src", rows, batch, r + 2)
        for kind in KINDS:
            samples[kind].append(_run(project, "--select", kind))
    _fill(project, "src", rows, 0, 0)
    out = {}
    for kind in KINDS:
        empty = _run(project, "--select", kind)
        out[kind] = {
            "statements": statistics.median(s.statements for s in samples[kind]),
            "sql_s": statistics.median(s.sql_s for s in samples[kind]),
            "engine_ms": statistics.median(s.engine_ms for s in samples[kind]),
            "wall_s": statistics.median(s.wall_s for s in samples[kind]),
            "empty_statements": empty.statements,
        }
    return out


def measure_project(project: DbtProject, rows: int, batch: int, models: int, threads: int) -> dict[str, float]:
    """Per kind: the wall time of one `dbt run --threads` of `models` models, each with a batch of its own."""
    for i in range(models):
        src = f"src_{i}"
        project.command(
            f"create table {src} (id UInt64, status String, n Int64, _version UInt64) engine = MergeTree order by id"
        )
        project.command(f"insert into {src} select number, 'v1', 1, 1 from numbers({rows})")
        for kind, sql in KINDS.items():
            project.model(f"{kind}_{i}", sql.replace("{src}", src))
    project.dbt("run", "--threads", str(threads))
    for i in range(models):
        _fill(project, f"src_{i}", rows, batch, 2)
    out = {}
    for kind in KINDS:
        out[kind] = _run(project, "--threads", str(threads), "--select", f"{kind}_*").wall_s
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vcmt_lab.bench.statements", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=_positive, default=10_000, help="keys in each source (default 10k)")
    p.add_argument("--batch", type=_positive, default=100, help="updates per load (default 100)")
    p.add_argument("--repeat", type=_positive, default=3, help="loads per model, medians reported (default 3)")
    p.add_argument("--models", type=_positive, default=20, help="models of each kind in the project (default 20)")
    p.add_argument("--threads", type=_positive, default=4, help="dbt threads for the project (default 4)")
    p.add_argument("--engines", nargs="+", choices=["chdb", "http", "native"], default=["chdb", "http"])
    p.add_argument("--work", type=Path, default=BENCH_ROOT / "work" / "statements")
    args = p.parse_args(argv)
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    report = []
    for kind in args.engines:
        with contextlib.ExitStack() as stack:
            if kind == "chdb":
                engine = Engine("chdb", chdb_path=work / "chdb", query_log=True)
            else:
                engine = Engine(kind, node=stack.enter_context(served_node(work / f"node_{kind}", query_logs=True)))
            figures = {}
            for part in ("one", "project"):
                project = DbtProject(
                    work / f"{part}_{kind}",
                    REPO_ROOT,
                    work / "chdb",
                    f"bench_statements_{part}_{uuid.uuid4().hex[:6]}",
                    lab_dir=work,
                    engine=engine,
                )
                stack.callback(project.close)
                print(f"bench statements: {kind}, {part} ...", flush=True)
                if part == "one":
                    figures["one"] = measure_one(project, args.rows, args.batch, args.repeat)
                else:
                    figures["project"] = measure_project(project, args.rows, args.batch, args.models, args.threads)
            report.append(_table(kind, figures, args))
    print("\n\n".join(report), flush=True)
    return 0


def _table(engine: str, figures: dict, args: argparse.Namespace) -> str:
    v, i = figures["one"]["vcmt"], figures["one"]["incremental"]
    pv, pi = figures["project"]["vcmt"], figures["project"]["incremental"]
    rows = [
        (
            "statements, a steady-state run",
            f"{v['statements']:.0f}",
            f"{i['statements']:.0f}",
            f"{v['statements'] / i['statements']:.2f}",
        ),
        (
            "statements, an empty run",
            f"{v['empty_statements']}",
            f"{i['empty_statements']}",
            f"{v['empty_statements'] / i['empty_statements']:.2f}",
        ),
        (
            "SQL seconds, a steady-state run",
            f"{v['sql_s']:.3f}",
            f"{i['sql_s']:.3f}",
            f"{v['sql_s'] / i['sql_s']:.2f}" if i["sql_s"] else "-",
        ),
        (
            "engine milliseconds, a steady-state run (system.query_log)",
            f"{v['engine_ms']:.0f}",
            f"{i['engine_ms']:.0f}",
            f"{v['engine_ms'] / i['engine_ms']:.2f}" if i["engine_ms"] else "-",
        ),
        (
            "wall seconds, a steady-state run",
            f"{v['wall_s']:.2f}",
            f"{i['wall_s']:.2f}",
            f"{v['wall_s'] / i['wall_s']:.2f}",
        ),
        (f"wall seconds, {args.models} models, --threads {args.threads}", f"{pv:.2f}", f"{pi:.2f}", f"{pv / pi:.2f}"),
    ]
    lines = [
        f"## {engine}: one model, {args.rows:,} keys, batches of {args.batch} updates, medians of {args.repeat}",
        "",
        "| | vcmt_upsert | incremental (delete+insert) | vcmt / incremental |",
        "|---|--:|--:|--:|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
