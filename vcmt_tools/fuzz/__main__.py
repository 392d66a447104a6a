"""make fuzz: a long randomized campaign against the oracle.

    python -m vcmt_tools.fuzz [--streams 200] [--events 2000] [--seed 1] [--dbt-every 10]

Prints `N streams × M events: K mismatches`; every failing stream prints its
seed, and `--seed S --streams 1` replays it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from vcmt_tools.dbt_project import DbtProject
from vcmt_tools.fuzz.runner import StreamResult, run_campaign

REPO_ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--events", type=int, default=2000, help="events per stream (before redeliveries)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dbt-every", type=int, default=10, help="every Nth stream runs through `dbt run` (0: never)")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".local" / "fuzz")
    args = parser.parse_args(argv)

    shutil.rmtree(args.work, ignore_errors=True)
    project = DbtProject(
        root=args.work / "project", package_root=REPO_ROOT, chdb_path=args.work / "chdb",
        schema="vcmt_fuzz", lab_dir=args.work,
    )
    started = time.time()

    def progress(i: int, result: StreamResult) -> None:
        status = "ok" if not result.problems else f"MISMATCH ({len(result.problems)} problems)"
        if result.problems or (i + 1) % 10 == 0 or i == 0:
            print(f"[{i + 1}/{args.streams}] seed {result.seed} {result.model} via {result.path}: "
                  f"{result.events} events {status}  ({time.time() - started:.0f}s)", flush=True)
        for line in result.problems[:5]:
            print(f"    {line}", flush=True)

    results = run_campaign(project, args.streams, args.events, args.seed, args.dbt_every, progress)
    project.close()
    failed = [r for r in results if r.problems]
    total_events = sum(r.events for r in results)
    print(f"\n{len(results)} streams × {args.events} events: {len(failed)} mismatches "
          f"({total_events} events delivered incl. redeliveries, {time.time() - started:.0f}s)")
    for r in failed:
        print(f"  reproduce: python -m vcmt_tools.fuzz --streams 1 --seed {r.seed} --events {args.events} "
              f"--dbt-every {1 if r.path == 'dbt' else 0}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
