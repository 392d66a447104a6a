"""What downstream models cost a load (docs/design.md#change-feed, #online-aggregates), on the embedded engine.

    python -m vcmt_lab.bench.downstream [--rows 1000000] [--batch 100000] [--repeat 3]

Three models load the same batches of updates over the same base rows: `plain`, `feed` (`changes=true`) and
`online` (with a vcmt_aggregate model over it). The report gives each load's own seconds (`<model>__loads`, the
loader's time, dbt's excluded) as a median, the feed's and the target's stored size, a load that rebases the
feed, and the downstream incremental model's run over one batch of changes and over the whole feed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from vcmt_lab.bench.cli import _positive
from vcmt_lab.dbt_project import DbtProject, Engine
from vcmt_lab.paths import BENCH_ROOT, REPO_ROOT

MODELS = {
    "plain": "{{ config(materialized='vcmt_upsert', unique_key='id') }}\nselect id, status, amount, _version from src",
    "feed": "{{ config(materialized='vcmt_upsert', unique_key='id', changes=true) }}\n"
    "select id, status, amount, _version from src",
    "online": "{{ config(materialized='vcmt_upsert', unique_key='id') }}\nselect id, status, amount, _version from src",
    "online_totals": "{{ config(materialized='vcmt_aggregate') }}\n"
    "select status, sum(sign) as orders, sum(amount * sign) as amount from {{ ref('online') }} group by status",
    "feed_totals": "{{ config(materialized='incremental', unique_key='status') }}\n"
    "select status, sum(orders) as orders, sum(amount) as amount, max(_vcmt_load) as _vcmt_load from (\n"
    "  select status, sign as orders, amount * sign as amount, _vcmt_load from {{ vcmt.changes(ref('feed')) }}\n"
    "  {% if is_incremental() %} union all select status, orders, amount, _vcmt_load from {{ this }}\n"
    "  where status in (select status from {{ vcmt.changes(ref('feed')) }}) {% endif %}\n"
    ") group by status",
}
LOADED = ("plain", "feed", "online")


def _batch(project: DbtProject, rows: int, batch: int, version: int) -> None:
    """`src` := `batch` updates of existing keys (new statuses and amounts), version `version`."""
    project.command("truncate table src")
    project.command(
        f"insert into src select cityHash64(number, {version}) % {rows}, "
        f"['new', 'paid', 'shipped', 'lost'][number % 4 + 1], toInt64(number % 1000), {version} from numbers({batch})"
    )


def _load_seconds(project: DbtProject, model: str) -> float:
    return float(project.scalar(f"select seconds from {model}__loads order by loaded_at desc limit 1"))


def _timed(project: DbtProject, *args: str) -> float:
    started = time.perf_counter()
    project.dbt(*args)
    return time.perf_counter() - started


def _bytes(project: DbtProject, table: str) -> int:
    return int(
        project.scalar(
            "select sum(bytes_on_disk) from system.parts where active and database = currentDatabase() "
            f"and table = '{table}'"
        )
    )


def measure(project: DbtProject, rows: int, batch: int, repeat: int) -> dict[str, object]:
    project.command(
        "create table src (id UInt64, status String, amount Int64, _version UInt64) engine = MergeTree order by id"
    )
    for name, sql in MODELS.items():
        project.model(name, sql)
    project.command(f"insert into src select number, 'new', 1, 1 from numbers({rows})")
    project.dbt("run")
    loads: dict[str, list[float]] = {m: [] for m in LOADED}
    downstream: list[float] = []
    for version in range(2, 2 + repeat):
        _batch(project, rows, batch, version)
        # Each model in another order each time: no model always loads first (caches, merges).
        order = LOADED[version % 3 :] + LOADED[: version % 3]
        for model in order:
            project.dbt("run", "--select", model)
            loads[model].append(_load_seconds(project, model))
        downstream.append(_timed(project, "run", "--select", "feed_totals"))
    out: dict[str, object] = {m: statistics.median(s) for m, s in loads.items()}
    out["loads"] = repeat
    out["feed_totals_per_batch"] = statistics.median(downstream)
    out["feed_totals_whole_feed"] = _timed(project, "run", "--select", "feed_totals", "--full-refresh")
    project.command("optimize table feed final")
    project.command("optimize table feed__changes final")
    out["target_bytes"] = _bytes(project, "feed")
    out["feed_bytes"] = _bytes(project, "feed__changes")
    out["target_rows"] = int(project.scalar("select count() from feed"))
    out["feed_rows"] = int(project.scalar("select count() from feed__changes"))
    # A load that rebases: the first after the feed outgrew twice the merged table (loads before it may not).
    version = 2 + repeat
    grown = out["feed_rows"]
    project.vars = {"vcmt_changes_rebase_rows": 10**18}
    while grown <= 2 * int(out["target_rows"]):
        _batch(project, rows, batch, version)
        project.dbt("run", "--select", "feed")
        project.command("optimize table feed final")
        grown = int(project.scalar("select count() from feed__changes"))
        version += 1
    project.vars = {"vcmt_changes_rebase_rows": 0}
    _batch(project, rows, batch, version)
    project.dbt("run", "--select", "feed")
    out["rebase_load"] = _load_seconds(project, "feed")
    out["grown_feed_rows"] = grown
    out["rebased_feed_rows"] = int(project.scalar("select count() from feed__changes"))
    if out["rebased_feed_rows"] >= grown:
        raise RuntimeError(f"the last load did not rebase the feed: {out}")
    return out


def report(results: dict[str, object], rows: int, batch: int) -> str:
    r = results
    plain = float(r["plain"])
    return "\n".join(
        [
            f"downstream costs on chDB: {rows} rows, loads of {batch} updates (median load seconds, dbt excluded)",
            f"  load, plain:                           {plain:.2f} s",
            f"  load, changes=true:                    {r['feed']:.2f} s ({float(r['feed']) / plain:.2f}x)",
            f"  load, with a vcmt_aggregate model:     {r['online']:.2f} s ({float(r['online']) / plain:.2f}x)",
            f"  load that rebases the feed:            {r['rebase_load']:.2f} s "
            f"({float(r['rebase_load']) / plain:.2f}x; feed {r['grown_feed_rows']} -> {r['rebased_feed_rows']} rows)",
            f"  after {r['loads']} loads, feed: {r['feed_rows']} rows, {int(r['feed_bytes']) / 1e6:.1f} MB; table: "
            f"{r['target_rows']} rows, {int(r['target_bytes']) / 1e6:.1f} MB (merged)",
            f"  incremental model over the feed: {r['feed_totals_per_batch']:.2f} s per batch (dbt run), "
            f"{r['feed_totals_whole_feed']:.2f} s over the whole feed (--full-refresh)",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vcmt_lab.bench.downstream", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=_positive, default=1_000_000, help="base rows (default 1M)")
    p.add_argument("--batch", type=_positive, default=100_000, help="updates per load (default 100000)")
    p.add_argument("--repeat", type=_positive, default=3, help="loads per model, median reported (default 3)")
    p.add_argument("--work", type=Path, default=BENCH_ROOT / "work" / "downstream")
    args = p.parse_args(argv)
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    project = DbtProject(
        work / "project",
        REPO_ROOT,
        work / "chdb",
        "vcmt_bench_downstream",
        lab_dir=work,
        engine=Engine("chdb", chdb_path=work / "chdb"),
    )
    try:
        print(report(measure(project, args.rows, args.batch, args.repeat), args.rows, args.batch), flush=True)
    finally:
        project.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
