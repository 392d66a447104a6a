"""A short randomized campaign in every `make test`; `make fuzz` runs the long one."""

from __future__ import annotations

import os

from vcmt_tools.fuzz.runner import run_campaign

STREAMS = int(os.environ.get("VCMT_FUZZ_STREAMS", "10"))
EVENTS = int(os.environ.get("VCMT_FUZZ_EVENTS", "300"))
SEED = int(os.environ.get("VCMT_FUZZ_SEED", "1000"))


def test_random_streams_match_oracle(project):
    """Random streams through the stage writer and `dbt run` end equal to the oracle, invariants intact."""
    results = run_campaign(project, STREAMS, EVENTS, SEED, dbt_every=5)
    failures = [
        f"seed {r.seed} ({r.model} via {r.path}): " + "; ".join(r.problems[:3]) for r in results if r.problems
    ]
    assert len(results) == STREAMS
    assert not failures, "mismatches (replay with python -m vcmt_tools.fuzz --streams 1 --seed S):\n" + "\n".join(failures)
