"""Measured steps: samples of one piece of work, their medians and ratios."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from vcmt_lab.bench.engine import Timing


@dataclass
class Step:
    """One measured piece of work, sampled once per repeat; `group` is its batch or "report"."""

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


class Steps(dict[str, Step]):
    """All steps of a run by key, in the order they were first sampled."""

    def step(self, key: str, label: str, group: str) -> Step:
        return self.setdefault(key, Step(key=key, label=label, group=group))

    def in_group(self, group: str) -> list[Step]:
        return [s for s in self.values() if s.group == group]

    def attach_memory(self, memory: dict[str, int]) -> None:
        for s in self.values():
            found = [memory[t.tag] for t in s.timings if t.tag in memory]
            s.engine_memory = max(found) if found else None


def ratio(numerator: Step | None, denominator: Step | None, cpu: bool = False) -> float:
    if numerator is None or denominator is None:
        return float("nan")
    a, b = (numerator.cpu_ms, denominator.cpu_ms) if cpu else (numerator.wall_ms, denominator.wall_ms)
    return a / b if b else float("nan")
