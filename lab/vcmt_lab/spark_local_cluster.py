"""Spark servers started from PySpark's own install, and Spark's own log kept in a file.

Used by `make demo --spark connect|thrift` and by the tests (tests/spark_servers).
See docs/adapters.md#how-the-spark-targets-work.

- `start_server("connect" | "thrift", root)`: a Spark Connect server or the
  Thrift JDBC server (HiveThriftServer2), both shipped in PySpark's jars,
  bound to 127.0.0.1 on a free port, with master `local-cluster[2,1,1024]`:
  two workers whose executors are separate JVMs, as on a real cluster. The
  server runs under a watchdog (this file run with `--watch`)
  that stops it, executors included, when the starting process ends, even
  when it is killed, or after `max_seconds`. Every wait is bounded; a server
  that does not come up raises `SparkServerError` with its log tail.
- `quiet_spark(log_file)`: Spark's JVM log (log4j2) and the pyspark / py4j
  Python loggers go to `log_file` instead of the console.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# The standard library and vcmt_cli.processes only at the top: this file is also the servers' watchdog.
from vcmt_cli.processes import free_port, port_open, signal_group

# Two workers of one core and 1 GiB each: every executor is its own JVM (docs/adapters.md#how-the-spark-targets-work).
DEFAULT_MASTER = "local-cluster[2,1,1024]"


class SparkServerError(RuntimeError):
    """A server did not start (or stopped); the message ends with its log tail."""


def quiet_spark(log_file: Path) -> Path:
    """Send Spark's JVM log (WARN and above) and pyspark's / py4j's Python loggers to `log_file`, as the
    `vcmt_spark` adapter does by default (dbt.adapters.vcmt_spark.spark_log), and the lines the JVM writes
    outside its log too (the JDK's incubator-module notice): this process's file descriptor 2 is pointed
    at `log_file`, while Python's own `sys.stderr` keeps writing to the console. Call before the first
    SparkSession of the process starts its JVM. Returns `log_file`."""
    from dbt.adapters.vcmt_spark.spark_log import log_to_file

    log_to_file(log_file)
    sys.stderr.flush()
    console = os.fdopen(os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding, errors="backslashreplace")
    log_fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stderr = console
    return log_file


@dataclass
class SparkServer:
    kind: str
    port: int
    root: Path
    log: Path
    process: subprocess.Popen
    conf: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """`sc://127.0.0.1:PORT` for Spark Connect; `127.0.0.1:PORT` for Thrift."""
        return f"sc://127.0.0.1:{self.port}" if self.kind == "connect" else f"127.0.0.1:{self.port}"

    @property
    def executor_logs(self) -> list[Path]:
        """stderr of each executor JVM (local-cluster workers keep them under work/<app>/<executor>/)."""
        return sorted((self.root / "home" / "work").glob("*/*/stderr"))

    def log_tail(self, lines: int = 60) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log written)"
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, timeout: float = 180) -> None:
        """Wait until the server listens; raise SparkServerError with its log tail if it exits or times out."""
        deadline = time.monotonic() + timeout
        while not port_open("127.0.0.1", self.port):
            if not self.alive():
                raise SparkServerError(
                    f"Spark {self.kind} server exited with code {self.process.returncode} before listening on "
                    f"127.0.0.1:{self.port}; log {self.log}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise SparkServerError(
                    f"Spark {self.kind} server did not listen on 127.0.0.1:{self.port} within {timeout:.0f}s; "
                    f"log {self.log}:\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30) -> None:
        """Stop the server and its executors (the watchdog's whole process group)."""
        if self.process.poll() is None:
            self.process.terminate()  # the watchdog stops the server, then ends the group
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

    def __enter__(self) -> SparkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def launch_server(
    kind: str,
    root: Path,
    *,
    master: str = DEFAULT_MASTER,
    max_seconds: float = 3600,
    conf: dict[str, str] | None = None,
) -> SparkServer:
    """Launch a `connect` or `thrift` server under `root`, without waiting for it (see `start_server`)."""
    from dbt.adapters.vcmt_spark.spark_log import write_log_config

    from vcmt_cli.spark_server import SERVER_CLASSES, server_command, server_env, spark_home

    if kind not in SERVER_CLASSES:
        raise ValueError(f"unknown Spark server kind {kind!r}: use one of {sorted(SERVER_CLASSES)}")
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    conf_dir = write_log_config(root / "conf", None)
    home = spark_home(root, conf_dir)
    port = free_port()
    log = root / "server.log"
    env = server_env(home, conf_dir)
    cmd = server_command(kind, home, port, root, master, conf or {})
    with open(log, "ab") as out:
        process = subprocess.Popen(
            # By file path: the watchdog needs only the standard library, whatever the cwd and sys.path.
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--watch",
                str(os.getpid()),
                "--max-seconds",
                str(max_seconds),
                "--",
                *cmd,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=root,
            start_new_session=True,  # the watchdog leads a process group: server and executors are in it
        )
    return SparkServer(kind, port, root, log, process, conf or {})


def start_server(
    kind: str,
    root: Path,
    *,
    master: str = DEFAULT_MASTER,
    timeout: float = 180,
    max_seconds: float = 3600,
    conf: dict[str, str] | None = None,
) -> SparkServer:
    """Start a `connect` or `thrift` server under `root` and wait (at most `timeout` s) until it listens.

    Its log (driver and server) is `root/server.log`; executors log under
    `root/home/work/`. It stops when `stop()` is called, when this process
    ends, or after `max_seconds`.
    """
    server = launch_server(kind, root, master=master, max_seconds=max_seconds, conf=conf)
    server.wait_ready(timeout)
    return server


def _watch(parent: int, max_seconds: float, cmd: list[str]) -> int:
    """Run `cmd` in this process group; end the group when `parent` is gone, on SIGTERM, or after max_seconds."""
    stop = {"why": ""}

    def on_term(signum: int, frame: object) -> None:
        stop["why"] = f"signal {signum}"

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    child = subprocess.Popen(cmd)
    started = time.monotonic()
    while child.poll() is None and not stop["why"]:
        if os.getppid() != parent:
            stop["why"] = f"parent process {parent} ended"
        elif time.monotonic() - started > max_seconds:
            stop["why"] = f"ran longer than {max_seconds:.0f}s"
        time.sleep(0.5)
    if child.poll() is not None:
        return child.returncode
    print(f"vcmt_lab.spark_local_cluster watchdog: stopping the server ({stop['why']})", file=sys.stderr, flush=True)
    # The server first (it stops its workers and their executors), then whatever is left of the group.
    child.terminate()
    try:
        child.wait(20)
    except subprocess.TimeoutExpired:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGKILL)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt_lab.spark_local_cluster")
    parser.add_argument("--watch", type=int, required=True, help="pid whose end stops the command")
    parser.add_argument("--max-seconds", type=float, default=3600)
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    return _watch(args.watch, args.max_seconds, cmd)


if __name__ == "__main__":
    sys.exit(main())
