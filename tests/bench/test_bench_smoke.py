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
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert proc.stdout.strip().splitlines()[-1].startswith("bench: N=20k B=2k R=1")

    markdown = (results / "latest.md").read_text()
    assert "## Goals" in markdown and "## Correctness" in markdown and "## Where the time goes" in markdown
    assert "| (D) CoalescingMergeTree" in proc.stdout, "the one table names every anchor"
    png = results / "latest.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in results.iterdir()) == ["latest.json", "latest.md", "latest.png"], "one copy"

    report = json.loads((results / "latest.json").read_text())
    answers = report["report_results"]
    assert answers["report_final"] == answers["report_group_by"] == answers["report_vcmt"] == answers["report_rmt"]
    assert sum(n for _, n, _ in answers["report_final"]) == 20000
    # (D) reads partial updates: its answer equals vcmt's `coalesce` model's, not the full-row one.
    assert answers["report_coalescing"] == answers["report_vcmt_coalesce"] != answers["report_vcmt"]
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["report query: report_coalescing == report_vcmt_coalesce"]["ok"]
    assert all(c["ok"] for c in report["checks"])
    assert 0 < report["ratios"]["bookkeeping"]["wall"] < 1
    # Goal 3's floor: the plain read of the small batch's keys, timed beside (A)'s INSERT.
    assert checks["the small batch's key-rows read finds one stored row per distinct key"]["ok"]
    assert report["ratios"]["small_key_rows"]["wall"] > 0
    assert report["ratios"]["small_pair_rows"]["wall"] > 0
