"""The markdown report (bench/results/latest.md) and its machine-readable twin."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vcmt_tools.bench.goals import Ratio
from vcmt_tools.bench.machine import Machine
from vcmt_tools.bench.scenario import Outcome, median_views
from vcmt_tools.bench.steps import Step


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


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"


def _count(n: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size and n % (size // 10) == 0:
            return f"{n / size:g}{unit}"
    return f"{n:,}"


def summary_line(out: Outcome, ratios: list[Ratio]) -> str:
    s = out.shape
    parts = [f"N={_count(s.rows)} B={_count(s.batch)} R={out.repeat}"]
    for r in ratios:
        if r.goal is not None:
            parts.append(f"{r.key} {_ratio(r.wall)} ({r.goal_text}) {r.verdict}")
    failed = out.checks.failed
    parts.append("checks PASS" if not failed else f"checks FAIL ({len(failed)})")
    return "bench: " + " | ".join(parts)


def goals_table(ratios: list[Ratio]) -> list[str]:
    return [
        "| ratio | wall | CPU | goal | result | on CPU |",
        "|---|--:|--:|--:|:-:|:-:|",
        *[f"| {r.label} | {_ratio(r.wall)} | {_ratio(r.cpu)} | {r.goal_text} | {r.verdict} | {r.cpu_verdict} |"
          for r in ratios],
    ]  # fmt: skip


def _step_rows(steps: list[Step]) -> list[str]:
    rows = []
    for s in steps:
        low, high = s.spread
        rows.append(
            f"| {s.label} | {_ms(s.wall_ms)} | {_ms(low)}–{_ms(high)} | {_ms(s.cpu_ms)} | {_mib(s.engine_memory)} |"
        )
    return rows


GROUPS = (
    ("big", "batch of B"),
    ("small", "small batch, random keys"),
    ("clustered", "small batch, consecutive keys"),
    ("report", "report query"),
    ("optimized", "report query, optimized"),
)

_STEP_HEAD = [
    "| step | median ms | min–max ms | CPU ms | engine peak memory |",
    "|---|--:|--:|--:|--:|",
]


def render(out: Outcome, ratios: list[Ratio], ctx: Context) -> str:
    s, m = out.shape, ctx.machine
    lines: list[str] = [
        f"# vcmt bench — {ctx.started:%Y-%m-%d %H:%M}",
        "",
        f"`{summary_line(out, ratios)}`",
        "",
        "## Goals",
        "",
        "Ratios of medians. CPU = this process's CPU time (chDB runs in-process), which stays comparable "
        "when other jobs compete for the cores; goals are judged on wall time.",
        "",
        *goals_table(ratios),
    ]
    if (s.rows, s.batch) != (10_000_000, 1_000_000):
        lines += ["", f"The UPSERT/INSERT goal is defined at N=10M, B=1M; this run used N={s.rows:,}, B={s.batch:,}."]
    lines += [
        "",
        "## Machine and shape",
        "",
        f"- CPU: {m.cpu}, {m.logical_cores} logical cores ({m.physical_cores or '?'} physical); "
        f"RAM {_gib(m.ram_bytes)}; {m.os}; Python {m.python}",
        f"- engine: chDB {m.packages['chdb']} (chdb-core {m.packages['chdb-core']}) = ClickHouse {ctx.clickhouse}; "
        f"clickhouse-connect {m.packages['clickhouse-connect']}; dbt-core {m.packages['dbt-core']}, "
        f"dbt-clickhouse {m.packages['dbt-clickhouse']}",
        f"- load average {ctx.load[0]:.1f} at start, {ctx.load[1]:.1f} at end; other processes used "
        f"{ctx.load[2]:.0%} of all cores during the run (shared host: wall times stretch with it)",
        f"- N = {s.rows:,} base rows, B = {s.batch:,} events per batch, small batch = {s.small_batch:,}, "
        f"R = {out.repeat} samples per step (median reported); total run {ctx.total_s:,.0f} s "
        f"(setup {out.setup_ms / 1000:,.0f} s)",
    ]
    lines.append(
        f"- keys of the batch of B and the small batch: `(hash % {s.pool:,}) * {s.step}` (the article's "
        "`(rand() % 1E6) * (N / 1E6)` shape); clustered small batch: consecutive keys from N/2. All events are "
        "upserts of existing keys with distinct, newer versions."
    )
    for size, facts in out.batches.items():
        lines.append(
            f"  - {size}: {facts.events:,} events on {facts.distinct_keys:,} distinct keys "
            f"({facts.distinct_keys / facts.events:.0%}, {facts.keys}) in {facts.partitions} of 20 partitions"
        )
    lines += [
        "",
        "How it is measured, and why two plain INSERTs: [bench/README.md](../README.md).",
        "",
        "## Times",
        "",
        *_STEP_HEAD,
    ]
    for group, title in GROUPS:
        steps = out.steps.in_group(group)
        if steps:
            lines.append(f"| **{title}** | | | | |")
            lines += _step_rows(steps)
    lines += _dbt_section(out)
    lines += _views_section(out)
    lines += [
        "",
        "## Correctness",
        "",
        "| check | result | detail |",
        "|---|:-:|---|",
    ]
    for c in out.checks.items:
        verdict = "PASS" if c.ok else ("FAIL" if c.guard else "no")
        lines.append(f"| {c.name} | {verdict} | {c.detail} |")
    if out.report_results:
        first = next(iter(out.report_results.values()))
        lines += [
            "",
            "Report query result (Department, live rows, sum(metric1)): "
            + ", ".join(f"{d} {n:,} {t:,}" for d, n, t in first),
        ]
    lines += ["", "## SQL", ""]
    for title, text in out.sql.items():
        lines += ["<details>", f"<summary>{title}</summary>", "", "```sql", text.strip(), "```", "", "</details>", ""]
    return "\n".join(lines)


def _views_section(out: Outcome) -> list[str]:
    lines = []
    for size, title in (("big", "batch of B"), ("small", "small batch, random keys")):
        views = median_views(out.loader_views.get(size, []))
        if views:
            lines += [
                "",
                f"Inside the loader's INSERT, {title} (system.query_views_log, medians; a view's time "
                "includes the views on its own target):",
                "",
                "| view | ms | peak memory |",
                "|---|--:|--:|",
            ]
            lines += [f"| `{name}` | {_ms(ms)} | {_mib(mem)} |" for name, ms, mem in views]
    return ["", "## Where the UPSERT's time goes", *lines] if lines else []


_STATEMENT_KINDS = (
    ("the loader's stage INSERT", re.compile(r"insert into \S+__stage", re.I)),
    ("batch stats (count, deletes, distinct keys)", re.compile(r"countIf\(_vcmt_sign", re.I)),
    ("applied totals, before and after", re.compile(r"from \S+__applied", re.I)),
    ("schema, projection and view-query comparisons", re.compile(r"system\.(columns|projections)|formatQuery", re.I)),
    ("existence checks of the model's objects (system.tables)", re.compile(r"from system\.tables", re.I)),
    ("ALTER ... MODIFY SETTING (projection mode, every run)", re.compile(r"modify setting", re.I)),
    ("run log INSERT", re.compile(r"insert into \S+__loads", re.I)),
    ("dbt's own catalog queries", re.compile(r"system\.databases|mv_sources", re.I)),
)


def statement_kinds(statements: list[tuple[str, float]]) -> list[tuple[str, int, float]]:
    """The last `dbt run`'s statements grouped by what they do: (kind, count, engine ms)."""
    found: dict[str, list[float]] = {}
    for sql_text, ms in statements:
        kind = next((k for k, pattern in _STATEMENT_KINDS if pattern.search(sql_text)), "other")
        found.setdefault(kind, []).append(ms)
    return [(k, len(v), sum(v)) for k, v in found.items()]


