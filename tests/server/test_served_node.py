"""The served node (vcmt_lab.clickhouse_server) the server legs of the suite run on.

It rests on chDB's internal `_chdb.query` entry point and clickhouse-local's
`SYSTEM START LISTEN`: these tests fail loudly if a chDB upgrade stops a node
from listening, serving both protocols, keeping its data or stopping.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import chdb
import clickhouse_driver
import pytest

from vcmt_lab.clickhouse_server import HOST, SERVER_PROFILE, config_xml, served_node, start_node


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"


def test_both_protocols_answer_on_loopback_with_the_embedded_engines_version(tmp_path):
    with served_node(tmp_path / "n") as node:
        http = node.client()
        native = clickhouse_driver.Client(HOST, port=node.tcp_port)
        version = http.command("select version()")
        assert native.execute("select version()") == [(version,)]
        assert version == chdb.engine_version
        # The server's defaults, not clickhouse-local's (asked natively: clickhouse-connect sends settings of
        # its own with each query).
        for name, value in SERVER_PROFILE.items():
            assert native.execute(f"select value from system.settings where name = '{name}'") == [(str(value),)], name
        # Loopback only: no other address of this machine reaches the node.
        for family, _, _, _, address in socket.getaddrinfo(socket.gethostname(), node.http_port):
            if family == socket.AF_INET and not address[0].startswith("127."):
                with pytest.raises(OSError), socket.create_connection(address, timeout=1):
                    pass


def test_each_connection_is_its_own_session(tmp_path):
    with served_node(tmp_path / "n") as node:
        one, two = node.client(), node.client()
        one.command("create temporary table t (x UInt8)")
        one.command("insert into t values (1)")
        assert one.command("select count() from t") == 1
        with pytest.raises(Exception, match="UNKNOWN_TABLE|doesn't exist|does not exist"):
            two.command("select count() from t")


def test_data_survives_a_stop_and_a_kill(tmp_path):
    node = start_node(tmp_path / "n")
    try:
        node.client().command("create table kept (x UInt64) engine = MergeTree order by x")
        node.client().command("insert into kept select number from numbers(1000)")
        node.stop()
        node.start()
        node.client().command("insert into kept select number from numbers(1000, 10)")
        node.kill()
        assert not node.running()
        node.start()
        assert node.client().command("select count() from kept") == 1010
    finally:
        node.stop()
    assert not node.running()


def test_a_node_stops_when_the_process_that_started_it_dies(tmp_path):
    """A test process killed half-way must not leave a node running (the kernel's parent-death signal)."""
    starter = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from vcmt_lab.clickhouse_server import start_node
        node = start_node(Path({str(tmp_path / "n")!r}))
        print(node.pid, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())
        assert _alive(pid)
    finally:
        proc.kill()
        proc.wait(10)
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid), f"served node {pid} outlived the process that started it"


def test_the_readme_runner_finds_the_environments_dbt_with_none_activated(tmp_path):
    """README's "No server at hand?": `.venv/bin/python -m vcmt_lab.clickhouse_server run <folder> -- dbt ...`
    from a shell with no environment activated. The command failed with FileNotFoundError: `dbt` is only in
    the interpreter's own bin folder. It now runs, and sees the node in its environment; a command that exists
    nowhere exits 127, naming it."""
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    probe = "import os; print(os.environ['CLICKHOUSE_HOST'], os.environ['CLICKHOUSE_PORT'])"
    run = subprocess.run(
        [sys.executable, "-m", "vcmt_lab.clickhouse_server", "run", str(tmp_path / "n"), "--", "dbt", "--help"],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Usage: dbt" in run.stdout, run.stdout[-2000:]
    # The command sees the node (the environment's python, found the same way).
    run = subprocess.run(
        [sys.executable, "-m", "vcmt_lab.clickhouse_server", "run", str(tmp_path / "n"), "--", "python", "-c", probe],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout.splitlines()[-1].split()[0] == HOST, run.stdout + run.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "vcmt_lab.clickhouse_server", "run", str(tmp_path / "n"), "--", "no-such-command-x"],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert missing.returncode == 127 and "no command `no-such-command-x`" in missing.stderr, missing.stderr[-2000:]
    assert "Traceback" not in missing.stderr


@pytest.mark.parametrize("name", ["default", "a-b", "<x>", ""])
def test_a_user_the_node_cannot_name_in_users_xml_is_refused(name):
    """config_xml's `users` become users.xml elements: a name that is not a plain XML name, or `default` (the
    node's own user, which a second element would shadow), is refused, naming it."""
    with pytest.raises(ValueError, match=f"users: {name!r} must be a plain name"):
        config_xml(1, 2, users={name: []})


def test_a_users_grants_are_written_escaped():
    _, users = config_xml(1, 2, users={"reader": ["GRANT SELECT ON db.t", "GRANT SELECT ON db.`a<b`"]})
    assert "<reader><password></password>" in users
    assert "<grants><query>GRANT SELECT ON db.t</query><query>GRANT SELECT ON db.`a&lt;b`</query></grants>" in users
