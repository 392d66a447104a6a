"""ClickHouse nodes served on 127.0.0.1 for the tests, the demo and the bench.

A node is ClickHouse 26.9's own server code in chDB's local-server mode: a
process that holds a chDB data directory and, while one long query runs,
serves the native (TCP) and HTTP protocols through clickhouse-local's
`SYSTEM START LISTEN`. It is not a `clickhouse-server` binary (none of a
recent version installs here), and it differs from one in these ways:
no ON CLUSTER (replicated DDL is disabled in local mode), no writable
users or grants, and Replicated tables stay read-only. Everything else
(sessions per connection, settings per query, TEMPORARY tables, several
clients at once, file() on the node's own file system, Distributed tables
across nodes) is the server's own code.

`chdb._chdb.query` is chDB's internal entry point; chdb is pinned
(constraints.txt) and `tests/server/test_served_node.py` fails loudly if
a node stops listening.

    node = start_node(tmp / "n1")
    client = node.client()
    ...
    node.stop()

Every wait is bounded, a node stops by PID in every case (SIGTERM, then
SIGKILL), and the serving process stops by itself when the process that
started it dies (the kernel's parent-death signal) or after `lifetime_s`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from vcmt_cli.processes import LOOPBACK, die_with_parent, free_port

HOST = LOOPBACK
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
# A served node ends by itself after this long, even if nobody stops it.
LIFETIME_S = 4 * 3600
# A server's defaults for the settings clickhouse-local changes (chDB starts with them on): the node's
# clients get what a ClickHouse server gives them.
SERVER_PROFILE = {
    "implicit_select": 0,
    "allow_introspection_functions": 0,
    "cast_string_to_dynamic_use_inference": 0,
}


class ServedNodeError(RuntimeError):
    """A node did not start or stop in time; the message carries its log's tail."""


@dataclass(frozen=True)
class Shard:
    """One shard of a `remote_servers` cluster: its replicas as (host, tcp port), and its weight (the share of
    the Distributed engine's slots it owns)."""

    replicas: tuple[tuple[str, int], ...]
    weight: int = 1


# The engine's own logs of what each statement read (system.query_log, query_views_log, processors_profile_log):
# the benches read them. Flushed by `system flush logs`, not on a timer.
QUERY_LOGS = ("query_log", "query_views_log", "processors_profile_log")


def query_logs_xml() -> str:
    """The config sections that switch QUERY_LOGS on (off in chDB, and on a node without them)."""
    return "".join(
        f"<{log}><database>system</database><table>{log}</table>"
        f"<flush_interval_milliseconds>60000</flush_interval_milliseconds></{log}>"
        for log in QUERY_LOGS
    )


