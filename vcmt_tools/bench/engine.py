"""The embedded engine the bench drives: one chDB path, with query logs switched on.

chDB hosts one engine per process; every client (ours, dbt's) opened on the
same path shares it, and the engine stops when the last client closes. The
bench opens its client first, with a config file that enables
`system.query_log` and `system.query_views_log` (off in chDB by default), and
keeps it open for the whole run, so dbt's runs in between land in the same,
logged engine.
"""

from __future__ import annotations

import threading
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
    """One timed piece of work: wall clock, CPU time of this process (the engine
    runs in it, so this is the engine's CPU, robust when other jobs compete for
    the cores) and the process RSS peak meanwhile."""

    tag: str
    wall_ms: float
    cpu_ms: float
    rss_peak: int
    rss_start: int


@contextmanager
def measured(tag: str) -> Iterator[list[Timing]]:
    """Time the block; the Timing is appended to the yielded list when it ends."""
    out: list[Timing] = []
    process = psutil.Process()
    cpu = process.cpu_times()
    with RssSampler() as rss:
        started = time.perf_counter()
        yield out
        wall = (time.perf_counter() - started) * 1000
    now = process.cpu_times()
    cpu_ms = ((now.user - cpu.user) + (now.system - cpu.system)) * 1000
    out.append(Timing(tag=tag, wall_ms=wall, cpu_ms=cpu_ms, rss_peak=rss.peak, rss_start=rss.start))


@dataclass(frozen=True)
class ServerStats:
    """What the engine logged for one statement (query_log), MVs included."""

    duration_ms: float
    memory: int
    read_rows: int
    written_rows: int
    parts_written: int
    parts_presorted: int


@dataclass(frozen=True)
class ViewStats:
    """One materialized view's share of an INSERT (query_views_log)."""

    view: str
    duration_ms: float
    read_rows: int
    written_rows: int
    peak_memory: int


class RssSampler:
    """Peak resident memory of this process, sampled on a thread while a block runs."""

    def __init__(self, interval: float = 0.005) -> None:
        self._interval = interval
        self._process = psutil.Process()
        self.peak = 0
        self.start = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            self._stop.wait(self._interval)

    def __enter__(self) -> RssSampler:
        self.start = self.peak = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)


class Engine:
    """A clickhouse-connect client on the bench's chDB path, with timing helpers."""

    def __init__(self, path: Path, config_dir: Path, database: str) -> None:
        self.path = path.resolve()
        self.database = database
        config_dir.mkdir(parents=True, exist_ok=True)
        self._config = config_dir / "chdb-logs.xml"
        self._config.write_text(_LOGS_CONFIG)
        self._client: Any = None
        self._comment = ""

    def open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self._client = clickhouse_connect.get_client(
            interface="chdb",
            path=str(self.path),
            chdb_options={"config-file": str(self._config)},
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def version(self) -> str:
        return str(self.scalar("select version()"))

    # -- untimed ---------------------------------------------------------------
    def command(self, sql: str, **settings: Any) -> Any:
        return self._client.command(sql, settings=settings or None)

    def rows(self, sql: str, **settings: Any) -> list[tuple]:
        return [tuple(r) for r in self._client.query(sql, settings=settings or None).result_rows]

    def scalar(self, sql: str, **settings: Any) -> Any:
        rows = self.rows(sql, **settings)
        return rows[0][0] if rows else None

    # -- timed -----------------------------------------------------------------
    def timed(self, tag: str, sql: str) -> Timing:
        """Run one statement as it is (settings inline), tagged in query_log by `log_comment`."""
        self._set_comment(tag)
        try:
            with measured(tag) as out:
                self._client.command(sql)
        finally:
            self._set_comment("")
        return out[0]

    def timed_rows(self, tag: str, sql: str) -> tuple[Timing, list[tuple]]:
        """Like `timed`, for a SELECT whose (small) result is wanted."""
        self._set_comment(tag)
        try:
            with measured(tag) as out:
                rows = [tuple(r) for r in self._client.query(sql).result_rows]
        finally:
            self._set_comment("")
        return out[0], rows

    def _set_comment(self, tag: str) -> None:
        if tag != self._comment:
            self._client.set_client_setting("log_comment", tag)
            self._comment = tag

    # -- logs --------------------------------------------------------------------
    def flush_logs(self) -> None:
        self.command("system flush logs")

    def server_stats(self, tags: list[str]) -> dict[str, ServerStats]:
        """query_log's record of each tagged statement."""
        if not tags:
            return {}
        self.flush_logs()
        rows = self.rows(
            """
            select log_comment, any(query_duration_ms), any(memory_usage), any(read_rows), any(written_rows),
                   any(ProfileEvents['MergeTreeDataWriterBlocks']),
                   any(ProfileEvents['MergeTreeDataWriterBlocksAlreadySorted'])
            from system.query_log
            where type = 'QueryFinish' and query_kind not in ('Set', 'System') and log_comment in %(tags)s
            group by log_comment
            """.replace("%(tags)s", _sql_list(tags))
        )
        return {r[0]: ServerStats(float(r[1]), *(int(v) for v in r[2:])) for r in rows}

    def view_stats(self, tag: str) -> list[ViewStats]:
        """Per materialized view: what the last statement tagged `tag` spent in it."""
        self.flush_logs()
        rows = self.rows(
            f"""
            select view_name, view_duration_ms, read_rows, written_rows, peak_memory_usage
            from system.query_views_log
            where initial_query_id = (
                select any(query_id) from system.query_log
                where type = 'QueryFinish' and query_kind = 'Insert' and log_comment = {_sql_str(tag)})
            order by event_time_microseconds
            """
        )
        return [ViewStats(str(r[0]), float(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]

    def dbt_queries(self, since: float) -> list[tuple[str, float, int]]:
        """Statements dbt ran since `since` (unix time): (query, duration ms, memory)."""
        self.flush_logs()
        return [
            (str(r[0]), float(r[1]), int(r[2]))
            for r in self.rows(
                f"""
                select query, query_duration_ms, memory_usage from system.query_log
                where type = 'QueryFinish' and event_time_microseconds >= toDateTime64({since}, 6)
                  and query like '%"app": "dbt"%'
                order by event_time_microseconds
                """
            )
        ]


def _sql_str(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql_list(items: list[str]) -> str:
    return "(" + ", ".join(_sql_str(i) for i in items) + ")"
