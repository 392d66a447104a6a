"""The markdown report (lab/bench/results/<name>.md), its JSON twin, the printed table and summary line."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass
from datetime import datetime

from vcmt_lab.bench.anchors import RMT
from vcmt_lab.bench.goals import Ratio
from vcmt_lab.bench.scenario import Outcome
from vcmt_lab.bench.sql import Distribution
from vcmt_lab.bench.steps import Steps, ratio
from vcmt_lab.bench.tables import MODEL, PARTIAL


@dataclass(frozen=True)
class Context:
    started: datetime
    machine: str
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


def _table(head: str, rows: list[str]) -> list[str]:
    return [f"| {head} |", "|---|" + "--:|" * head.count("|"), *rows]


def summary_line(out: Outcome, ratios: dict[str, list[Ratio]]) -> str:
    s = out.shape
    parts = [f"N={_count(s.rows)} B={_count(s.batch)} R={out.repeat} keys {out.headline.key}"]
    parts += [f"{r.key} {_ratio(r.wall)} ({r.goal_text}) {r.verdict}" for r in ratios[out.headline.key]
              if r.goal is not None]  # fmt: skip
    parts.append("checks PASS" if not out.failed else f"checks FAIL ({len(out.failed)})")
    return "bench: " + " | ".join(parts)


def load_line(ctx: Context) -> str:
    """How busy the machine was: the numbers of a run are read with it."""
    return (f"bench: load average {ctx.load[0]:.1f} at start, {ctx.load[1]:.1f} at end; other processes used "
            f"{ctx.load[2]:.0%} of all cores")  # fmt: skip


def distributions_table(out: Outcome, ratios: dict[str, list[Ratio]]) -> list[str]:
    """One row per key distribution: its batches, vcmt's write against its two floors (read and write,
    each timed in the same run), the plain INSERT, and the break-even against (A), medians in wall ms."""
    s = out.shape
    rows = []
    for d in s.distributions:
        steps, found = out.of(d), {r.key: r for r in ratios[d.key]}

        def wall(key: str, steps: Steps = steps) -> str:
            st = steps.get(key)
            return _ms(st.wall_ms) if st else "–"

        def floor(size: str, found: dict[str, Ratio] = found) -> str:
            r = found.get(f"{size}_floor")
            return _ratio(r.wall) if r else "–"

        facts = [out.batches.get((d.key, size)) for size in ("big", "small")]
        keys = " / ".join(f"{f[1]:,} in {f[2]}" if f else "–" for f in facts)
        even = found.get(f"break_even_big_{RMT}")
        rows.append(
            f"| {d.key}: {d.label} | {keys} | {wall(f'big_{MODEL.key}')} | {wall('big_key_rows')} + "
            f"{wall('big_pair_rows')} | **{floor('big')}** | {wall('big_insert')} | {wall(f'small_{MODEL.key}')} | "
            f"{wall('small_key_rows')} + {wall('small_pair_rows')} | **{floor('small')}** | {wall('small_insert')} | "
            f"{_ratio(even.wall) if even else '–'} |"
        )
    head = (f"key distribution | distinct keys in partitions, {_count(s.batch)} / {_count(s.small_batch)} | vcmt write "
            f"{_count(s.batch)} | floor {_count(s.batch)}: read + write | vcmt / floor | plain INSERT "
            f"{_count(s.batch)} | vcmt write {_count(s.small_batch)} | floor {_count(s.small_batch)}: read + write | "
            f"vcmt / floor | plain INSERT {_count(s.small_batch)} | break-even vs (A) at "
            f"{_count(s.batch)}")  # fmt: skip
    return _table(head, rows)


def shapes_table(out: Outcome) -> list[str]:
    """With `--shapes`: per distribution, vcmt's write and each other shape of the load, in wall ms, against the
    loader as dbt ran it and against the floors (read + write) of the same run; empty without."""
    if not out.variants:
        return []
    s = out.shape
    rows = []
    for d in s.distributions:
        steps = out.of(d)
        for key, label in ((MODEL.key, "the loader as dbt ran it"), *((v.key, v.label) for v in out.variants)):
            cells = []
            for size in ("big", "small"):
                st, loader = steps.get(f"{size}_{key}"), steps.get(f"{size}_{MODEL.key}")
                floor = [steps.get(f"{size}_{k}") for k in ("key_rows", "pair_rows")]
                total = sum(f.wall_ms for f in floor) if all(floor) else float("nan")
                cells += [_ms(st.wall_ms) if st else "–", _ratio(ratio(st, loader)),
                          _ratio(st.wall_ms / total) if st and total else "–"]  # fmt: skip
            rows.append(f"| {d.key} | {label} | " + " | ".join(cells) + " |")
    head = (f"keys | shape | write {_count(s.batch)} | / loader | / floor | write {_count(s.small_batch)} | / loader | "
            "/ floor")  # fmt: skip
    return _table(head, rows)


def main_table(out: Outcome, ratios: dict[str, list[Ratio]], distribution: Distribution | None = None) -> list[str]:
    """One row per approach: write per batch, its report query after the batch of B, engine memory
    of the write at B, and the break-even against vcmt (goal 1), medians in wall ms, on one key
    distribution (the headline by default)."""
    d = distribution or out.headline
    s, steps, be = out.shape, out.of(d), {r.key: r for r in ratios[d.key]}

    def wall(key: str) -> str:
        st = steps.get(key)
        return _ms(st.wall_ms) if st else "–"

    def row(name: str, key: str, report: str, anchor: str | None = None) -> str:
        st = steps.get(f"big_{key}")
        even = [be.get(f"break_even_{size}_{anchor}") for size in ("big", "small")] if anchor else [None, None]
        return (f"| {name} | {wall(f'big_{key}')} | {wall(f'small_{key}')} | {report} | "
                f"{_mib(st.engine_memory if st else None)} | "
                + " | ".join(_ratio(r.wall) if r else "–" for r in even) + " |")  # fmt: skip

    rows = [
        row("plain INSERT of the same events", "insert", "–"),
        row("**vcmt_upsert** (replace): the loader as dbt ran it", MODEL.key,
            f"projection {wall(f'report_{MODEL.key}')} (FINAL {wall('report_final')}, GROUP BY "
            f"{wall('report_group_by')})"),
        *([row("**vcmt_upsert** (replace): the whole `dbt run`", "dbt", "–")] if d is out.headline else []),
        *[row(a.label, a.key, wall(f"report_{a.key}"), a.key) for a in out.anchors(d) if a.model is MODEL],
    ]  # fmt: skip
    if PARTIAL in out.models(d):
        rows += [
            row("**vcmt_upsert** (`coalesce` on the data columns; partial updates)", PARTIAL.key,
                f"projection {wall(f'report_{PARTIAL.key}')}"),
            *[row(a.label, a.key, wall(f"report_{a.key}"), a.key) for a in out.anchors(d) if a.model is PARTIAL],
        ]  # fmt: skip
    head = (f"approach | write {_count(s.batch)} events (ms) | write {_count(s.small_batch)} events (ms) | "
            f"report query after the {_count(s.batch)} batch (ms) | engine peak memory, write {_count(s.batch)} | "
            f"break-even at {_count(s.batch)} | break-even at {_count(s.small_batch)}")  # fmt: skip
    return _table(head, rows)


def goals_table(ratios: list[Ratio]) -> list[str]:
    rows = [f"| {r.label} | {_ratio(r.wall)} | {_ratio(r.cpu)} | {r.goal_text} | {r.verdict} |" for r in ratios]
    return _table("ratio (issue 12 goal number) | wall | CPU | goal | result", rows)


def render(out: Outcome, ratios: dict[str, list[Ratio]], ctx: Context) -> str:
    s = out.shape
    head = out.headline
    lines = [
        f"# vcmt bench — {ctx.started:%Y-%m-%d %H:%M}",
        "",
        f"`{summary_line(out, ratios)}`",
        "",
        "How it is measured: [bench/README.md](../README.md). Medians of R samples, wall ms. Break-even: report "
        "queries per batch from which vcmt's write + reads cost less than the anchor's (0: vcmt's write is "
        "already cheaper). Floors: a plain read of the batch keys' stored rows, and a write of a cancel and a "
        "state row per key with no lookup, each timed in the same run.",
        "",
        "## Key distributions",
        "",
        *distributions_table(out, ratios),
    ]
    if out.variants:
        lines += ["", "## Shapes of the load (`--shapes`)", "", "Each shape loads the same batch into the same "
                  "restored table, interleaved with the loader; wall ms, CPU in the JSON.", "",
                  *shapes_table(out)]  # fmt: skip
    for d in out.shape.distributions:
        lines += ["", f"## Every approach, {d.key} keys{' (the goals are judged here)' if d is head else ''}", "",
                  *main_table(out, ratios, d)]  # fmt: skip
    lines += [
        "",
        f"## Goals ({head.key} keys)",
        "",
        "CPU is this process's CPU time (chDB runs in-process), comparable when other jobs compete for the "
        "cores; goals are judged on wall time.",
        "",
        *goals_table(ratios[head.key]),
    ]
    for d in out.shape.distributions[1:]:
        lines += [
            "",
            f"Ratios on {d.key} keys:",
            "",
            *goals_table([r for r in ratios[d.key] if not math.isnan(r.wall)]),
        ]
    lines += [
        *_where_time_goes(out),
        "",
        "## Machine and shape",
        "",
        f"- {ctx.machine}; ClickHouse {ctx.clickhouse}",
        f"- {load_line(ctx).removeprefix('bench: ')} during the run",
        f"- N = {s.rows:,} base rows, B = {s.batch:,}, small batch = {s.small_batch:,}, R = {out.repeat}; "
        f"total {ctx.total_s:,.0f} s (setup {out.setup_ms / 1000:,.0f} s)",
        *[
            f"- {d} {size} batch: {e:,} events on {k:,} distinct keys in {p} partitions"
            for (d, size), (e, k, p) in out.batches.items()
        ],  # fmt: skip
        "",
        "## Correctness",
        "",
        *_table(
            "check | result | detail", [f"| {c.name} | {'PASS' if c.ok else 'FAIL'} | {c.detail} |" for c in out.checks]
        ),  # fmt: skip
    ]
    for key, answers in out.answers.items():
        lines += ["", f"Report query (Department, live rows, sum(metric1)), `replace`, after the {key} batch: "
                  + ", ".join(f"{d} {n:,} {t:,}" for d, n, t in answers[f"report_{MODEL.key}"])]  # fmt: skip
    lines += ["", "## SQL", ""]
    for title, text in out.sql.items():
        lines += ["<details>", f"<summary>{title}</summary>", "", "```sql", text.strip(), "```", "", "</details>", ""]
    return "\n".join(lines)


def _where_time_goes(out: Outcome) -> list[str]:
    """Goals 2 and 6: the whole `dbt run` split by the engine's query_log; the loader INSERT by view
    and by processor."""
    lines = ["", f"## Where the time goes at B (goals 2 and 6; the whole `dbt run` on {out.headline.key} keys)"]
    if out.dbt_runs:
        runs = out.dbt_runs

        def med(part: str) -> str:
            return _ms(statistics.median(getattr(r, part) for r in runs))

        overhead = statistics.median(r.wall_ms - r.loader_ms - r.other_sql_ms for r in runs)
        lines += ["", *_table("whole `dbt run` at B (medians) | ms", [
            f"| whole `dbt run` (in-process) | {med('wall_ms')} |",
            f"| the loader's stage INSERT (engine time) | {med('loader_ms')} |",
            f"| — of it, the applied-totals view | {med('applied_view_ms')} |",
            f"| {runs[0].statements - 1} other statements: batch stats, applied totals, watermark, object checks, "
            f"run log | {med('other_sql_ms')} |",
            f"| dbt itself: start-up, parse, compile, Python between statements | {_ms(overhead)} |",
        ])]  # fmt: skip
    if out.bookkeeping:
        lines += [
            "",
            "The slowest statements of that `dbt run` besides the loader INSERT:",
            "",
            *_table("statement | ms", [f"| `{q}` | {_ms(ms)} |" for ms, q in out.bookkeeping]),
        ]
    for (key, size), (views, processors) in out.profiles.items():
        lines += ["", f"Inside the loader's INSERT, {key} {size} batch, one more run (query_views_log: a view's time "
                  "includes the views on its own target; processors_profile_log: work summed over threads, so "
                  "it can exceed the wall time):", "",
                  *_table("view or processor | ms | peak memory or rows out",
                          [f"| view `{n}` | {_ms(ms)} | {_mib(mem)} |" for n, ms, mem in views]
                          + [f"| {n} | {_ms(ms)} | {rows:,} rows |" for n, ms, rows in processors])]  # fmt: skip
    return lines


def as_json(out: Outcome, ratios: dict[str, list[Ratio]], ctx: Context) -> str:
    """The numbers for tools, per key distribution; NaN (a ratio that could not be formed) becomes null."""
    steps = {d: {s.key: {"label": s.label, "group": s.group, "wall_ms": s.wall_ms, "cpu_ms": s.cpu_ms,
                         "samples_ms": [t.wall_ms for t in s.timings], "engine_memory": s.engine_memory}
                 for s in found.values()} for d, found in out.steps.items()}  # fmt: skip
    data = {"started": ctx.started.isoformat(timespec="seconds"), "rows": out.shape.rows, "batch": out.shape.batch,
            "small_batch": out.shape.small_batch, "repeat": out.repeat, "clickhouse": ctx.clickhouse,
            "load_average": {"start": ctx.load[0], "end": ctx.load[1], "others_cpu_share": ctx.load[2]},
            "headline": out.headline.key,
            "batches": {f"{d}/{size}": {"events": e, "distinct_keys": k, "partitions": p}
                        for (d, size), (e, k, p) in out.batches.items()},
            "steps": steps,
            "ratios": {d: {r.key: {"wall": r.wall, "cpu": r.cpu, "goal": r.goal_text, "verdict": r.verdict}
                           for r in found} for d, found in ratios.items()},
            "checks": [asdict(c) for c in out.checks], "report_results": out.answers}  # fmt: skip
    return json.dumps(data, indent=2).replace("NaN", "null").replace("-Infinity", "null").replace("Infinity", "null")
