"""The ratios the bench is judged by (docs/design.md#benchmark-goals) and their goals."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vcmt_tools.bench.anchors import ANCHORS
from vcmt_tools.bench.steps import Steps, ratio


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
        if self.goal is None:
            return "–"
        op, threshold = self.goal
        return f"{op} {threshold:g}"

    @property
    def passed(self) -> bool | None:
        if self.goal is None or math.isnan(self.wall):
            return None
        op, threshold = self.goal
        return self.wall <= threshold if op == "≤" else self.wall >= threshold

    @property
    def verdict(self) -> str:
        return {None: "–", True: "PASS", False: "MISS"}[self.passed]

    @property
    def cpu_verdict(self) -> str:
        """The goal judged on CPU time instead (shown when the shared host makes wall time noisy)."""
        if self.goal is None or math.isnan(self.cpu):
            return "–"
        op, threshold = self.goal
        return "PASS" if (self.cpu <= threshold if op == "≤" else self.cpu >= threshold) else "MISS"


class _Builder:
    """Ratios of step medians; `upsert_vs_insert` judges an UPSERT against the faster plain INSERT."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    def r(self, key: str, label: str, num: str, den: str, goal: tuple[str, float] | None = None) -> Ratio:
        a, b = self.steps.get(num), self.steps.get(den)
        return Ratio(key, label, ratio(a, b), ratio(a, b, cpu=True), goal)

    def upsert_vs_insert(self, key: str, label: str, upsert: str, prefix: str, goal: float) -> list[Ratio]:
        """The goal row against the faster of the two plain INSERTs (so a PASS never rests on a slow
        baseline), then one information row per INSERT shape."""
        a = self.steps.get(upsert)
        inserts = [s for s in (self.steps.get(f"{prefix}_insert"), self.steps.get(f"{prefix}_insert_rows")) if s]
        if a is None or not inserts:
            return []
        fast_wall = min(inserts, key=lambda s: s.wall_ms)
        fast_cpu = min(inserts, key=lambda s: s.cpu_ms)
        shape = "the article's" if fast_wall.key.endswith("_insert") else "of the batch's rows"
        return [
            Ratio(key, f"{label} / the faster plain INSERT (wall: {shape})", ratio(a, fast_wall),
                  ratio(a, fast_cpu, cpu=True), ("≤", goal)),
            self.r(f"{key}_article", f"{label} / the article's plain INSERT", upsert, f"{prefix}_insert"),
            self.r(f"{key}_rows", f"{label} / plain INSERT of the batch's rows", upsert, f"{prefix}_insert_rows"),
        ]  # fmt: skip


def ratios(steps: Steps) -> list[Ratio]:
    b = _Builder(steps)
    found = [
        *b.upsert_vs_insert("upsert_insert", "UPSERT at B (vcmt loader)", "big_vcmt", "big", 3.0),
        b.r("dbt_insert", "whole `dbt run` / the article's plain INSERT at B", "big_dbt", "big_insert"),
    ]
    for a in ANCHORS:
        found += [
            b.r(f"vcmt_{a.key}", f"vcmt / {a.label} at B", "big_vcmt", f"big_{a.key}",
                ("≤", a.goal) if a.goal else None),
            b.r(f"{a.key}_insert", f"{a.label} / the article's plain INSERT at B", f"big_{a.key}", "big_insert"),
        ]  # fmt: skip
    found += b.upsert_vs_insert("small_upsert_insert", "small batch UPSERT, random keys", "small_vcmt", "small", 1.5)
    found += [b.r(f"small_vcmt_{a.key}", f"small batch vcmt / {a.label}, random keys", "small_vcmt",
                  f"small_{a.key}") for a in ANCHORS]  # fmt: skip
    return found + [
        b.r("clustered_upsert_insert", "small batch UPSERT, consecutive keys / plain INSERT of its rows",
            "clustered_vcmt", "clustered_insert_rows"),
        b.r("final_projection", "FINAL / projection (how many times faster the projection is)", "report_final",
            "report_projection", ("≥", 20.0)),
        b.r("group_by_projection", "GROUP BY / projection", "report_group_by", "report_projection"),
        b.r("final_group_by", "FINAL / GROUP BY", "report_final", "report_group_by"),
        b.r("optimized_final_projection", "FINAL / projection after OPTIMIZE FINAL", "optimized_final",
            "optimized_projection"),
    ]  # fmt: skip
