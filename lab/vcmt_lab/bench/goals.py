"""The ratios the bench is judged by: issue 12's goals and issue 62's floors (docs/design.md#benchmark-goals)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from vcmt_lab.bench.anchors import ANCHORS, RMT
from vcmt_lab.bench.steps import Steps, ratio
from vcmt_lab.bench.tables import MODEL


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


def _over_floor(steps: Steps, size: str, number: int, label: str, judged: bool, read_key: str = "key_rows") -> Ratio:
    """vcmt's write over its floor: the read floor plus the write floor, each a median of the same run
    (docs/design.md#benchmark-goals). With `read_key` `key_rows_1`, the read on one thread, as the stage's
    transform view runs its lookup (the write floor as timed): what vcmt adds beyond that one thread, never judged."""
    write, read, pairs = (steps.get(f"{size}_{k}") for k in (MODEL.key, read_key, "pair_rows"))

    def k(cpu: bool) -> float:
        if write is None or read is None or pairs is None:
            return float("nan")
        get = (lambda s: s.cpu_ms) if cpu else (lambda s: s.wall_ms)
        floor = get(read) + get(pairs)
        return get(write) / floor if floor else float("nan")

    if read_key != "key_rows":
        return Ratio(f"{size}_floor_one_thread", f"{number}'s floor with the read on one thread: vcmt write, {label} "
                     "/ (read on one thread + write floors)", k(False), k(True), None)  # fmt: skip
    return Ratio(f"{size}_floor", f"{number}: vcmt write, {label} / its floor (read + write floors)", k(False), k(True),
                 ("≤", 1.2) if judged else None)  # fmt: skip


def _break_even(steps: Steps, size: str, key: str, model: str, label: str, judged: bool) -> Ratio:
    """Report queries per batch from which vcmt's write + reads cost less than the anchor's:
    (vcmt write - anchor write) / (anchor report - vcmt's projection report). 0 when vcmt's write is
    already cheaper; inf when the anchor's report is not slower. The report times are those after the
    batch of B, also for the small batch."""

    def k(cpu: bool) -> float:
        parts = [steps.get(n) for n in (f"{size}_{model}", f"{size}_{key}", f"report_{key}", f"report_{model}")]
        if any(p is None for p in parts):
            return float("nan")
        get = (lambda s: s.cpu_ms) if cpu else (lambda s: s.wall_ms)
        write, read = get(parts[0]) - get(parts[1]), get(parts[2]) - get(parts[3])
        return 0.0 if write <= 0 else (write / read if read > 0.01 else float("inf"))

    return Ratio(f"break_even_{size}_{key}", f"1: break-even vs {label}, {size} batch (report queries)",
                 k(False), k(True), ("≤", 1.0) if judged else None)  # fmt: skip


def ratios(steps: Steps, bookkeeping: list[float], judged: bool = True) -> list[Ratio]:
    """The ratios of one key distribution's steps; with their goals when the goals are `judged` on it
    (the headline distribution), as plain ratios otherwise."""
    v = MODEL.key

    def goal(op: str, threshold: float) -> tuple[str, float] | None:
        return (op, threshold) if judged else None

    found = [_break_even(steps, size, a.key, a.model.key, a.short, judged) for a in ANCHORS
             for size in ("big", "small")]  # fmt: skip
    found += [
        _r(steps, "big_insert", "2: vcmt write at B / plain INSERT of the same events", f"big_{v}", "big_insert",
           goal("≤", 2.0)),
        _r(steps, "small_rmt", "3: vcmt write, small batch / (A)'s INSERT", f"small_{v}", f"small_{RMT}",
           goal("≤", 2.0)),
        _r(steps, "small_key_rows", "3's floor: reading the small batch's keys' stored rows / (A)'s INSERT",
           "small_key_rows", f"small_{RMT}"),
        _r(steps, "small_pair_rows", "3's floor: writing a cancel and a state row per small-batch key (its newest "
           "event) / (A)'s INSERT", "small_pair_rows", f"small_{RMT}"),
        _r(steps, "final_projection", "5: (A)'s FINAL report / vcmt's projection (×; judged at N = 100M)",
           f"report_{RMT}", f"report_{v}", goal("≥", 10.0)),
    ]  # fmt: skip
    if judged:
        share = statistics.median(bookkeeping) if bookkeeping else float("nan")
        found.append(Ratio("bookkeeping", "6: bookkeeping / the engine's work for the load at B", share, share,
                           ("≤", 0.1)))  # fmt: skip
    found += [_over_floor(steps, "big", 7, "batch of B", judged), _over_floor(steps, "small", 8, "small batch", judged)]
    found += [
        _over_floor(steps, size, n, label, False, "key_rows_1")
        for size, n, label in (("big", 7, "batch of B"), ("small", 8, "small batch"))
    ]
    return found + [
        _r(steps, "dbt_insert", "whole `dbt run` at B / plain INSERT", "big_dbt", "big_insert"),
        _r(steps, "small_insert", "vcmt write, small batch / plain INSERT of the same events", f"small_{v}",
           "small_insert"),
        _r(steps, "final_group_by", "vcmt: FINAL / GROUP BY sign arithmetic", "report_final", "report_group_by"),
    ]  # fmt: skip
