"""make faults: the full sweep of the load lock's fault-injection harness (vcmt_lab.faults.harness).

    python -m vcmt_lab.faults [--drivers http native] [--shapes fold rounds] [--faults pause kill cut]
                              [--others run load full-refresh] [--all-others] [--statements NAME#N ...]

Every statement of an incremental load x fault, on a served node over each driver, with another load
started meanwhile: the other loads take turns (each statement and fault gets one; --all-others runs each).
Prints a line per schedule and `N schedules, M exact`; exits 1 unless every schedule ran its fault and
ended exact.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import uuid
from pathlib import Path

from vcmt_lab.clickhouse_server import served_node
from vcmt_lab.dbt_project import DbtProject, Engine
from vcmt_lab.faults.harness import FAULTS, OTHERS, SHAPES, Schedule, enumerate_statements, run_schedule
from vcmt_lab.paths import REPO_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--drivers", nargs="+", choices=["http", "native"], default=["http", "native"])
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--faults", nargs="+", choices=list(FAULTS), default=list(FAULTS))
    parser.add_argument("--others", nargs="+", choices=list(OTHERS), default=list(OTHERS))
    parser.add_argument("--all-others", action="store_true", help="every other load for each statement and fault")
    parser.add_argument("--statements", nargs="*", help="only these statements (NAME#N, as the sweep prints them)")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".local" / "faults")
    args = parser.parse_args(argv)

    shutil.rmtree(args.work, ignore_errors=True)
    started = time.time()
    ran = exact = 0
    with served_node(args.work / "node") as node:
        for driver in args.drivers:
            project = DbtProject(root=args.work / driver, package_root=REPO_ROOT, chdb_path=args.work / "chdb",
                                 schema=f"faults_{driver}_{uuid.uuid4().hex[:6]}", lab_dir=args.work,
                                 engine=Engine(driver, node=node))
            for shape in args.shapes:
                statements = enumerate_statements(project, shape)
                if args.statements:
                    statements = [s for s in statements if s in args.statements]
                print(f"{driver} {shape}: {len(statements)} statements x {len(args.faults)} faults, with "
                      f"{'each of' if args.all_others else 'in turn'} {', '.join(args.others)}", flush=True)
                for i, statement in enumerate(statements):
                    for j, fault in enumerate(args.faults):
                        turn = args.others[(i + j) % len(args.others)]
                        for other in args.others if args.all_others else [turn]:
                            outcome = run_schedule(project, Schedule(shape, fault, statement, other))
                            ran += 1
                            ok = outcome.exact and outcome.reached
                            exact += ok
                            print(f"{'exact' if ok else 'WRONG'}  {driver} {outcome.schedule}  "
                                  f"({', '.join(outcome.notes)}, {time.time() - started:.0f} s)", flush=True)
                            for problem in outcome.problems + ([] if outcome.reached else ["fault never reached"]):
                                print("    " + problem.replace("\n", "\n    "), flush=True)
            project.close()
    print(f"{ran} schedules, {exact} exact ({time.time() - started:.0f} s)")
    return 0 if ran and exact == ran else 1


if __name__ == "__main__":
    sys.exit(main())
