"""Virtual shards: one batch applied by `dbt run` at K = 1, 2, ... (docs/design.md#virtual-shards).

    python -m vcmt_lab.bench.virtual_shards [--rows 2000000] [--batch 1000000] [--shards 1,2] [--repeat 3]
                                            [--engine chdb|http]

One model per K over the same base rows, on the embedded engine (`chdb`, the
default) or on a ClickHouse node it serves on 127.0.0.1 (`http`, through
dbt-clickhouse); before each sample the model is put back to the base state,
then the batch is applied with `dbt run`. Reports per K the load's seconds as
vcmt records them (the model's `loads` table), the engine's CPU seconds over
the same run (chDB's in this process, the node's in its own), the
throughput ratio to K = 1, and whether the live rows are identical for every K.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vcmt_lab.bench.cli import _positive
from vcmt_lab.bench.engine import Engine, bench_project, measured
from vcmt_lab.bench.machine import Contention
from vcmt_lab.clickhouse_server import served_node
from vcmt_lab.dbt_project import DbtProject
from vcmt_lab.paths import BENCH_ROOT

COLUMNS = "id UInt64, a Int64, b String, _version UInt64, sign Int8"


@dataclass
class ShardSamples:
    shards: int
    load_s: list[float] = field(default_factory=list)
    run_wall_s: list[float] = field(default_factory=list)
    run_cpu_s: list[float] = field(default_factory=list)
    state: tuple = ()


def measure(
    engine: Engine,
    project: DbtProject,
    rows: int,
    batch: int,
    shards: list[int],
    repeat: int,
    say=print,
    pid: int | None = None,
) -> list[ShardSamples]:
    db = engine.database
    engine.command(f"create database if not exists `{db}`")
    engine.command(f"create table `{db}`.vs_src ({COLUMNS}) engine = MergeTree order by tuple()")
    engine.command(
        f"insert into `{db}`.vs_src select number * 2, number, toString(number % 100), 1, 1 from numbers({rows})"
    )
    models = {k: f"vs_k{k}" for k in shards}
    for k, name in models.items():
        project.model(
            name,
            f"{{{{ config(materialized='vcmt_upsert', unique_key='id', virtual_shards={k}) }}}}\nselect * from vs_src",
        )
    say(f"building {len(models)} models of {rows:,} rows")
    project.dbt("run", "--select", *models.values())
    # The base state, kept aside; the batch: random keys over twice the base's key space, 5% deletes.
    engine.command(
        f"create table `{db}`.vs_base engine = MergeTree order by id as select * from `{db}`.`{models[shards[0]]}`"
    )
    engine.command(f"truncate table `{db}`.vs_src")
    engine.command(
        f"insert into `{db}`.vs_src select cityHash64(number) % {2 * rows}, number, 'x', 2 + number, "
        f"if(number % 20 = 0, -1, 1) from numbers({batch})"
    )
    samples = {k: ShardSamples(k) for k in shards}
    objects = {name: project.object_names(name) for name in models.values()}
    for r in range(repeat):
        for k, name in models.items():
            for table in (objects[name][role] for role in ("target", "tombstones", "applied", "loads")):
                engine.command(f"truncate table `{db}`.`{table}`")
            engine.command(f"insert into `{db}`.`{name}` select * from `{db}`.vs_base")
            with measured(name, pid) as out:
                project.dbt("run", "--select", name)
            s = samples[k]
            s.load_s.append(float(engine.scalar(f"select max(seconds) from `{db}`.`{objects[name]['loads']}`")))
            s.run_wall_s.append(out[0].wall_ms / 1000)
            s.run_cpu_s.append(out[0].cpu_ms / 1000)
            s.state = tuple(
                engine.rows(
                    f"select count(), sum(cityHash64(id, a, b, _version)) from `{db}`.`{name}` final where sign = 1"
                )[0]
            )
            say(
                f"repeat {r + 1}: K={k} load {s.load_s[-1]:.2f}s, dbt run {s.run_wall_s[-1]:.2f}s wall, "
                f"{s.run_cpu_s[-1]:.2f}s CPU"
            )
    return list(samples.values())


def render(results: list[ShardSamples], rows: int, batch: int, load: tuple[float, float, float]) -> str:
    base = statistics.median(results[0].load_s)
    lines = [
        f"virtual shards: base {rows:,} rows, batch {batch:,} events; median of {len(results[0].load_s)}; "
        f"load average {load[0]:.1f} -> {load[1]:.1f}, other processes used {load[2]:.0%} of the cores",
        "| K | load s (min-max) | throughput vs K=1 | dbt run wall s | dbt run CPU s | live rows |",
        "|--:|--:|--:|--:|--:|--:|",
    ]
    for s in results:
        load_s = statistics.median(s.load_s)
        wall, cpu = statistics.median(s.run_wall_s), statistics.median(s.run_cpu_s)
        lines.append(
            f"| {s.shards} | {load_s:.2f} ({min(s.load_s):.2f}-{max(s.load_s):.2f}) | {base / load_s:.2f}x "
            f"| {wall:.2f} | {cpu:.2f} | {s.state[0]:,} |"
        )
    same = len({s.state for s in results}) == 1
    lines.append("identical live rows for every K" if same else "LIVE ROWS DIFFER between K values")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vcmt_lab.bench.virtual_shards", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=_positive, default=2_000_000, help="base rows (default 2M)")
    p.add_argument("--batch", type=_positive, default=1_000_000, help="events in the batch (default 1M)")
    p.add_argument("--shards", default="1,2", help="K values, the first is the reference (default 1,2)")
    p.add_argument("--repeat", type=_positive, default=3, help="samples per K, median reported (default 3)")
    p.add_argument("--engine", choices=("chdb", "http"), default="chdb", help="embedded, or a served node (HTTP)")
    p.add_argument("--work", type=Path, default=BENCH_ROOT / "work" / "virtual_shards")
    args = p.parse_args(argv)
    shards = [int(k) for k in args.shards.split(",")]
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    contention = Contention()
    if args.engine == "chdb":
        results = _run(args, shards, work, None)
    else:
        with served_node(work / "node") as node:
            results = _run(args, shards, work, node)
    print(f"engine: {args.engine}", render(results, args.rows, args.batch, contention.finish()), sep="\n", flush=True)
    return 0 if len({s.state for s in results}) == 1 else 1


def _run(args: argparse.Namespace, shards: list[int], work: Path, node) -> list[ShardSamples]:
    """Build and measure on chDB in `work`, or on the served `node` (the CPU measured is its process's)."""
    with bench_project(work, "vcmt_bench_vs", node) as (engine, project):
        return measure(engine, project, args.rows, args.batch, shards, args.repeat, pid=node.pid if node else None)


if __name__ == "__main__":
    raise SystemExit(main())
