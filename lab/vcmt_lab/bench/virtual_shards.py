"""Virtual shards: one batch applied by `dbt run` at K = 1, 2, ... (docs/design.md#virtual-shards).

    python -m vcmt_lab.bench.virtual_shards [--rows 2000000] [--batch 1000000] [--shards 1,2] [--repeat 3]
                                            [--engine chdb|http|cluster]

One model per K over the same base rows, on the embedded engine (`chdb`, the
default), on a ClickHouse node it serves on 127.0.0.1 (`http`, through
dbt-clickhouse), or on the lab's two-shard cluster (`cluster`: the model
sharded by `cityHash64(id)`, so K virtual shards run on each of the two
shards); before each sample the model is put back to the base state, then
the batch is applied with `dbt run`. Reports per K the load's seconds as
vcmt records them (the model's `loads` table), the engine's CPU seconds over
the same run (chDB's in this process, each node's in its own: per shard on
the cluster), the throughput ratio to K = 1, and whether the live rows are
identical for every K.
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
from vcmt_lab.clickhouse_cluster import two_shard_cluster
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
    # On the cluster: each shard's node's CPU seconds per sample (run_cpu_s is their sum).
    shard_cpu_s: list[list[float]] = field(default_factory=list)
    state: tuple = ()


def measure(
    engine: Engine,
    project: DbtProject,
    rows: int,
    batch: int,
    shards: list[int],
    repeat: int,
    say=print,
    pids: Sequence[int] = (),
    cluster: str | None = None,
) -> list[ShardSamples]:
    """Measure each K in `shards` on `engine`; on `cluster` (its name) the models are sharded, `pids` are the
    served nodes' (one per shard), and every reset and read goes through every shard."""
    db = engine.database
    on_cluster = f" on cluster `{cluster}`" if cluster else ""
    sharded = ", sharding_key='cityHash64(id)'" if cluster else ""
    engine.command(f"create database if not exists `{db}`{on_cluster}")
    engine.command(f"create table `{db}`.vs_src ({COLUMNS}) engine = MergeTree order by tuple()")
    engine.command(
        f"insert into `{db}`.vs_src select number * 2, number, toString(number % 100), 1, 1 from numbers({rows})"
    )
    models = {k: f"vs_k{k}" for k in shards}
    for k, name in models.items():
        project.model(
            name,
            f"{{{{ config(materialized='vcmt_upsert', unique_key='id', virtual_shards={k}{sharded}) }}}}\n"
            "select * from vs_src",
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
                engine.command(f"truncate table `{db}`.`{table}`{on_cluster}")
            # On the cluster `name` is the Distributed table: the rows reach their shards before the run.
            engine.command(
                f"insert into `{db}`.`{name}` select * from `{db}`.vs_base",
                **({"distributed_foreground_insert": 1} if cluster else {}),
            )
            with measured(name, *pids) as out:
                project.dbt("run", "--select", name)
            s = samples[k]
            loads = f"`{db}`.`{objects[name]['loads']}`"
            if cluster:
                loads = f"clusterAllReplicas(`{cluster}`, {loads})"
            s.load_s.append(float(engine.scalar(f"select max(seconds) from {loads}")))
            s.run_wall_s.append(out[0].wall_ms / 1000)
            s.run_cpu_s.append(sum(t.cpu_ms for t in out) / 1000)
            if cluster:
                s.shard_cpu_s.append([t.cpu_ms / 1000 for t in out])
            s.state = tuple(
                engine.rows(
                    f"select count(), sum(cityHash64(id, a, b, _version)) from `{db}`.`{name}` final where sign = 1"
                )[0]
            )
            per_shard = f" ({' + '.join(f'{c:.2f}' for c in s.shard_cpu_s[-1])} per shard)" if cluster else ""
            say(
                f"repeat {r + 1}: K={k} load {s.load_s[-1]:.2f}s, dbt run {s.run_wall_s[-1]:.2f}s wall, "
                f"{s.run_cpu_s[-1]:.2f}s CPU{per_shard}"
            )
    return list(samples.values())


def render(results: list[ShardSamples], rows: int, batch: int, load: tuple[float, float, float]) -> str:
    base = statistics.median(results[0].load_s)
    lines = [
        f"virtual shards: base {rows:,} rows, batch {batch:,} events; median of {len(results[0].load_s)}; "
        f"load average {load[0]:.1f} -> {load[1]:.1f}, other processes used {load[2]:.0%} of the cores",
        "| K | load s (min-max) | throughput vs K=1 | dbt run wall s | dbt run CPU s | CPU s per shard | live rows |",
        "|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s in results:
        load_s = statistics.median(s.load_s)
        wall, cpu = statistics.median(s.run_wall_s), statistics.median(s.run_cpu_s)
        per_shard = " + ".join(f"{statistics.median(c):.2f}" for c in zip(*s.shard_cpu_s, strict=True)) or "-"
        lines.append(
            f"| {s.shards} | {load_s:.2f} ({min(s.load_s):.2f}-{max(s.load_s):.2f}) | {base / load_s:.2f}x "
            f"| {wall:.2f} | {cpu:.2f} | {per_shard} | {s.state[0]:,} |"
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
    p.add_argument(
        "--engine",
        choices=("chdb", "http", "cluster"),
        default="chdb",
        help="embedded, a served node (HTTP), or the lab's two-shard cluster (a sharded model)",
    )
    p.add_argument("--work", type=Path, default=BENCH_ROOT / "work" / "virtual_shards")
    args = p.parse_args(argv)
    shards = [int(k) for k in args.shards.split(",")]
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    if args.engine == "chdb":
        results, load = _run(args, shards, work, None)
    elif args.engine == "http":
        with served_node(work / "node") as node:
            results, load = _run(args, shards, work, node, [node.pid])
    else:
        with two_shard_cluster(work / "cluster") as cluster:
            results, load = _run(args, shards, work, cluster, [n.pid for n in cluster.nodes], cluster.name)
    print(f"engine: {args.engine}", render(results, args.rows, args.batch, load), sep="\n", flush=True)
    return 0 if len({s.state for s in results}) == 1 else 1


def _run(
    args: argparse.Namespace, shards: list[int], work: Path, node, pids: Sequence[int] = (), cluster: str | None = None
) -> tuple[list[ShardSamples], tuple[float, float, float]]:
    """Build and measure on chDB in `work`, or on the served `node` or cluster entry (the CPU measured is that of
    the processes `pids`); with the machine's contention meanwhile, those processes counted as the bench's."""
    contention = Contention(pids)
    with bench_project(work, "vcmt_bench_vs", node, cluster) as (engine, project):
        results = measure(engine, project, args.rows, args.batch, shards, args.repeat, pids=pids, cluster=cluster)
    return results, contention.finish()


if __name__ == "__main__":
    raise SystemExit(main())
