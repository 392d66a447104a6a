"""`python -m vcmt_lab.bench` end to end at a tiny size: files written, results checked.

No timing assertions: at this size the numbers mean nothing. The bench runs in
a subprocess because chDB allows one data directory per process and the test
session already holds its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_tiny_run_writes_report_and_chart(tmp_path: Path) -> None:
    """A tiny run writes latest.md/.png/.json; every approach's report answer agrees with vcmt's."""
    results = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable, "-m", "vcmt_lab.bench",
            "--rows", "20000", "--batch", "2000", "--small-batch", "500", "--repeat", "1",
            "--work", str(tmp_path / "work"), "--results", str(results),
        ],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert proc.stdout.strip().splitlines()[-2].startswith("bench: N=20k B=2k R=1 keys spread")
    assert proc.stdout.strip().splitlines()[-1].startswith("bench: load average ")

    markdown = (results / "latest.md").read_text()
    assert "## Goals" in markdown and "## Correctness" in markdown and "## Where the time goes" in markdown
    assert "| (D) CoalescingMergeTree" in proc.stdout, "the one table names every anchor"
    for key in ("spread", "article", "hot"):
        assert f"| {key}: " in proc.stdout, f"the distributions table has a row for {key} keys"
        assert f"## Every approach, {key} keys" in markdown
    png = results / "latest.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in results.iterdir()) == ["latest.json", "latest.md", "latest.png"], "one copy"

    report = json.loads((results / "latest.json").read_text())
    batches = report["batches"]
    assert batches["spread/big"]["partitions"] == batches["hot/big"]["partitions"] == 20
    assert batches["article/big"]["partitions"] == 2, "keys 10 apart at N/B = 10: partitions 0 and 10 of id % 20"
    assert batches["spread/big"]["distinct_keys"] == batches["article/big"]["distinct_keys"], "one pool, placed apart"
    assert batches["hot/big"]["distinct_keys"] < batches["spread/big"]["distinct_keys"] / 3
    checks = {c["name"]: c for c in report["checks"]}
    assert all(c["ok"] for c in report["checks"])
    answers = report["report_results"]["spread"]
    # (D) reads partial updates: its answer equals vcmt's `coalesce` model's, not the full-row one.
    assert answers["report_coalescing"] == answers["report_vcmt_coalesce"] != answers["report_vcmt"]
    assert checks["report query, spread: report_coalescing == report_vcmt_coalesce"]["ok"]
    for key in ("spread", "article", "hot"):
        answers = report["report_results"][key]
        assert answers["report_final"] == answers["report_group_by"] == answers["report_vcmt"] == answers["report_rmt"]
        assert sum(n for _, n, _ in answers["report_final"]) == 20000
        # The floors: the plain read of the batch's keys, and the write of two rows per key, timed beside.
        for size in ("big", "small"):
            assert checks[f"the {key} {size} batch's key-rows read finds one stored row per distinct key"]["ok"]
            assert checks[f"the {key} {size} batch's floor write writes two rows per distinct key"]["ok"]
            assert report["ratios"][key][f"{size}_floor"]["wall"] > 0
            # The read floor again on one thread, as a view's query runs: never judged.
            assert report["steps"][key][f"{size}_key_rows_1"]["wall_ms"] > 0
            assert report["ratios"][key][f"{size}_floor_one_thread"]["goal"] == "–"
    # The replayed loader INSERT is found in the query logs by the bench's tag, not by the captured load's own
    # `log_comment`: its memory and, per distribution and batch, its views (the transform among them).
    for key in ("spread", "article", "hot"):
        assert report["steps"][key]["big_vcmt"]["engine_memory"] > 0
    assert markdown.count("| view `bench_vcmt__transform` |") == 6, "a profile of each distribution's two loads"
    ratios = report["ratios"]["spread"]
    assert 0 < ratios["bookkeeping"]["wall"] < 1
    assert ratios["big_floor"]["goal"] == "≤ 1.2" and report["ratios"]["article"]["big_floor"]["goal"] == "–"
    assert ratios["small_key_rows"]["wall"] > 0
    assert ratios["small_pair_rows"]["wall"] > 0
