"""The embedded engine the bench drives: one chDB path, with query logs switched on.

chDB hosts one engine per process; every client (ours, dbt's) opened on the
same path shares it, and the engine stops when the last client closes. The
bench opens its client first, with a config file that enables
`system.query_log` and `system.query_views_log` (off in chDB by default), and
keeps it open for the whole run, so dbt's runs in between land in the same,
logged engine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clickhouse_connect
import psutil

_LOGS_CONFIG = """<clickhouse>
  <query_log>
    <database>system</database><table>query_log</table>
    <flush_interval_milliseconds>60000</flush_interval_milliseconds>
  </query_log>
  <query_views_log>
    <database>system</database><table>query_views_log</table>
    <flush_interval_milliseconds>60000</flush_interval_milliseconds>
  </query_views_log>
</clickhouse>
"""


@dataclass(frozen=True)
class Timing:
    """One timed piece of work: wall clock and the CPU time of this process (the
    engine runs in it, so this is the engine's CPU, which stays comparable when
    other jobs compete for the cores)."""

    tag: str
    wall_ms: float
    cpu_ms: float


@contextmanager
def measured(tag: str) -> Iterator[list[Timing]]:
    """Time the block; the Timing is appended to the yielded list when it ends."""
    out: list[Timing] = []
    process = psutil.Process()
    cpu = process.cpu_times()
    started = time.perf_counter()
    yield out
    wall = (time.perf_counter() - started) * 1000
    now = process.cpu_times()
    cpu_ms = ((now.user - cpu.user) + (now.system - cpu.system)) * 1000
    out.append(Timing(tag=tag, wall_ms=wall, cpu_ms=cpu_ms))


@dataclass(frozen=True)
class ViewStats:
    """One materialized view's share of an INSERT (query_views_log)."""

    view: str
    duration_ms: float
    peak_memory: int


class Engine:
    """A clickhouse-connect client on the bench's chDB path, with timing helpers."""

    def __init__(self, path: Path, config_dir: Path, database: str) -> None:
        self.path = path.resolve()
        self.database = database
        config_dir.mkdir(parents=True, exist_ok=True)
        self._config = config_dir / "chdb-logs.xml"
        self._config.write_text(_LOGS_CONFIG)
        self._client: Any = None

    def open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        options = {"config-file": str(self._config)}
        self._client = clickhouse_connect.get_client(interface="chdb", path=str(self.path), chdb_options=options)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def version(self) -> str:
        return str(self.scalar("select version()"))

    def command(self, sql: str, **settings: Any) -> Any:
        return self._client.command(sql, settings=settings or None)

    def rows(self, sql: str, **settings: Any) -> list[tuple]:
        return [tuple(r) for r in self._client.query(sql, settings=settings or None).result_rows]

    def scalar(self, sql: str, **settings: Any) -> Any:
        rows = self.rows(sql, **settings)
        return rows[0][0] if rows else None

    # -- timed -----------------------------------------------------------------
    def timed(self, tag: str, sql: str, want_rows: bool = False) -> tuple[Timing, list[tuple]]:
        """Run one statement as it is (settings inline), tagged in query_log by `log_comment`;
        with `want_rows`, a SELECT whose (small) result is returned."""
        self._client.set_client_setting("log_comment", tag)
        try:
            rows: list[tuple] = []
            with measured(tag) as out:
                if want_rows:
                    rows = [tuple(r) for r in self._client.query(sql).result_rows]
                else:
                    self._client.command(sql)
        finally:
            self._client.set_client_setting("log_comment", "")
        return out[0], rows

    # -- logs --------------------------------------------------------------------
    def engine_memory(self, tags: list[str]) -> dict[str, int]:
        """Peak memory query_log recorded for each tagged statement (materialized views included)."""
        if not tags:
            return {}
        self.command("system flush logs")
        rows = self.rows(
            "select log_comment, max(memory_usage) from system.query_log where type = 'QueryFinish' "
            f"and query_kind not in ('Set', 'System') and log_comment in {_sql_list(tags)} group by log_comment"
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def view_stats(self, tag: str) -> list[ViewStats]:
        """Per materialized view: what the last statement tagged `tag` spent in it."""
        self.command("system flush logs")
        rows = self.rows(
            "select view_name, view_duration_ms, peak_memory_usage from system.query_views_log "
            "where initial_query_id = (select any(query_id) from system.query_log where type = 'QueryFinish' "
            f"and query_kind = 'Insert' and log_comment = {_sql_str(tag)}) order by event_time_microseconds"
        )
        return [ViewStats(str(r[0]), float(r[1]), int(r[2])) for r in rows]

    def dbt_queries(self, since: float) -> list[tuple[str, float]]:
        """Statements dbt ran since `since` (unix time): (query, engine ms)."""
        self.command("system flush logs")
        rows = self.rows(
            "select query, query_duration_ms from system.query_log where type = 'QueryFinish' "
            f"""and event_time_microseconds >= toDateTime64({since}, 6) and query like '%"app": "dbt"%' """
            "order by event_time_microseconds"
        )
        return [(str(r[0]), float(r[1])) for r in rows]


def _sql_str(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql_list(items: list[str]) -> str:
    return "(" + ", ".join(_sql_str(i) for i in items) + ")"
