"""The engine the bench drives, with query logs switched on: one chDB path, or a served node.

chDB hosts one engine per process; every client (ours, dbt's) opened on the
same path shares it. The bench opens its client first, with a config file
that enables `system.query_log`, `query_views_log` and `processors_profile_log`
(off in chDB by default), and keeps it open for the whole run, so dbt's runs
in between land in the same, logged engine.
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

from vcmt_lab.bench import sql as bench_sql
from vcmt_lab.clickhouse_server import query_logs_xml
from vcmt_lab.dbt_project import DbtProject
from vcmt_lab.dbt_project import Engine as Target
from vcmt_lab.paths import REPO_ROOT


@dataclass(frozen=True)
class Timing:
    """Wall clock and the CPU time of the engine's process (chDB runs in this one; a served node in its
    own), which stays comparable when other jobs compete for the cores."""

    tag: str
    wall_ms: float
    cpu_ms: float


@contextmanager
def measured(tag: str, *pids: int | None) -> Iterator[list[Timing]]:
    """Time the block, with the CPU of this process, or of each process in `pids` (served nodes'); one
    Timing per process is appended to the yielded list when it ends, in the order of `pids`."""
    out: list[Timing] = []
    processes = [psutil.Process(pid) for pid in pids or (None,)]
    cpu, started = [p.cpu_times() for p in processes], time.perf_counter()
    yield out
    wall_ms = (time.perf_counter() - started) * 1000
    for process, before in zip(processes, cpu, strict=True):
        now = process.cpu_times()
        out.append(Timing(tag, wall_ms, ((now.user - before.user) + (now.system - before.system)) * 1000))


class Engine:
    """A clickhouse-connect client on the bench's chDB path, or over HTTP on a served `node` started with
    `query_logs=True`, with timing and log helpers."""

    def __init__(self, path: Path | None, config_dir: Path, database: str, node: Any = None) -> None:
        self.path, self.database, self.node = path.resolve() if path else None, database, node
        self._config = config_dir / "chdb-logs.xml"
        if node is None:
            config_dir.mkdir(parents=True, exist_ok=True)
            self._config.write_text(f"<clickhouse>{query_logs_xml()}</clickhouse>\n")
        self._client: Any = None

    def open(self) -> None:
        if self.node is not None:
            self._client = self.node.client()
            return
        self.path.mkdir(parents=True, exist_ok=True)
        options = {"config-file": str(self._config)}
        self._client = clickhouse_connect.get_client(interface="chdb", path=str(self.path), chdb_options=options)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def command(self, sql: str, **settings: Any) -> Any:
        return self._client.command(sql, settings=settings or None)

    def rows(self, sql: str) -> list[tuple]:
        return [tuple(r) for r in self._client.query(sql).result_rows]

    def scalar(self, sql: str) -> Any:
        rows = self.rows(sql)
        return rows[0][0] if rows else None

    def timed(self, tag: str, sql: str, want_rows: bool = False) -> tuple[Timing, list[tuple]]:
        """Run one statement as it is (settings inline), tagged in query_log by `log_comment`;
        with `want_rows`, a SELECT whose (small) result is returned."""
        self._client.set_client_setting("log_comment", tag)
        sql = bench_sql.tagged(sql, tag)
        try:
            rows: list[tuple] = []
            with measured(tag) as out:
                if want_rows:
                    rows = self.rows(sql)
                else:
                    self._client.command(sql)
        finally:
            self._client.set_client_setting("log_comment", "")
        return out[0], rows

    def _logged(self, sql: str) -> list[tuple]:
        self.command("system flush logs")
        return self.rows(sql)

    def _query_id(self, tag: str) -> str:
        return (f"(select any(query_id) from system.query_log where type = 'QueryFinish' and query_kind = 'Insert' "
                f"and log_comment = {bench_sql.literal(tag)})")  # fmt: skip

    def engine_memory(self, tags: list[str]) -> dict[str, int]:
        """Peak memory query_log recorded for each tagged statement (materialized views included)."""
        rows = self._logged(
            "select log_comment, max(memory_usage) from system.query_log where type = 'QueryFinish' "
            f"and query_kind not in ('Set', 'System') and log_comment in ({', '.join(map(bench_sql.literal, tags))}) "
            "group by log_comment"
        ) if tags else []  # fmt: skip
        return {str(r[0]): int(r[1]) for r in rows}

    def view_stats(self, query_id: str) -> list[tuple[str, float, int]]:
        """Per materialized view of one INSERT (its id, or a subquery finding it): (view, ms, peak memory)."""
        query_id = query_id if query_id.startswith("(") else bench_sql.literal(query_id)
        rows = self._logged("select view_name, view_duration_ms, peak_memory_usage from system.query_views_log "
                            f"where initial_query_id = {query_id} order by event_time_microseconds")  # fmt: skip
        return [(str(r[0]).split(".")[-1].strip("`"), float(r[1]), int(r[2])) for r in rows]

    def profiled(self, tag: str, sql: str, top: int = 8) -> tuple[list[tuple[str, float, int]], ...]:
        """Run an INSERT once with processors_profile_log on: its views (view_stats) and its busiest
        processors (processor, ms of work summed over threads, rows out)."""
        self._client.set_client_setting("log_processors_profiles", 1)
        try:
            self.timed(tag, sql)
        finally:
            self._client.set_client_setting("log_processors_profiles", 0)
        rows = self._logged("select name, sum(elapsed_us) / 1000, sum(output_rows) from system.processors_profile_log "
                            f"where initial_query_id = {self._query_id(tag)} group by name order by 2 desc "
                            f"limit {top}")  # fmt: skip
        return self.view_stats(self._query_id(tag)), [(str(r[0]), float(r[1]), int(r[2])) for r in rows]

    def dbt_queries(self, since: float) -> list[tuple[str, float, str]]:
        """Statements dbt ran since `since` (unix time): (query, engine ms, query id)."""
        rows = self._logged(
            "select query, query_duration_ms, query_id from system.query_log where type = 'QueryFinish' "
            f"""and event_time_microseconds >= toDateTime64({since}, 6) and query like '%"app": "dbt"%' """
            "order by event_time_microseconds"
        )
        return [(str(r[0]), float(r[1]), str(r[2])) for r in rows]


@contextmanager
def bench_project(
    work: Path, database: str, node: Any = None, cluster: str | None = None
) -> Iterator[tuple[Engine, DbtProject]]:
    """The bench's engine (chDB in `work`, or the served `node`, or a lab cluster's entry with the `cluster`
    name dbt's profile then carries) and a dbt project in `work` on it, in `database`; both closed at the
    end."""
    engine = Engine(None if node else work / "chdb", work, database, node=node)
    engine.open()
    try:
        target = Target("http", node=node, cluster=cluster) if node else None
        project = DbtProject(work / "project", REPO_ROOT, work / "chdb", database, lab_dir=work, engine=target)
        try:
            yield engine, project
        finally:
            if node:  # on chDB the project's client shares the bench's one engine, closed below
                project.close()
    finally:
        engine.close()
