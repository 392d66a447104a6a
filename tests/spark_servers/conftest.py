"""The Spark Connect and Thrift servers the tests in this folder run on, owned by one session fixture.

Both start once per pytest session, side by side, from PySpark's own install
(vcmt_lab.spark_local_cluster): 127.0.0.1 only, free ports, master
local-cluster[2,1,1024] (two executor JVMs each), a watchdog that stops them
if pytest dies, and bounded waits. A server that does not come up fails the
tests with its log tail; nothing here skips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vcmt_lab.spark_local_cluster import SparkServer, SparkServerError, launch_server

START_TIMEOUT_S = 300  # two servers starting at once on 2 shared cores
MAX_LIFETIME_S = 3600  # the watchdog's hard stop, whatever happens to pytest


@pytest.fixture(scope="session")
def spark_servers(tmp_path_factory) -> Iterator[dict[str, SparkServer]]:
    root = tmp_path_factory.mktemp("spark_servers")
    servers: dict[str, SparkServer] = {}
    try:
        for kind in ("connect", "thrift"):  # both start at once; then both are waited for
            servers[kind] = launch_server(kind, root / kind, max_seconds=MAX_LIFETIME_S)
        for server in servers.values():
            server.wait_ready(START_TIMEOUT_S)
        yield servers
    except SparkServerError as e:
        pytest.fail(str(e), pytrace=False)
    finally:
        for server in servers.values():
            server.stop()
