"""What the numbers were measured on, and how busy the machine was meanwhile."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import psutil


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


@dataclass(frozen=True)
class Machine:
    cpu: str
    logical_cores: int
    physical_cores: int | None
    ram_bytes: int
    os: str
    python: str
    packages: dict[str, str]


def describe() -> Machine:
    return Machine(
        cpu=_cpu_model(),
        logical_cores=os.cpu_count() or 0,
        physical_cores=psutil.cpu_count(logical=False),
        ram_bytes=psutil.virtual_memory().total,
        os=platform.platform(),
        python=platform.python_version(),
        packages={p: _version(p) for p in ("chdb", "chdb-core", "clickhouse-connect", "dbt-core", "dbt-clickhouse")},
    )


class Contention:
    """Share of the machine's CPU used by other processes while the bench ran.

    The host is shared (other jobs, test suites): when this is high, wall times
    stretch while the CPU times this bench reports stay comparable.
    """

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._load_start = os.getloadavg()[0]
        self._system = psutil.cpu_times()
        self._own = self._process.cpu_times()

    def finish(self) -> tuple[float, float, float]:
        """(load average at start, at end, share of all cores busy with other processes)."""
        system, own = psutil.cpu_times(), self._process.cpu_times()
        total = sum(system) - sum(self._system)
        busy = (
            total
            - (system.idle - self._system.idle)
            - (getattr(system, "iowait", 0) - getattr(self._system, "iowait", 0))
        )
        mine = (own.user - self._own.user) + (own.system - self._own.system)
        others = max(busy - mine, 0.0) / total if total > 0 else 0.0
        return self._load_start, os.getloadavg()[0], others
