"""`make bench-staging`'s report: the rates, the ratio and the warm-up table come from the runs it is given.

The staging runs themselves need Spark and chDB for minutes; `report` is a pure function of their records,
so its arithmetic is checked here on made-up runs (no Spark, no timing), and the per-size subprocess's
JSON on a stand-in for that subprocess.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import asdict
from pathlib import Path

from vcmt_lab.bench import staging
from vcmt_lab.bench.staging import WARMUP, WARMUP_GROUPS, BatchRun, report


def run(staging_s: float, jit_s: float = 0.0, clickhouse_s: float = 1.0, lines: int = 1000, files: int = 2) -> BatchRun:
    return BatchRun(lines=lines, raw_bytes=2**20, staging_s=staging_s, models_s=staging_s - 0.25, cpu_s=2 * staging_s,
                    jit_s=jit_s, clickhouse_s=clickhouse_s, records_read=lines, bytes_read=2**20, files_read=files,
                    folders_read=files, jobs=2, jvm_heap_mb=0.0, rss_mb=0.0)  # fmt: skip


def rows(text: str, first_cell: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith(f"| {first_cell}")]  # fmt: skip


def test_ratio_is_the_apply_time_over_the_staging_time_of_the_measured_runs_only() -> None:
    warm = [run(30.0, 9.0, files=40)] + [run(5.0, 2.0, files=40)] * 9
    measured = [run(2.0, 0.5, clickhouse_s=2.2), run(2.4, 0.7, clickhouse_s=2.6)]
    text = report({50000: (warm, measured, [run(1.0), run(0.5)])}, {})
    (row,) = rows(text, "50,000")
    # staging 2.2 s and apply 2.4 s per batch on average: the warm-up's 30 s and 5 s do not count.
    assert row[2] == "2.2 (4.4)" and row[3] == "0.6" and row[5] == "2.4" and row[7] == "1.09", row
    assert row[9] == "2" and row[10] == "2", "files and batch folders of the measured runs"


def test_fixed_cost_rows_compare_a_run_with_nothing_new_with_a_one_line_batch() -> None:
    text = report({5000: ([run(9.0)], [run(2.0)], [run(4.25, lines=2), run(1.25, lines=0)])}, {})
    (one_line,) = rows(text, "after 5,000-event batches: one more batch")
    (idle,) = rows(text, "after 5,000-event batches: then a run with nothing new")
    # models_s is staging_s - 0.25: 4.0 s and 1.0 s; dbt itself 0.25 s each.
    assert one_line[1:4] == ["4.2 (8.5)", "4.0", "0.2"] and one_line[-1] == "1.00", one_line
    assert idle[1:4] == ["1.2 (2.5)", "1.0", "0.2"] and idle[-1] == "0.25", idle


def test_warmup_table_groups_the_warmup_batches_in_order() -> None:
    assert WARMUP_GROUPS[0] == (1, 1), "the first batch (Spark's start) is a group of its own"
    warm = [run(float(100 - i), jit_s=float(i)) for i in range(30)]  # batch k staged in 101 - k s
    text = report({5000: (warm, [run(1.0)], [run(1.0), run(0.5)])}, {})
    (row,) = rows(text, "30 batches of 5,000")
    expected = []
    for lo, hi in WARMUP_GROUPS:
        group = list(range(lo, (hi or 30) + 1))
        expected.append(
            f"{sum(101 - k for k in group) / len(group):.1f} ({sum(k - 1 for k in group) / len(group):.1f})"
        )
    assert row[1:] == expected


def test_a_short_warmup_leaves_the_later_groups_empty() -> None:
    text = report({5000: ([run(9.0), run(7.0), run(5.0)], [run(1.0)], [run(1.0), run(0.5)])}, {})
    (row,) = rows(text, "3 batches of 5,000")
    assert row[1:3] == ["9.0 (0.0)", "6.0 (0.0)"] and all(cell == "" for cell in row[3:]), row


def test_warmup_groups_cover_every_batch_once_and_end_with_the_default_warmup() -> None:
    assert [lo for lo, _ in WARMUP_GROUPS] == [1, 2, 9, 25] and WARMUP == 25
    for (_, hi), (lo, _) in zip(WARMUP_GROUPS, WARMUP_GROUPS[1:], strict=False):
        assert lo == hi + 1, "groups follow each other without a gap or an overlap"
    assert WARMUP_GROUPS[-1][1] is None, "the last group runs to the last warm-up batch"


def test_each_size_runs_in_a_subprocess_whose_json_comes_back_whole(monkeypatch) -> None:
    """`_measure` rebuilds (warm-up, measured, fixed) from the subprocess's last line, `fixed` empty for the
    memory line; `main` puts the memory line's measured runs (not its warm-up) in the memory table."""
    warm, measured, fixed = [run(9.0, 3.0)], [run(2.0, 0.5), run(3.0, 0.7)], [run(1.0), run(0.5)]
    calls = []

    def fake_run(argv, **kwargs):
        calls.append(argv)
        landed = int(argv[argv.index("--landed") + 1])
        line = json.dumps({"warmup": [asdict(r) for r in warm], "runs": [asdict(r) for r in measured],
                           "fixed": [] if landed else [asdict(r) for r in fixed]})  # fmt: skip
        return subprocess.CompletedProcess(argv, 0, stdout=f"progress\n{line}\n", stderr="")

    monkeypatch.setattr(staging.subprocess, "run", fake_run)
    args = argparse.Namespace(batches=2, seed=1, work=Path("w"), warmup=7)
    assert staging._measure(args, 5000) == (warm, measured, fixed)
    assert staging._measure(args, 100, 10) == (warm, measured, [])
    assert calls[0][calls[0].index("--warmup") + 1] == "7"

    printed = []
    monkeypatch.setattr("builtins.print", lambda *a, **k: printed.append(" ".join(map(str, a))))
    assert staging.main(["--sizes", "5000", "--landed", "10", "--batches", "2"]) == 0
    (memory_row,) = rows(printed[-1], "10 |")
    assert memory_row[1] == "2.5 (5.0)", "the memory line's two measured runs, not its warm-up run (9 s)"
