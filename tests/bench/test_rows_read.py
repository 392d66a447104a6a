"""`python -m vcmt_lab.bench.rows_read` at a tiny size (issue 41): rows read by the transform against the floor.

Rows read do not depend on the machine's load, so unlike the timing bench this one asserts numbers. It runs
in a subprocess: chDB allows one data directory per process and the test session holds its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# The served node runs the layouts that tell the lookup apart (the index is the engine's, the same on both).
LAYOUTS = {"chdb": "none,mod,mod_sorted,mod_default,mod_bloom", "http": "none,mod,mod_sorted,mod_default"}


def _ratios(stdout: str) -> dict[tuple[str, str], float]:
    """(layout, keys) -> transform / floor, from the printed table (one batch size, one N)."""
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 13 and cells[0] in ("mod", "mod_sorted", "mod_default", "mod_bloom", "none"):
            out[(cells[0], cells[4])] = float(cells[7])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("on", ["chdb", "http"])
def test_a_sorting_key_led_by_the_partition_or_a_bloom_filter_keeps_a_small_batch_to_its_granules(
    tmp_path: Path, on: str
) -> None:
    """200k rows partitioned by `id % 20`, granularity 1024, 100 random keys: sorted by the key alone
    (`order_by=['id']`) and without a skip index, the transform reads every partition's granule whose key range
    covers a batch key (> 2x the floor). Sorted by `(id % 20, id)`, set by the model or by the package when the
    model sets no `order_by`, the lookup is on that tuple; with `indexes=[bloom_filter on id]` the index skips
    the other granules: each reads about the floor, as an unpartitioned model does. The same on the embedded
    engine and on a served node through dbt-clickhouse over HTTP."""
    proc = subprocess.run(
        [sys.executable, "-m", "vcmt_lab.bench.rows_read", "--rows", "200000", "--batches", "100",
         "--granularity", "1024", "--layouts", LAYOUTS[on], "--work", str(tmp_path / "work"),
         "--engine", on],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert f"engine: {on}\n" in proc.stdout, proc.stdout
    ratios = _ratios(proc.stdout)
    assert len(ratios) == 1 + 2 * LAYOUTS[on].count(","), proc.stdout
    assert ratios[("none", "spread")] <= 1.2, proc.stdout
    assert ratios[("mod", "spread")] > 2, proc.stdout
    assert ratios[("mod_sorted", "spread")] <= 1.2, proc.stdout
    assert ratios[("mod_default", "spread")] <= 1.2, proc.stdout  # no order_by: the package sorts by (id % 20, id)
    assert "mod_bloom" not in LAYOUTS[on] or ratios[("mod_bloom", "spread")] <= 1.2, proc.stdout
    # keys of one partition: the partition pruner already maps the key set through `id % 20`
    assert all(v <= 2 for (_, keys), v in ratios.items() if keys == "one partition"), proc.stdout
    assert "goal: transform rows read <= 2 x floor" in proc.stdout and ": met (" in proc.stdout
    # the whole stage INSERT: the transform plus the batch itself and the other views' reads of the block
    table = proc.stdout.split(f"engine: {on}\n", 1)[1]
    loads = [float(line.split("|")[9]) for line in table.splitlines() if line.startswith("| mod_sorted |")]
    assert len(loads) == 2 and all(0 < load <= 1.5 for load in loads), proc.stdout
