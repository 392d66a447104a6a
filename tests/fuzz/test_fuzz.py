"""A short randomized campaign in every `make test`; `make fuzz` runs the long one."""

from __future__ import annotations

import os

import pytest

from tests.conftest import make_project
from vcmt_lab.fuzz.runner import HOSTILE_PROFILE_SETTINGS, run_campaign
from vcmt_lab.fuzz.streams import MODEL_SPECS

# One stream per model shape (stream seeds pick the shape round-robin).
STREAMS = int(os.environ.get("VCMT_FUZZ_STREAMS", str(len(MODEL_SPECS))))
EVENTS = int(os.environ.get("VCMT_FUZZ_EVENTS", "300"))
SEED = int(os.environ.get("VCMT_FUZZ_SEED", "1000"))
# Each stream in up to 8 batches (0: up to 21, as make fuzz): a batch through `dbt run` costs seconds.
MAX_BATCHES = int(os.environ.get("VCMT_FUZZ_MAX_BATCHES", "8")) or None

# The server leg: the same streams on a served node over HTTP (tests/conftest.py).
pytestmark = pytest.mark.engines("chdb", "http")


def test_random_streams_match_oracle(tmp_path, chdb_path, lab_dir, engine):
    """Random streams through the external writer and `dbt run`, with crashes, empty runs, full refreshes (some
    failing mid-load) and a hostile profile, end equal to the oracle, invariants intact."""
    project = make_project(
        tmp_path / "proj", "fuzz", chdb_path, lab_dir, custom_settings=HOSTILE_PROFILE_SETTINGS, engine=engine
    )
    try:
        results = run_campaign(project, STREAMS, EVENTS, SEED, dbt_every=5, max_batches=MAX_BATCHES)
    finally:
        project.close()
    failures = [
        f"seed {r.seed} ({r.model} via {r.path}, {r.virtual_shards} virtual shards): " + "; ".join(r.problems[:3])
        for r in results
        if r.problems
    ]
    assert len(results) == STREAMS
    # Loads as concurrent INSERTs (virtual shards) are part of the campaign.
    assert STREAMS < len(MODEL_SPECS) or any(r.virtual_shards > 1 for r in results)
    # Truncates and unsent columns are part of it too.
    assert STREAMS < len(MODEL_SPECS) or {"fz_truncate", "fz_unsent"} <= {r.model for r in results}
    # So are full refreshes in the middle of a stream, on every stream through `dbt run`.
    assert all(r.full_refreshes == 1 for r in results if r.path == "dbt") and any(r.path == "dbt" for r in results)
    replay = f"python -m vcmt_lab.fuzz --streams 1 --seed S --events {EVENTS}" + (
        f" --max-batches {MAX_BATCHES}" if MAX_BATCHES else ""
    )
    assert not failures, f"mismatches (replay with {replay}):\n" + "\n".join(failures)


LAKE_STREAMS = int(os.environ.get("VCMT_FUZZ_LAKE_STREAMS", "3"))


@pytest.mark.engines("chdb")
def test_streams_delivered_as_lake_files_match_oracle(tmp_path, chdb_path, lab_dir, engine):
    """Streams delivered as Parquet files into batch folders (late files, files added to loaded batches,
    duplicate deliveries, a killed staging job's leftovers, loads failing after their claim, a full refresh) and
    read with `vcmt.lake_source(..., new_files=true)` end equal to the oracle, each file recorded once."""
    project = make_project(
        tmp_path / "proj", "fuzz_lake", chdb_path, lab_dir, custom_settings=HOSTILE_PROFILE_SETTINGS, engine=engine
    )
    try:
        # Seeds 2997-2999: unconditional deletes (fold and rounds), truncates.
        results = run_campaign(project, LAKE_STREAMS, 100, 2997, dbt_every=0, lake_every=1)
    finally:
        project.close()
    assert [r.path for r in results] == ["lake"] * LAKE_STREAMS
    kinds = {k for r in results for k, n in r.lake.items() if n}
    assert kinds == {"late files", "duplicate files", "failed loads", "killed staging jobs"}, kinds
    failures = [f"seed {r.seed} ({r.model} via lake): " + "; ".join(r.problems[:3]) for r in results if r.problems]
    assert not failures, (
        "mismatches (replay with python -m vcmt_lab.fuzz --lake-every 1 --streams 1 --seed S):\n" + "\n".join(failures)
    )


# Streams through `dbt run` with downstream models (make fuzz runs them on every stream through `dbt run`).
DOWNSTREAM_STREAMS = int(os.environ.get("VCMT_FUZZ_DOWNSTREAM_STREAMS", "1"))


def test_downstream_models_match_oracle(tmp_path, chdb_path, lab_dir, engine):
    """A stream through `dbt run` whose model keeps a change feed: its incremental model over the feed and its
    online aggregate (vcmt_lab.fuzz.downstream) equal the oracle's totals after every batch, through crashed and
    empty loads, runs of the incremental model that fail while reading or after their swap, a full refresh of
    the model mid-stream (the incremental model then names its --full-refresh), and, on a served node, a batch
    loaded by two overlapping runs while the incremental model runs."""
    project = make_project(
        tmp_path / "proj",
        "fuzz_downstream",
        chdb_path,
        lab_dir,
        custom_settings=HOSTILE_PROFILE_SETTINGS,
        engine=engine,
    )
    try:
        # Seed 1002: fz_policies (every policy, an SQL one among them: loads in rounds), versioned deletes, so
        # crashed loads too.
        results = run_campaign(project, DOWNSTREAM_STREAMS, 100, 1002, dbt_every=1, max_batches=5, downstream=True)
    finally:
        project.close()
    assert [r.path for r in results] == ["dbt"] * DOWNSTREAM_STREAMS
    # Two failing runs where two plain steps remain (one is the overlapping loads' on a served node).
    assert all(r.downstream_runs >= 4 and r.full_refreshes == 1 and r.downstream_failures >= 1 for r in results), (
        results
    )
    assert all(r.overlapping_loads == 1 for r in results) == engine.served, results
    failures = [f"seed {r.seed} ({r.model}): " + "; ".join(r.problems[:3]) for r in results if r.problems]
    assert not failures, (
        "mismatches (replay with python -m vcmt_lab.fuzz --dbt-every 1 --lake-every 0 --max-batches 5 --events 100 "
        "--streams 1 --seed S):\n" + "\n".join(failures)
    )
