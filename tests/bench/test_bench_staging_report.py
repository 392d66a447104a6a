"""`make bench-staging`'s report: the rates, the ratio and the warm-up table come from the runs it is given.

The staging runs themselves need Spark and chDB for minutes; `report` is a pure function of their records,
so its arithmetic is checked here on made-up runs (no Spark, no timing).
"""

from __future__ import annotations

from vcmt_tools.bench.staging import WARMUP_GROUPS, BatchRun, report


def run(staging_s: float, jit_s: float = 0.0, clickhouse_s: float = 1.0, lines: int = 1000) -> BatchRun:
    return BatchRun(lines=lines, raw_bytes=2**20, staging_s=staging_s, models_s=staging_s - 0.25, cpu_s=2 * staging_s,
                    jit_s=jit_s, clickhouse_s=clickhouse_s, records_read=lines, bytes_read=2**20, jobs=2,
                    jvm_heap_mb=0.0, rss_mb=0.0)  # fmt: skip


def rows(text: str, first_cell: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith(f"| {first_cell}")]  # fmt: skip


def test_ratio_is_the_apply_time_over_the_staging_time_of_the_measured_runs_only() -> None:
    warm = [run(30.0, 9.0)] + [run(5.0, 2.0)] * 9
    measured = [run(2.0, 0.5, clickhouse_s=2.2), run(2.4, 0.7, clickhouse_s=2.6)]
    text = report({50000: (warm, measured, run(1.0))}, {})
    (row,) = rows(text, "50,000")
    # staging 2.2 s and apply 2.4 s per batch on average: the warm-up's 30 s and 5 s do not count.
    assert row[2] == "2.2 (4.4)" and row[3] == "0.6" and row[5] == "2.4" and row[7] == "1.09", row


def test_warmup_table_groups_the_warmup_batches_in_order() -> None:
    assert WARMUP_GROUPS[0] == (1, 1), "the first batch (Spark's start) is a group of its own"
    warm = [run(float(100 - i), jit_s=float(i)) for i in range(30)]  # batch k staged in 101 - k s
    text = report({5000: (warm, [run(1.0)], run(1.0))}, {})
    (row,) = rows(text, "30 batches of 5,000")
    expected = []
    for lo, hi in WARMUP_GROUPS:
        group = list(range(lo, (hi or 30) + 1))
        expected.append(f"{sum(101 - k for k in group) / len(group):.1f} ({sum(k - 1 for k in group) / len(group):.1f})")
    assert row[1:] == expected


def test_a_short_warmup_leaves_the_later_groups_empty() -> None:
    text = report({5000: ([run(9.0), run(7.0), run(5.0)], [run(1.0)], run(1.0))}, {})
    (row,) = rows(text, "3 batches of 5,000")
    assert row[1:3] == ["9.0 (0.0)", "6.0 (0.0)"] and all(cell == "" for cell in row[3:]), row
