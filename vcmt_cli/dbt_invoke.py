"""Run one dbt command in this process and keep its log (the external writer and the lab use it)."""

from __future__ import annotations

from dataclasses import dataclass

from dbt.cli.main import dbtRunner, dbtRunnerResult


@dataclass
class DbtRun:
    result: dbtRunnerResult
    log: str

    @property
    def success(self) -> bool:
        return bool(self.result.success)


def invoke(cli: list[str]) -> DbtRun:
    """Run one dbt command in this process and keep its log.

    The console stays quiet: every event reaches the callback, and a failure
    carries the log with it.
    """
    lines: list[str] = []

    def collect(event) -> None:
        msg = event.info.msg
        if msg:
            lines.append(str(msg))

    result = dbtRunner(callbacks=[collect]).invoke([*cli, "--log-level", "none"])
    if result.exception is not None:
        lines.append(f"EXCEPTION: {result.exception!r}")
    return DbtRun(result=result, log="\n".join(lines))
