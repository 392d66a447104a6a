"""make fuzz: a long randomized campaign against the oracle.

    python -m vcmt_lab.fuzz [--streams 200] [--events 2000] [--seed 1] [--dbt-every 10] [--jobs 2]
                            [--clickhouse chdb|server]

Prints `N streams × M events: K mismatches`; every failing stream prints its
seed, and `--seed S --streams 1` replays it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from vcmt_lab.fuzz.runner import run_share
from vcmt_lab.paths import REPO_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--events", type=int, default=2000, help="events per stream (before redeliveries)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dbt-every", type=int, default=10, help="every Nth stream runs through `dbt run` (0: never)")
    parser.add_argument(
        "--lake-every",
        type=int,
        default=10,
        help="every Nth stream is delivered as lake files (new_files=true; chdb only; 0: never)",
    )
    parser.add_argument(
        "--max-batches",
        type=int,
        default=None,
        help="deliver each stream in at most this many batches (default: up to 21)",
    )
    parser.add_argument(
        "--no-downstream",
        dest="downstream",
        action="store_false",
        help="streams through `dbt run` leave out their downstream models (an incremental model over the change "
        "feed and an online aggregate, compared with the oracle after every batch)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="worker processes, each with its own chDB engine")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".local" / "fuzz")
    parser.add_argument(
        "--clickhouse",
        choices=["chdb", "server"],
        default="chdb",
        help="chdb (default): each worker's own embedded engine; server: each worker's own node "
        "served on 127.0.0.1, over HTTP",
    )
    args = parser.parse_args(argv)

    shutil.rmtree(args.work, ignore_errors=True)
    started = time.time()
    jobs = max(1, min(args.jobs, args.streams))
    shares = [list(range(j, args.streams, jobs)) for j in range(jobs)]
    if jobs == 1:
        results = run_share(args, 0, shares[0], started)
    else:
        # One chDB engine per process: each worker owns a data directory.
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(run_share, args, j, share, started) for j, share in enumerate(shares)]
            results = sorted((r for f in futures for r in f.result()), key=lambda r: r.seed)
    failed = [r for r in results if r.problems]
    total_events = sum(r.events for r in results)
    sharded = sum(r.virtual_shards > 1 for r in results)
    refreshed = sum(r.full_refreshes for r in results)
    downstream_runs = sum(r.downstream_runs for r in results)
    print(
        f"\n{len(results)} streams × {args.events} events: {len(failed)} mismatches "
        f"({total_events} events delivered incl. redeliveries; {sharded} of them on more than one virtual shard; "
        f"{refreshed} full refreshes mid-stream; downstream models compared after {downstream_runs} batches; "
        f"{time.time() - started:.0f}s)"
    )
    for r in failed:
        print(
            f"  reproduce: python -m vcmt_lab.fuzz --streams 1 --jobs 1 --seed {r.seed} --events {args.events} "
            f"--dbt-every {1 if r.path == 'dbt' else 0} --lake-every {1 if r.path == 'lake' else 0}"
            + (f" --max-batches {args.max_batches}" if args.max_batches else "")
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
