"""Measured steps: samples of one piece of work, their medians and ratios."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from vcmt_tools.bench.engine import Timing


@dataclass
class Step:
    """One measured piece of work, sampled once per repeat."""

    key: str
    label: str
    group: str
    timings: list[Timing] = field(default_factory=list)
    # Peak engine memory of the statement (query_log), max over samples; None when not logged.
    engine_memory: int | None = None

    @property
    def wall_ms(self) -> float:
        return statistics.median(t.wall_ms for t in self.timings) if self.timings else float("nan")

    @property
    def cpu_ms(self) -> float:
        return statistics.median(t.cpu_ms for t in self.timings) if self.timings else float("nan")

    @property
    def spread(self) -> tuple[float, float]:
        walls = [t.wall_ms for t in self.timings]
        return (min(walls), max(walls)) if walls else (float("nan"), float("nan"))


@dataclass
class Steps:
    """All steps of a run, in the order they were first sampled."""

    items: dict[str, Step] = field(default_factory=dict)

    def step(self, key: str, label: str, group: str) -> Step:
        if key not in self.items:
            self.items[key] = Step(key=key, label=label, group=group)
        return self.items[key]

    def __getitem__(self, key: str) -> Step:
        return self.items[key]

    def get(self, key: str) -> Step | None:
        return self.items.get(key)

    def in_group(self, group: str) -> list[Step]:
        return [s for s in self.items.values() if s.group == group]

    def tags(self) -> list[str]:
        return [t.tag for s in self.items.values() for t in s.timings]

    def attach_memory(self, memory: dict[str, int]) -> None:
        for s in self.items.values():
            found = [memory[t.tag] for t in s.timings if t.tag in memory]
            s.engine_memory = max(found) if found else None


def ratio(numerator: Step | None, denominator: Step | None, cpu: bool = False) -> float:
    if numerator is None or denominator is None:
        return float("nan")
    a, b = (numerator.cpu_ms, denominator.cpu_ms) if cpu else (numerator.wall_ms, denominator.wall_ms)
    return a / b if b else float("nan")