def config_xml(
    tcp_port: int,
    http_port: int,
    clusters: Mapping[str, Sequence[Shard]] | None = None,
    macros: Mapping[str, str] | None = None,
    query_logs: bool = False,
    user_files: Path | None = None,
    users: Mapping[str, Sequence[str]] | None = None,
    backups: Path | None = None,
) -> tuple[str, str]:
    """The node's config.xml (loopback listeners, optional clusters, macros, query logs and `user_files_path`:
    where file() may read, the server's default when None) and users.xml (`default`, without password, with a
    server's defaults; and each of `users`, also without password on loopback, holding only the privileges its
    GRANT statements give: the node keeps users in users.xml alone, so CREATE USER and GRANT are refused); with
    `backups`, BACKUP and RESTORE may use File() there."""
    profile = "".join(f"<{k}>{v}</{k}>" for k, v in SERVER_PROFILE.items())
    parts = [
        f"<listen_host>{HOST}</listen_host>",
        f"<tcp_port>{tcp_port}</tcp_port>",
        f"<http_port>{http_port}</http_port>",
        "<user_directories><users_xml><path>users.xml</path></users_xml></user_directories>",
    ]
    if clusters:
        defined = []
        for name, shards in clusters.items():
            body = "".join(
                f"<shard><weight>{shard.weight}</weight><internal_replication>true</internal_replication>"
                + "".join(f"<replica><host>{escape(h)}</host><port>{p}</port></replica>" for h, p in shard.replicas)
                + "</shard>"
                for shard in shards
            )
            defined.append(f"<{name}>{body}</{name}>")
        parts.append(f"<remote_servers>{''.join(defined)}</remote_servers>")
    if macros:
        parts.append("<macros>" + "".join(f"<{k}>{escape(v)}</{k}>" for k, v in macros.items()) + "</macros>")
    if query_logs:
        parts.append(query_logs_xml())
    if user_files is not None:
        parts.append(f"<user_files_path>{escape(str(user_files))}/</user_files_path>")
    if backups is not None:
        parts.append(f"<backups><allowed_path>{escape(str(backups))}/</allowed_path></backups>")

    for name in users or {}:
        if name == "default" or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"users: {name!r} must be a plain name (letters, digits, _) other than 'default'")

    def user(name: str, grants: str = "") -> str:
        return (
            f"<{name}><password></password><networks><ip>{HOST}</ip></networks>"
            f"<profile>default</profile><quota>default</quota>{grants}</{name}>"
        )

    granted = "".join(
        user(name, "<grants>" + "".join(f"<query>{escape(q)}</query>" for q in queries) + "</grants>")
        for name, queries in (users or {}).items()
    )
    xml = (
        "<clickhouse><profiles><default>" + profile + "</default></profiles>"
        f"<users>{user('default')}{granted}</users>"
        "<quotas><default></default></quotas></clickhouse>"
    )
    return "<clickhouse>" + "".join(parts) + "</clickhouse>\n", xml + "\n"


