"""The markdown report (bench/results/latest.md), its JSON twin and the summary line."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from vcmt_tools.bench.goals import Ratio
from vcmt_tools.bench.machine import Machine
from vcmt_tools.bench.scenario import Outcome, median_views

GROUPS = (
    ("big", "batch of B"),
    ("small", "small batch, random keys"),
    ("clustered", "small batch, consecutive keys"),
    ("report", "report query"),
    ("optimized", "report query, optimized"),
)


@dataclass(frozen=True)
class Context:
    started: datetime
    machine: Machine
    clickhouse: str
    load: tuple[float, float, float]
    total_s: float


def _ms(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:,.0f}"


def _ratio(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.2f}"


def _mib(value: int | None) -> str:
    return "–" if value is None else f"{value / 2**20:,.0f} MiB"


def _count(n: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size and n % (size // 10) == 0:
            return f"{n / size:g}{unit}"
    return f"{n:,}"


def summary_line(out: Outcome, ratios: list[Ratio]) -> str:
    s = out.shape
    parts = [f"N={_count(s.rows)} B={_count(s.batch)} R={out.repeat}"]
    parts += [f"{r.key} {_ratio(r.wall)} ({r.goal_text}) {r.verdict}" for r in ratios if r.goal is not None]
    failed = out.checks.failed
    parts.append("checks PASS" if not failed else f"checks FAIL ({len(failed)})")
    return "bench: " + " | ".join(parts)


def goals_table(ratios: list[Ratio]) -> list[str]:
    rows = [f"| {r.label} | {_ratio(r.wall)} | {_ratio(r.cpu)} | {r.goal_text} | {r.verdict} |" for r in ratios]
    return ["| ratio | wall | CPU | goal | result |", "|---|--:|--:|--:|:-:|", *rows]


def _table(head: str, rows: list[str]) -> list[str]:
    return ["", f"| {head} |", "|---|" + "--:|" * head.count("|"), *rows]


def render(out: Outcome, ratios: list[Ratio], ctx: Context) -> str:
    s, m = out.shape, ctx.machine
    lines = [
        f"# vcmt bench — {ctx.started:%Y-%m-%d %H:%M}",
        "",
        f"`{summary_line(out, ratios)}`",
        "",
        "How it is measured: [bench/README.md](../README.md). Ratios of medians; CPU is this process's CPU "
        "time (chDB runs in-process), comparable when other jobs compete for the cores. Goals are judged on "
        "wall time.",
        "",
        "## Goals",
        "",
        *goals_table(ratios),
        *(
            []
            if (s.rows, s.batch) == (10_000_000, 1_000_000)
            else ["", f"The goals are set for N = 10M, B = 1M; this run used N = {s.rows:,}, B = {s.batch:,}."]
        ),
        "",
        "## Machine and shape",
        "",
        f"- {m.cpu}, {m.logical_cores} logical cores, RAM {m.ram_bytes / 2**30:.1f} GiB; {m.os}; "
        f"Python {m.python}; ClickHouse {ctx.clickhouse}; " + ", ".join(f"{p} {v}" for p, v in m.packages.items()),
        f"- load average {ctx.load[0]:.1f} at start, {ctx.load[1]:.1f} at end; other processes used "
        f"{ctx.load[2]:.0%} of all cores during the run",
        f"- N = {s.rows:,} base rows, B = {s.batch:,}, small batch = {s.small_batch:,}, R = {out.repeat}; "
        f"total {ctx.total_s:,.0f} s (setup {out.setup_ms / 1000:,.0f} s)",
        *[
            f"- {size} batch: {f.events:,} events on {f.distinct_keys:,} distinct keys ({f.keys}) "
            f"in {f.partitions} partitions"
            for size, f in out.batches.items()
        ],
        "",
        "## Times",
    ]
    rows = []
    for group, title in GROUPS:
        steps = out.steps.in_group(group)
        rows += [f"| **{title}** | | | | |"] if steps else []
        for st in steps:
            low, high = st.spread
            rows.append(
                f"| {st.label} | {_ms(st.wall_ms)} | {_ms(low)}–{_ms(high)} | {_ms(st.cpu_ms)} | "
                f"{_mib(st.engine_memory)} |"
            )
    lines += _table("step | median ms | min–max ms | CPU ms | engine peak memory", rows)
    lines += _where_time_goes(out)
    lines += ["", "## Correctness"]
    lines += _table("check | result | detail", [
        f"| {c.name} | {'PASS' if c.ok else 'FAIL' if c.guard else 'no'} | {c.detail} |" for c in out.checks.items
    ])  # fmt: skip
    if out.report_results:
        first = next(iter(out.report_results.values()))
        lines += ["", "Report query (Department, live rows, sum(metric1)): "
                  + ", ".join(f"{d} {n:,} {t:,}" for d, n, t in first)]  # fmt: skip
    lines += ["", "## SQL", ""]
    for title, text in out.sql.items():
        lines += ["<details>", f"<summary>{title}</summary>", "", "```sql", text.strip(), "```", "", "</details>", ""]
    return "\n".join(lines)


def _where_time_goes(out: Outcome) -> list[str]:
    """The whole `dbt run` split by the engine's query_log, and the loader INSERT by view."""
    lines = ["", "## Where the UPSERT's time goes"]
    if out.dbt_runs:
        runs = out.dbt_runs

        def med(part: str) -> str:
            return _ms(statistics.median(getattr(r, part) for r in runs))

        lines += _table("whole `dbt run` at B (medians) | ms", [
            f"| whole `dbt run` (in-process) | {med('wall_ms')} |",
            f"| the loader's stage INSERT (engine time) | {med('loader_insert_ms')} |",
            f"| {runs[0].statements - 1} other statements: batch stats, applied totals, object checks, run log "
            f"| {med('other_sql_ms')} |",
            f"| dbt itself: start-up, parse, compile, Python between statements | {med('overhead_ms')} |",
        ])  # fmt: skip
    for size, title in GROUPS[:2]:
        views = median_views(out.loader_views.get(size, []))
        if views:
            lines += ["", f"Inside the loader's INSERT, {title} (query_views_log, medians; a view's time includes "
                      "the views on its own target):"]  # fmt: skip
            lines += _table("view | ms | peak memory", [f"| `{n}` | {_ms(ms)} | {_mib(mem)} |" for n, ms, mem in views])
    return lines


def as_json(out: Outcome, ratios: list[Ratio], ctx: Context) -> dict[str, Any]:
    steps = {
        s.key: {"label": s.label, "group": s.group, "wall_ms": s.wall_ms, "cpu_ms": s.cpu_ms,
                "samples_ms": [t.wall_ms for t in s.timings], "engine_memory": s.engine_memory}
        for s in out.steps.items.values()
    }  # fmt: skip
    return {
        "started": ctx.started.isoformat(timespec="seconds"),
        "rows": out.shape.rows,
        "batch": out.shape.batch,
        "small_batch": out.shape.small_batch,
        "repeat": out.repeat,
        "clickhouse": ctx.clickhouse,
        "steps": steps,
        "ratios": {r.key: {"wall": r.wall, "cpu": r.cpu, "goal": r.goal_text, "verdict": r.verdict} for r in ratios},
        "checks": [asdict(c) for c in out.checks.items],
        "report_results": out.report_results,
    }
