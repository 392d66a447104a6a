"""What the numbers were measured on, and how busy the machine was meanwhile."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import psutil

_PACKAGES = ("chdb", "chdb-core", "clickhouse-connect", "dbt-core", "dbt-clickhouse")


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def describe() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
              if line.startswith("model name")] if cpuinfo.exists() else []  # fmt: skip
    cpu = models[0] if models else platform.processor() or platform.machine()
    return (f"{cpu}, {os.cpu_count()} logical cores, RAM {psutil.virtual_memory().total / 2**30:.1f} GiB; "
            f"{platform.platform()}; Python {platform.python_version()}; "
            + ", ".join(f"{p} {_version(p)}" for p in _PACKAGES))  # fmt: skip


class Contention:
    """Share of the machine's CPU other processes used while the bench ran: on a
    shared host wall times stretch with it, while the CPU times stay comparable.
    The bench's own served nodes (`pids`, alive until `finish`) count as the
    bench's."""

    def __init__(self, pids: Sequence[int] = ()) -> None:
        self._processes = [psutil.Process(), *(psutil.Process(pid) for pid in pids)]
        self._load, self._system, self._own = os.getloadavg()[0], psutil.cpu_times(), self._own_cpu_s()

    def _own_cpu_s(self) -> float:
        return sum(t.user + t.system for t in (p.cpu_times() for p in self._processes))

    def finish(self) -> tuple[float, float, float]:
        """(load average at start, at end, share of all cores busy with other processes)."""
        system = psutil.cpu_times()
        total = sum(system) - sum(self._system)
        idle = (system.idle - self._system.idle) + (getattr(system, "iowait", 0) - getattr(self._system, "iowait", 0))
        mine = self._own_cpu_s() - self._own
        others = max(total - idle - mine, 0.0) / total if total > 0 else 0.0
        return self._load, os.getloadavg()[0], others
