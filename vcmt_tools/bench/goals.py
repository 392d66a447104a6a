"""The ratios the bench is judged by (docs/design.md#benchmark-goals) and their goals."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vcmt_tools.bench.anchors import ANCHORS
from vcmt_tools.bench.steps import Step, Steps, ratio


@dataclass(frozen=True)
class Ratio:
    key: str
    label: str
    wall: float
    cpu: float
    # (comparison, threshold) or None for ratios shown without a goal.
    goal: tuple[str, float] | None = None

    @property
    def goal_text(self) -> str:
        return "–" if self.goal is None else f"{self.goal[0]} {self.goal[1]:g}"

    @property
    def passed(self) -> bool | None:
        if self.goal is None or math.isnan(self.wall):
            return None
        op, threshold = self.goal
        return self.wall <= threshold if op == "≤" else self.wall >= threshold

    @property
    def verdict(self) -> str:
        return {None: "–", True: "PASS", False: "MISS"}[self.passed]


def _r(steps: Steps, key: str, label: str, num: str, den: str, goal: tuple[str, float] | None = None) -> Ratio:
    a, b = steps.get(num), steps.get(den)
    return Ratio(key, label, ratio(a, b), ratio(a, b, cpu=True), goal)


def _upsert_vs_insert(steps: Steps, key: str, label: str, upsert: str, prefix: str, goal: float) -> list[Ratio]:
    """The goal against the faster of the two plain INSERTs (so a PASS never rests on a slow
    baseline), then one information row per INSERT shape."""
    a = steps.get(upsert)
    inserts: list[Step] = [s for s in (steps.get(f"{prefix}_insert"), steps.get(f"{prefix}_insert_rows")) if s]
    if a is None or not inserts:
        return []
    fast = min(inserts, key=lambda s: s.wall_ms)
    fast_cpu = min(inserts, key=lambda s: s.cpu_ms)
    shape = "the article's" if fast.key.endswith("_insert") else "of the batch's rows"
    return [
        Ratio(key, f"{label} / the faster plain INSERT (wall: {shape})", ratio(a, fast), ratio(a, fast_cpu, cpu=True),
              ("≤", goal)),
        _r(steps, f"{key}_article", f"{label} / the article's plain INSERT", upsert, f"{prefix}_insert"),
        _r(steps, f"{key}_rows", f"{label} / plain INSERT of the batch's rows", upsert, f"{prefix}_insert_rows"),
    ]  # fmt: skip


def _break_even(steps: Steps, size: str, key: str, label: str) -> Ratio:
    """Report queries per batch from which vcmt's write + reads cost less than the anchor's:
    (vcmt write - anchor write) / (anchor report - vcmt's projection report). 0 when vcmt's write is
    already cheaper; inf when the anchor's report is not slower. The report times are those after the
    batch of B, also for the small batch."""
    def k(cpu: bool) -> float:
        get = (lambda s: s.cpu_ms) if cpu else (lambda s: s.wall_ms)
        parts = [steps.get(n) for n in (f"{size}_vcmt", f"{size}_{key}", f"report_{key}", "report_projection")]
        if any(p is None for p in parts):
            return float("nan")
        write, read = get(parts[0]) - get(parts[1]), get(parts[2]) - get(parts[3])
        return 0.0 if write <= 0 else (write / read if read > 0 else float("inf"))

    return Ratio(f"break_even_{size}_{key}", f"break-even vs {label}, {size} batch (report queries per batch)",
                 k(False), k(True), ("≤", 1.0))


def ratios(steps: Steps) -> list[Ratio]:
    found = _upsert_vs_insert(steps, "upsert_insert", "UPSERT at B (vcmt loader)", "big_vcmt", "big", 3.0)
    found.append(_r(steps, "dbt_insert", "whole `dbt run` / the article's plain INSERT at B", "big_dbt", "big_insert"))
    for a in ANCHORS:
        goal = ("≤", a.goal) if a.goal else None
        found.append(_r(steps, f"vcmt_{a.key}", f"vcmt / {a.label} at B", "big_vcmt", f"big_{a.key}", goal))
        found.append(_r(steps, f"{a.key}_insert", f"{a.label} / the article's plain INSERT at B", f"big_{a.key}",
                        "big_insert"))  # fmt: skip
    found += _upsert_vs_insert(steps, "small_upsert_insert", "small batch UPSERT, random keys", "small_vcmt", "small",
                               1.5)  # fmt: skip
    found += [_r(steps, f"small_vcmt_{a.key}", f"small batch vcmt / {a.label}, random keys", "small_vcmt",
                 f"small_{a.key}") for a in ANCHORS]  # fmt: skip
    found += [_break_even(steps, size, a.key, a.label) for a in ANCHORS if a.report for size in ("big", "small")]
    return found + [
        _r(steps, "clustered_upsert_insert", "small batch UPSERT, consecutive keys / plain INSERT of its rows",
           "clustered_vcmt", "clustered_insert_rows"),
        _r(steps, "final_projection", "FINAL / projection (how many times faster the projection is)",
           "report_final", "report_projection", ("≥", 20.0)),
        _r(steps, "group_by_projection", "GROUP BY / projection", "report_group_by", "report_projection"),
        _r(steps, "final_group_by", "FINAL / GROUP BY", "report_final", "report_group_by"),
        _r(steps, "optimized_final_projection", "FINAL / projection after OPTIMIZE FINAL", "optimized_final",
           "optimized_projection"),
    ]  # fmt: skip