def _dbt_section(out: Outcome) -> list[str]:
    if not out.dbt_runs:
        return []

    def med(values: list[float]) -> str:
        return _ms(statistics.median(values))

    runs = out.dbt_runs
    return [
        "",
        "## Whole `dbt run` at B: where the time goes (medians)",
        "",
        "| part | ms |",
        "|---|--:|",
        f"| whole `dbt run` (in-process `dbtRunner`) | {med([r.wall_ms for r in runs])} |",
        f"| the loader's stage INSERT (engine time) | {med([r.loader_insert_ms for r in runs])} |",
        f"| {runs[0].statements - 1} other statements: batch stats, applied totals, relation checks, "
        f"run log (engine time) | {med([r.other_sql_ms for r in runs])} |",
        f"| dbt itself: start-up, parse, compile, Python between statements | {med([r.overhead_ms for r in runs])} |",
        "",
        "Statements of the last run, by kind:",
        "",
        "| kind | statements | engine ms |",
        "|---|--:|--:|",
        *[f"| {kind} | {n} | {_ms(ms)} |" for kind, n, ms in statement_kinds(out.dbt_statements)],
    ]


def as_json(out: Outcome, ratios: list[Ratio], ctx: Context) -> dict[str, Any]:
    return {
        "started": ctx.started.isoformat(timespec="seconds"),
        "rows": out.shape.rows,
        "batch": out.shape.batch,
        "small_batch": out.shape.small_batch,
        "repeat": out.repeat,
        "clickhouse": ctx.clickhouse,
        "steps": {
            s.key: {
                "label": s.label,
                "group": s.group,
                "wall_ms": s.wall_ms,
                "cpu_ms": s.cpu_ms,
                "samples_ms": [t.wall_ms for t in s.timings],
                "engine_memory": s.engine_memory,
            }
            for s in out.steps.items.values()
        },  # fmt: skip
        "ratios": {
            r.key: {
                "wall": r.wall,
                "cpu": r.cpu,
                "goal": r.goal_text,
                "verdict": r.verdict,
                "cpu_verdict": r.cpu_verdict,
            }
            for r in ratios
        },
        "checks": [{"name": c.name, "ok": c.ok, "guard": c.guard, "detail": c.detail} for c in out.checks.items],
        "report_results": out.report_results,
    }
