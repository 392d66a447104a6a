"""`vcmt-spark-server`: a Spark Connect server in the foreground that a `method: connect` client reaches, and
that stops on Ctrl-C; its refusals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from vcmt_lab.spark_local_cluster import free_port

COMMAND = str(Path(sys.executable).with_name("vcmt-spark-server"))
READY_TIMEOUT_S = 300


def _reader(proc: subprocess.Popen, lines: list[str]) -> threading.Thread:
    thread = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    thread.start()
    return thread


def test_serves_a_connect_client_and_stops_on_ctrl_c(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [COMMAND, "--dir", str(tmp_path / "srv"), "--port", str(port), "--master", "local[1]"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = _reader(proc, lines)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not any("ready after" in line for line in lines) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert any(f"method: connect, host: 127.0.0.1, port: {port}" in line for line in lines), "".join(lines)
        client = subprocess.run(
            [
                sys.executable,
                "-c",
                "from pyspark.sql import SparkSession\n"
                f"s = SparkSession.builder.remote('sc://127.0.0.1:{port}').getOrCreate()\n"
                "print('answer', s.sql('select 40 + 2 as x').collect()[0].x)\n"
                "print('listing', s.conf.get('spark.sql.sources.parallelPartitionDiscovery.threshold'))",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "answer 42" in client.stdout, client.stdout[-2000:] + client.stderr[-2000:]
        # A local master lists a read's folders on the driver, not in a Spark job per 32 batch folders.
        assert "listing 1000000" in client.stdout, client.stdout[-2000:]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(90) == 0
        reader.join(10)
        assert "vcmt-spark-server: stopped" in "".join(lines)
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, "the server still listens after Ctrl-C"
    finally:
        if proc.poll() is None:
            proc.kill()  # the server gets SIGTERM from the kernel (parent-death signal)
            proc.wait(30)


def test_refuses_a_port_in_use_and_a_bad_setting(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(
            [COMMAND, "--dir", str(tmp_path / "srv"), "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert run.returncode == 2
    assert f"127.0.0.1:{port} is already in use" in run.stderr and "--port" in run.stderr
    run = subprocess.run(
        [COMMAND, "--dir", str(tmp_path / "srv"), "--conf", "spark.driver.memory"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0 and "--conf takes key=value" in run.stderr
    run = subprocess.run(
        [COMMAND, "--dir", str(tmp_path / "srv")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "JAVA_HOME": str(tmp_path / "no-java")},
    )
    assert run.returncode == 2
    assert f"Spark needs Java 17 or later, and JAVA_HOME={tmp_path / 'no-java'} has no bin/java" in run.stderr
    assert not (tmp_path / "srv").exists()


def test_a_kept_state_folder_is_relinked_to_this_pyspark(tmp_path):
    """`--dir` outlives environments: links to a deleted or older PySpark are replaced, not reused or fatal."""
    from vcmt_cli.spark_server import spark_home, spark_install

    home = tmp_path / "home"
    home.mkdir()
    (home / "jars").symlink_to(tmp_path / "gone" / "jars")  # a PySpark since deleted
    (home / "bin").symlink_to(tmp_path)  # another install
    (tmp_path / "conf").mkdir()
    assert spark_home(tmp_path, tmp_path / "conf") == home
    assert (home / "jars").resolve() == spark_install() / "jars" and (home / "bin").resolve() == spark_install() / "bin"
    assert (home / "conf").resolve() == tmp_path / "conf"


def test_without_the_spark_extra_it_says_what_to_install():
    """The base install (no `[spark]` extra) creates the command too: it printed a traceback ending in
    ModuleNotFoundError. Here dbt-spark is made unimportable, as on that install."""
    probe = (
        "import sys; sys.modules['dbt.adapters.spark'] = None; "
        "from vcmt_cli.spark_server import main; sys.exit(main(['--help']))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "no module `dbt.adapters.spark" in run.stderr and '"./vcmt[spark]"' in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not run.stdout
