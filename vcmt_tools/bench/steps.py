"""Measured steps: samples of one piece of work and their medians."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from vcmt_tools.bench.engine import ServerStats, Timing


@dataclass
class Step:
    """One measured piece of work, sampled once per repeat."""

    key: str
    label: str
    group: str
    timings: list[Timing] = field(default_factory=list)
    server: list[ServerStats] = field(default_factory=list)
    note: str = ""

    @property
    def tags(self) -> list[str]:
        return [t.tag for t in self.timings]

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

    @property
    def engine_memory(self) -> int | None:
        """Peak memory the engine tracked for the statement (query_log), max over samples."""
        return max((s.memory for s in self.server), default=None)

    @property
    def parts(self) -> tuple[int, int] | None:
        """(parts written, of which the writer found already sorted) by the first sample."""
        if not self.server:
            return None
        return self.server[0].parts_written, self.server[0].parts_presorted

    @property
    def rss_peak(self) -> int:
        return max((t.rss_peak for t in self.timings), default=0)

    @property
    def rss_growth(self) -> int:
        """How far RSS rose above its level at the start of a sample (max over samples)."""
        return max((t.rss_peak - t.rss_start for t in self.timings), default=0)


@dataclass
class Steps:
    """All steps of a run, in the order they were first sampled."""

    items: dict[str, Step] = field(default_factory=dict)

    def step(self, key: str, label: str, group: str, note: str = "") -> Step:
        if key not in self.items:
            self.items[key] = Step(key=key, label=label, group=group, note=note)
        return self.items[key]

    def __getitem__(self, key: str) -> Step:
        return self.items[key]

    def get(self, key: str) -> Step | None:
        return self.items.get(key)

    def in_group(self, group: str) -> list[Step]:
        return [s for s in self.items.values() if s.group == group]

    def all_tags(self) -> list[str]:
        return [tag for s in self.items.values() for tag in s.tags]

    def attach_server_stats(self, stats: dict[str, ServerStats]) -> None:
        for s in self.items.values():
            s.server = [stats[t] for t in s.tags if t in stats]


def ratio(numerator: Step | None, denominator: Step | None, cpu: bool = False) -> float:
    if numerator is None or denominator is None:
        return float("nan")
    a, b = (numerator.cpu_ms, denominator.cpu_ms) if cpu else (numerator.wall_ms, denominator.wall_ms)
    return a / b if b else float("nan")
