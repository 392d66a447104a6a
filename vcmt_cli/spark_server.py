"""A long-lived Spark Connect server for the staging models, started once (docs/adapters.md).

A `method: session` target starts Spark inside every `dbt run`: 13 s to a
minute before the first model runs, even with nothing new to stage. A Spark
Connect server pays that once; each run is then a client (`method: connect`).

    vcmt-spark-server                      # sc://127.0.0.1:15002, state in ./.vcmt-spark
    vcmt-spark-server --port 15003 --master 'local[2]' --conf spark.driver.memory=4g

It runs in the foreground from PySpark's own jars (no Spark install needed),
logs Spark's warnings to the console, says when it is ready and which profile
lines reach it, and stops on Ctrl-C or SIGTERM. Its warehouse and Hive
metastore live under `--dir`, so tables survive a restart.

The server command (`server_command`) is shared with the lab, which starts
the same servers for the tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from vcmt_cli.processes import die_with_parent, port_open, signal_group

try:  # the `[spark]` extra: dbt-spark (which the vcmt_spark adapter extends) and PySpark (its jars)
    from dbt.adapters.vcmt_spark.credentials import LOCAL_SESSION_DEFAULTS, is_local_master
    from dbt.adapters.vcmt_spark.java import java_problem
    from dbt.adapters.vcmt_spark.spark_log import write_log_config
except ModuleNotFoundError as missing:
    _WITHOUT_SPARK: ModuleNotFoundError | None = missing
else:
    _WITHOUT_SPARK = None
SPARK_EXTRA_HINT = (
    "vcmt-spark-server needs vcmt's Spark staging: install it with the `[spark]` extra, "
    '`pip install -c vcmt/constraints.txt "./vcmt[spark]"` (README, Quick start, "1. Install")'
)

SERVER_CLASSES = {
    "connect": "org.apache.spark.sql.connect.service.SparkConnectServer",
    "thrift": "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
}
DEFAULT_PORT = 15002
READY_TIMEOUT_S = 300
STOP_TIMEOUT_S = 30


def spark_install() -> Path:
    """PySpark's install folder (its `bin/`, `sbin/` and `jars/` are a Spark distribution)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_home(root: Path, conf_dir: Path) -> Path:
    """A SPARK_HOME of links to PySpark's install, so the workers' folders (`work/`) land under `root`."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    install = spark_install()
    links = {name: install / name for name in ("bin", "sbin", "jars", "python") if (install / name).exists()}
    for name, target in {**links, "conf": conf_dir}.items():
        # A folder kept across runs may link to an older or deleted PySpark (a rebuilt environment): relink.
        link = home / name
        if link.is_symlink() and os.readlink(link) != str(target):
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(target)
    return home


def server_command(
    kind: str, home: Path, port: int, root: Path, master: str, conf: dict[str, str], host: str = "127.0.0.1"
) -> list[str]:
    """spark-submit of a `connect` or `thrift` server listening on host:port, its state under `root`."""
    settings = {
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.executor.memory": "512m",
        "spark.local.dir": str(root / "local"),
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        # A local master lists a read's folders on the driver, as a `method: session` does: under Spark's
        # default a staging run listed its topic's batch folders in a Spark job once there were more than 32
        # (docs/adapters.md#how-the-spark-targets-work). --conf sets it otherwise.
        **(LOCAL_SESSION_DEFAULTS if is_local_master(master) else {}),
        **(
            {"spark.connect.grpc.binding.address": host, "spark.connect.grpc.binding.port": str(port)}
            if kind == "connect"
            else {}
        ),
        **conf,
    }
    cmd = [
        str(home / "bin" / "spark-submit"),
        "--master",
        master,
        "--class",
        SERVER_CLASSES[kind],
        "--name",
        f"vcmt {kind} server",
    ]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    if kind == "thrift":
        cmd += [
            "spark-internal",
            "--hiveconf",
            f"hive.server2.thrift.port={port}",
            "--hiveconf",
            f"hive.server2.thrift.bind.host={host}",
        ]
    return cmd


def server_env(home: Path, conf_dir: Path) -> dict[str, str]:
    """The environment a server runs in: this PySpark's install, the given conf, never a Connect client."""
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return env


def _conf(pairs: Sequence[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"vcmt-spark-server: --conf takes key=value, e.g. spark.driver.memory=4g; got {pair!r}")
        conf[key.strip()] = value
    return conf


def main(argv: Sequence[str] | None = None) -> int:
    if _WITHOUT_SPARK is not None:
        print(f"vcmt-spark-server: no module `{_WITHOUT_SPARK.name}`. {SPARK_EXTRA_HINT}.", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(
        prog="vcmt-spark-server",
        description="Run a Spark Connect server in the foreground for `method: connect` targets (Ctrl-C stops it).",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(".vcmt-spark"),
        help="where the server keeps its warehouse, Hive metastore and scratch (default .vcmt-spark)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting of the server, repeatable"
    )
    args = parser.parse_args(argv)
    conf = _conf(args.conf)
    if (problem := java_problem()) is not None:
        print(f"vcmt-spark-server: {problem}", file=sys.stderr)
        return 2
    if port_open(args.host, args.port):
        print(
            f"vcmt-spark-server: {args.host}:{args.port} is already in use (another server?). Stop it, or pass "
            "--port with a free port (and the same port in the profile).",
            file=sys.stderr,
        )
        return 2
    root = args.dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    conf_dir = write_log_config(root / "conf", None, level="warn")
    home = spark_home(root, conf_dir)
    cmd = server_command("connect", home, args.port, root, args.master, conf, host=args.host)
    print(
        f"vcmt-spark-server: starting a Spark Connect server on {args.host}:{args.port} (master {args.master}; "
        f"warehouse and metastore in {root}); Spark's warnings follow.",
        flush=True,
    )
    process = subprocess.Popen(
        cmd, env=server_env(home, conf_dir), cwd=root, start_new_session=True, preexec_fn=die_with_parent
    )
    stopping = {"why": ""}

    def on_signal(signum: int, frame: object) -> None:
        stopping["why"] = signal.Signals(signum).name

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    started, ready = time.monotonic(), False
    while process.poll() is None and not stopping["why"]:
        if not ready and port_open(args.host, args.port):
            ready = True
            print(
                f"vcmt-spark-server: ready after {time.monotonic() - started:.0f} s. Profile lines: "
                f"type: vcmt_spark, method: connect, host: {args.host}, port: {args.port}. Ctrl-C stops it.",
                flush=True,
            )
        elif not ready and time.monotonic() - started > READY_TIMEOUT_S:
            stopping["why"] = f"not listening after {READY_TIMEOUT_S} s"
        time.sleep(0.5)
    if process.poll() is not None and not stopping["why"]:
        print(
            f"vcmt-spark-server: the server exited with code {process.returncode}; see Spark's messages above.",
            file=sys.stderr,
        )
        return process.returncode or 1
    print(f"vcmt-spark-server: stopping ({stopping['why']})", flush=True)
    # The server's process group: the server and any executors it started.
    signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        signal_group(process.pid, signal.SIGKILL)
        process.wait(10)
    print("vcmt-spark-server: stopped", flush=True)
    return 0 if ready else 1


if __name__ == "__main__":
    raise SystemExit(main())
