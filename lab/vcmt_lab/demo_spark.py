"""make demo's Spark side: which target stages the lake, and where Spark's own log goes.

    --spark session   local Spark in the demo's process (the `spark` target, default)
    --spark connect   a Spark Connect server (`spark_connect` target)
    --spark thrift    a Spark Thrift server (`spark_thrift` target; SQL models only)
    --spark-server HOST:PORT   use that running server instead of starting one here

Without --spark-server, connect and thrift start a server from PySpark's own
install on 127.0.0.1 (vcmt_lab.spark_local_cluster) with separate executor JVMs,
and stop it when the demo ends. Spark's log goes to <work>/logs/spark.log
(a started server's to its own server.log); the report names both.
"""

from __future__ import annotations

import argparse
import atexit
import os
from dataclasses import dataclass
from pathlib import Path

from vcmt_lab.spark_local_cluster import SparkServer, quiet_spark, start_server

TARGETS = {"session": "spark", "connect": "spark_connect", "thrift": "spark_thrift"}
# The profile variables (profiles.yml) that name each server.
_HOST_PORT_ENV = {
    "connect": ("SPARK_CONNECT_HOST", "SPARK_CONNECT_PORT"),
    "thrift": ("SPARK_THRIFT_HOST", "SPARK_THRIFT_PORT"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spark",
        choices=sorted(TARGETS),
        default="session",
        help="where the staging runs: local session, Spark Connect or Thrift server",
    )
    parser.add_argument(
        "--spark-server",
        metavar="HOST:PORT",
        help="a running Spark Connect/Thrift server to use instead of starting one",
    )


@dataclass
class SparkSide:
    kind: str
    target: str
    log: Path
    server: SparkServer | None = None
    address: str = ""

    def target_for(self, local_target: str) -> str:
        """The dbt target that stages: on the local session the staging's own (`spark` for SQL models,
        `vcmt_spark` for Python ones); on a server, the server's target."""
        return local_target if self.kind == "session" else self.target

    def describe(self) -> str:
        where = {"session": "local session in this process"}.get(self.kind, f"{self.kind} server {self.address}")
        if self.server is not None:
            where += f" (started here, separate executors; server log {self.server.log})"
        return f"Spark: {where}; Spark's log: {self.log}"


def setup(args: argparse.Namespace, work: Path) -> SparkSide:
    """Route Spark's log to a file, and for connect/thrift point the profile at a server (started if needed)."""
    log = quiet_spark(work / "logs" / "spark.log")
    side = SparkSide(args.spark, TARGETS[args.spark], log)
    if args.spark == "session":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the local session's driver listens on loopback only
        return side
    if args.spark_server:
        host, _, port = args.spark_server.rpartition(":")
        if not host or not port.isdigit():
            raise SystemExit(f"demo: --spark-server must be HOST:PORT, got {args.spark_server!r}")
    else:
        print(f"    starting a Spark {args.spark} server (local-cluster, 2 executor JVMs)", flush=True)
        side.server = start_server(args.spark, work / f"spark-{args.spark}-server")
        atexit.register(side.server.stop)
        host, port = "127.0.0.1", str(side.server.port)
    host_env, port_env = _HOST_PORT_ENV[args.spark]
    os.environ[host_env], os.environ[port_env] = host, port
    side.address = f"{host}:{port}"
    return side
