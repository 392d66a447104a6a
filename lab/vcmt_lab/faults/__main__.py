"""make faults: the full sweep of the load lock's fault-injection harness (vcmt_lab.faults.harness).

    python -m vcmt_lab.faults [--targets http native cluster] [--shapes fold rounds shards] [--faults pause kill cut]
                              [--others run load full-refresh] [--all-others] [--statements NAME#N ...]
                              [--hiding-profile]

Every statement of an incremental load x fault, on each target: a served node over HTTP (`http`) and over
native (`native`), and the two-node cluster (`cluster`: a sharded model, over HTTP, the faulted run through
the first node and the other load through the second), with another load started meanwhile: the other loads
take turns (each statement and fault gets one; --all-others runs each). With --hiding-profile every load's
profile sets what could hide a running statement from another load (HIDING_PROFILE: its text cut to one
character, its own `log_comment`). Prints a line per schedule and
`N schedules, M exact` per target and in all; exits 1 unless every schedule ran its fault and ended exact.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import time
import uuid
from pathlib import Path

from vcmt_lab.clickhouse_cluster import two_shard_cluster
from vcmt_lab.clickhouse_server import served_node
from vcmt_lab.dbt_project import DbtProject, Engine
from vcmt_lab.faults.harness import (
    FAULTS,
    HIDING_PROFILE,
    OTHERS,
    SHAPES,
    Schedule,
    enumerate_statements,
    run_schedule,
    through_other_node,
)
from vcmt_lab.paths import REPO_ROOT

TARGETS = ("http", "native", "cluster")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--faults", nargs="+", choices=list(FAULTS), default=list(FAULTS))
    parser.add_argument("--others", nargs="+", choices=list(OTHERS), default=list(OTHERS))
    parser.add_argument("--all-others", action="store_true", help="every other load for each statement and fault")
    parser.add_argument("--statements", nargs="*", help="only these statements (NAME#N, as the sweep prints them)")
    parser.add_argument(
        "--hiding-profile", action="store_true", help="profiles that cut statements' text and set a log_comment"
    )
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".local" / "faults")
    args = parser.parse_args(argv)

    shutil.rmtree(args.work, ignore_errors=True)
    started = time.time()
    totals: list[tuple[str, int, int, float]] = []
    for target in args.targets:
        since = time.time()
        with contextlib.ExitStack() as stack:
            if target == "cluster":
                cluster = stack.enter_context(two_shard_cluster(args.work / "cluster"))
                engine = Engine("http", node=cluster, cluster=cluster.name)
            else:
                node = stack.enter_context(served_node(args.work / f"node_{target}"))
                engine = Engine(target, node=node)
            project = DbtProject(
                root=args.work / target,
                package_root=REPO_ROOT,
                chdb_path=args.work / "chdb",
                schema=f"faults_{target}_{uuid.uuid4().hex[:6]}",
                lab_dir=args.work,
                engine=engine,
                custom_settings=HIDING_PROFILE if args.hiding_profile else {},
            )
            stack.callback(project.close)
            other_target = stack.enter_context(through_other_node(project))
            ran, exact = _sweep(args, target, project, other_target, started)
        totals.append((target, ran, exact, time.time() - since))
        print(f"{target}: {ran} schedules, {exact} exact ({time.time() - since:.0f} s)", flush=True)
    ran = sum(t[1] for t in totals)
    exact = sum(t[2] for t in totals)
    print(f"{ran} schedules, {exact} exact ({time.time() - started:.0f} s)")
    return 0 if ran and exact == ran else 1


def _sweep(
    args: argparse.Namespace, target: str, project: DbtProject, other_target: str | None, started: float
) -> tuple[int, int]:
    ran = exact = 0
    for shape in args.shapes:
        statements = enumerate_statements(project, shape)
        if args.statements:
            statements = [s for s in statements if s in args.statements]
        print(
            f"{target} {shape}: {len(statements)} statements x {len(args.faults)} faults, with "
            f"{'each of' if args.all_others else 'in turn'} {', '.join(args.others)}",
            flush=True,
        )
        for i, statement in enumerate(statements):
            for j, fault in enumerate(args.faults):
                turn = args.others[(i + j) % len(args.others)]
                for other in args.others if args.all_others else [turn]:
                    outcome = run_schedule(project, Schedule(shape, fault, statement, other), other_target)
                    ran += 1
                    ok = outcome.exact and outcome.reached
                    exact += ok
                    print(
                        f"{'exact' if ok else 'WRONG'}  {target} {outcome.schedule}  "
                        f"({', '.join(outcome.notes)}, {time.time() - started:.0f} s)",
                        flush=True,
                    )
                    for problem in outcome.problems + ([] if outcome.reached else ["fault never reached"]):
                        print("    " + problem.replace("\n", "\n    "), flush=True)
    return ran, exact


if __name__ == "__main__":
    sys.exit(main())