@dataclass
class ServedNode:
    """One served node: its folder (config, data, log), ports and serving process."""

    folder: Path
    tcp_port: int
    http_port: int
    clusters: Mapping[str, Sequence[Shard]] | None = None
    macros: Mapping[str, str] | None = None
    query_logs: bool = False
    user_files: Path | None = None
    users: Mapping[str, Sequence[str]] | None = None
    backups: Path | None = None
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def data_path(self) -> Path:
        return self.folder / "data"

    @property
    def log_path(self) -> Path:
        return self.folder / "node.log"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self, timeout: float = START_TIMEOUT_S) -> ServedNode:
        """Start serving (again, after `stop` or a kill: the data survives) and wait until both
        protocols answer."""
        if self.running():
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        config, users = config_xml(
            self.tcp_port,
            self.http_port,
            clusters=self.clusters,
            macros=self.macros,
            query_logs=self.query_logs,
            user_files=self.user_files,
            users=self.users,
            backups=self.backups,
        )
        (self.folder / "config.xml").write_text(config)
        (self.folder / "users.xml").write_text(users)
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it; closed when the node stops)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "vcmt_lab.clickhouse_server", "serve", str(self.data_path), str(LIFETIME_S)],
                cwd=self.folder,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServedNodeError(
                    f"served node in {self.folder} exited with {self.process.returncode} "
                    f"before it listened:\n{self.log_tail()}"
                )
            if self._answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise ServedNodeError(
            f"served node in {self.folder} did not listen on {HOST}:{self.http_port} (HTTP) and "
            f":{self.tcp_port} (native) within {timeout:.0f} s:\n{self.log_tail()}"
        )

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.http_port}/ping", timeout=1) as response:
                if response.read().strip() != b"Ok.":
                    return False
            with socket.create_connection((HOST, self.tcp_port), timeout=1):
                return True
        except (OSError, urllib.error.URLError):
            return False

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop by PID: SIGTERM, then SIGKILL after `timeout`; the data directory is released."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def kill(self) -> None:
        """SIGKILL, as a crash would: nothing is flushed or closed."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired as ex:
            raise ServedNodeError(f"served node {self.process.pid} did not die on SIGKILL") from ex
        self.process = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def client(self, database: str | None = None, **kwargs: Any):
        """A clickhouse-connect client over HTTP (its own session)."""
        import clickhouse_connect

        return clickhouse_connect.get_client(host=HOST, port=self.http_port, database=database or "default", **kwargs)

    def dbt_output(self, schema: str, driver: str = "http", **extra: Any) -> dict[str, Any]:
        """A dbt-clickhouse (`type: clickhouse`) profile output on this node."""
        port = self.http_port if driver == "http" else self.tcp_port
        return {
            "type": "clickhouse",
            "driver": driver,
            "host": HOST,
            "port": port,
            "user": "default",
            "password": "",
            "schema": schema,
            "threads": 1,
            **extra,
        }


def start_node(folder: Path, *, timeout: float = START_TIMEOUT_S, attempts: int = 3, **options: Any) -> ServedNode:
    """A node in `folder` on free loopback ports, listening, with the ServedNode `options` given (clusters,
    macros, query logs, user_files, users, backups: config_xml). Ports are picked free, then bound by the node: a
    port taken in between makes the node fail, and it is tried again on other ports (`attempts` in all)."""
    for attempt in range(attempts):
        node = ServedNode(folder, free_port(), free_port(), **options)
        try:
            return node.start(timeout)
        except ServedNodeError:
            node.stop()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def served_node(folder: Path, **kwargs: Any) -> Iterator[ServedNode]:
    """A node for the duration of a `with` block, stopped in every case."""
    node = start_node(folder, **kwargs)
    try:
        yield node
    finally:
        node.stop()


def serve(data_path: str, lifetime_s: int) -> None:
    """The serving process: listen on both protocols while one long, idle query runs."""
    die_with_parent()
    if os.getppid() == 1:  # the starter died before prctl took effect
        return
    from chdb import _chdb

    # The output format becomes the HTTP default format; clickhouse-connect's handshake needs TabSeparated.
    _chdb.query(
        "SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; "
        f"SELECT sleepEachRow(1) FROM numbers({int(lifetime_s)}) "
        "SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = 0 FORMAT Null",
        "TabSeparated",
        path=data_path,
    )


def run_with_node(folder: Path, command: Sequence[str]) -> int:
    """Run `command` while a node serves from `folder`; it finds the node in the environment, as dbt
    profiles do: CLICKHOUSE_HOST, CLICKHOUSE_PORT (HTTP) and CLICKHOUSE_NATIVE_PORT. Returns its exit code.
    The command is looked up in this interpreter's environment first (`.venv/bin/python -m ... -- dbt run`
    runs that environment's dbt, with none activated)."""
    with served_node(folder) as node:
        print(
            f"clickhouse_server: node on {HOST}, HTTP port {node.http_port}, native port {node.tcp_port} "
            f"(log: {node.log_path})",
            flush=True,
        )
        env = {
            **os.environ,
            "CLICKHOUSE_HOST": HOST,
            "CLICKHOUSE_PORT": str(node.http_port),
            "CLICKHOUSE_NATIVE_PORT": str(node.tcp_port),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
        try:
            return subprocess.call(list(command), env=env)
        except FileNotFoundError:
            print(f"clickhouse_server: no command `{command[0]}` in {env['PATH']}", file=sys.stderr, flush=True)
            return 127


def main(argv: Sequence[str]) -> int:
    usage = (
        "usage: python -m vcmt_lab.clickhouse_server run FOLDER -- COMMAND...  (a node for the command's "
        "lifetime)\n       python -m vcmt_lab.clickhouse_server serve DATA LIFETIME_S  (internal)"
    )
    if len(argv) >= 4 and argv[0] == "run" and argv[2] == "--":
        return run_with_node(Path(argv[1]), argv[3:])
    if len(argv) == 3 and argv[0] == "serve":
        serve(argv[1], int(argv[2]))
        return 0
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
