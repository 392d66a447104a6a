"""lab/bench/results/latest.png: median times per step, and the ratios against their goals."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from vcmt_lab.bench.goals import Ratio  # noqa: E402
from vcmt_lab.bench.steps import Steps  # noqa: E402

_GROUPS = (
    ("big", "#4C72B0", "batch of B"),
    ("small", "#55A868", "small batch"),
    ("report", "#C44E52", "report query after the batch of B"),
)


def draw(steps: Steps, ratios: list[Ratio], title: str, path: Path) -> None:
    shown = [(s, color) for group, color, _ in _GROUPS for s in steps.in_group(group)]
    goals = [r for r in ratios if r.goal is not None and not math.isnan(r.wall)]
    fig, (times, rel) = plt.subplots(
        2, 1, figsize=(12, 3 + 0.38 * len(shown) + 0.5 * len(goals)),
        gridspec_kw={"height_ratios": [max(len(shown), 1), max(len(goals), 1) + 1]},
    )  # fmt: skip
    labels = [s.label for s, _ in shown]
    values = [s.wall_ms for s, _ in shown]
    times.barh(range(len(shown)), values, color=[c for _, c in shown])
    times.set_yticks(range(len(shown)), labels, fontsize=8)
    times.invert_yaxis()
    times.set_xscale("log")
    times.set_xlabel("median wall time, ms (log scale)")
    for i, v in enumerate(values):
        times.text(v, i, f" {v:,.0f}", va="center", fontsize=7)
    times.set_title(title, fontsize=10)
    present = [(color, name) for group, color, name in _GROUPS if steps.in_group(group)]
    times.legend(handles=[Patch(color=color, label=name) for color, name in present], fontsize=7, loc="lower right")

    names = [textwrap.fill(r.label, 48) for r in goals]
    # On a log scale a break-even of 0 (vcmt's write already cheaper) or inf is drawn at the edge.
    finite = [r.wall for r in goals if 0 < r.wall < math.inf] or [1.0]
    walls = [min(max(r.wall, min(finite) / 4), max(finite) * 4) for r in goals]
    colors = ["#55A868" if r.passed else "#C44E52" for r in goals]
    rel.barh(range(len(goals)), walls, color=colors)
    for i, (r, shown) in enumerate(zip(goals, walls, strict=True)):
        threshold = r.goal[1] if r.goal else 0
        rel.plot([threshold, threshold], [i - 0.4, i + 0.4], color="black", linewidth=2)
        rel.text(max(shown, threshold), i, f"  {r.wall:.2f} (goal {r.goal_text}) {r.verdict}", va="center", fontsize=8)
    rel.set_yticks(range(len(goals)), names, fontsize=8)
    rel.invert_yaxis()
    rel.set_xscale("log")
    rel.set_xlabel("ratio of medians (log scale); black bar = goal")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
