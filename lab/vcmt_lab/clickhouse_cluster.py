"""A real two-shard ClickHouse cluster on 127.0.0.1, with a stand-in for its DDL queue.

Each shard is one served node (vcmt_lab.clickhouse_server), and every node's
`config.xml` carries the same `remote_servers` cluster (one replica per shard,
`internal_replication` true) and its own `macros`. Distributed tables,
`distributed_foreground_insert`, `clusterAllReplicas`, `GLOBAL IN` and FINAL
through a Distributed table are the server's own code across the nodes.

What is NOT the server's own code: ClickHouse in chDB's local-server mode
refuses `ON CLUSTER` (replicated DDL needs Keeper and an interserver address,
code 392), and its Replicated tables stay read-only. So clients reach the
cluster through `DdlFanOut`, an HTTP proxy in front of the first node that
STANDS IN FOR THE DISTRIBUTED DDL QUEUE:

- a statement with `ON CLUSTER <name>` (the clause right after the object's
  name, naming this cluster; any other name fails as on a server) runs on
  every node, one after another and one such statement at a time, without
  that clause. It fails if any node fails, naming that node and those that
  had already run it (a real queue would retry a node that comes back;
  here the client sees the error and runs again);
- in such a statement's CREATE or ATTACH, a `Replicated*MergeTree` table
  engine (the word after `ENGINE`) becomes its plain engine (no Keeper), its
  path and replica arguments dropped;
- everything else is forwarded to the first node byte for byte.

Both rewrites work on the package's tokens (`dbt.adapters.chdb.statements`,
ClickHouse's lexical rules): string literals, quoted names, heredocs and
comments are never changed. What stays untested because of the
stand-in: ON CLUSTER through Keeper, replication, failover between replicas.

    with two_shard_cluster(folder) as cluster:
        cluster.http_port, cluster.client(), cluster.nodes[1].kill() ...
"""

from __future__ import annotations

import contextlib
import http.client
import re
import sys
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dbt.adapters.chdb.statements import Token, iter_tokens, tokens

from vcmt_lab.clickhouse_server import HOST, START_TIMEOUT_S, ServedNode, ServedNodeError, Shard, free_port

CLUSTER = "vcmt_two_shards"
# How long the proxy waits for a node's answer to one statement (a load's INSERT can take a while).
NODE_TIMEOUT_S = 600

# -- ON CLUSTER statements -------------------------------------------------------------------------------------------

# Statements that may carry ON CLUSTER: right after the object's name, before any column list, query or condition.
_DDL_WORDS = (
    "CREATE",
    "DROP",
    "ALTER",
    "RENAME",
    "EXCHANGE",
    "TRUNCATE",
    "ATTACH",
    "DETACH",
    "OPTIMIZE",
    "DELETE",
    "UPDATE",
    "GRANT",
    "REVOKE",
    "SYSTEM",
)
_CLAUSE_ENDS = ("AS", "SELECT", "WHERE", "WITH")
_REPLICATED = re.compile(r"Replicated(\w*MergeTree)")


def _code_positions(toks: list[Token]) -> list[int]:
    return [i for i, t in enumerate(toks) if t.code]


def _first_word(sql: str) -> Token | None:
    """The statement's first code token (from its start only: an INSERT's data is never tokenized)."""
    return next((t for t in iter_tokens(sql) if t.code), None)


def _unquoted(token: Token) -> str:
    if token.kind in ("quoted", "string"):
        quote = token.text[0]
        return token.text[1:-1].replace(quote * 2, quote).replace("\\" + quote, quote)
    return token.text


def fan_out_statement(sql: str) -> tuple[str, str] | None:
    """(the cluster it names, the statement each node runs) for an `ON CLUSTER` statement: the clause removed,
    and in a CREATE or ATTACH a `Replicated*MergeTree` engine made plain; None when `sql` is not one."""
    first = _first_word(sql)
    if first is None or not first.is_word(*_DDL_WORDS):
        return None
    toks = tokens(sql)
    code = _code_positions(toks)
    for n, i in enumerate(code[:-2]):
        if toks[i].text in ("(", "=") or toks[i].is_word(*_CLAUSE_ENDS):
            return None  # past the object's name: an `on cluster` further on is not the clause
        name = toks[code[n + 2]]
        if toks[i].is_word("ON") and toks[code[n + 1]].is_word("CLUSTER") and name.kind in ("word", "quoted", "string"):
            # The clause and the spaces inside it (the text around it, comments included, stays as it was).
            drop = set(range(i, code[n + 2] + 1))
            kept = [t for j, t in enumerate(toks) if j not in drop]
            return _unquoted(name), "".join(t.text for t in _plain_engines(kept))
    return None


def _plain_engines(toks: list[Token]) -> list[Token]:
    """In a CREATE or ATTACH, the table engine (the word after `ENGINE [=]`):
    `ReplicatedXMergeTree('path', 'replica', args...)` -> `XMergeTree(args...)`. Other path arguments than two
    string literals are left for the node to refuse."""
    code = _code_positions(toks)
    if not code or not toks[code[0]].is_word("CREATE", "ATTACH"):
        return toks
    out = list(toks)
    drop: set[int] = set()
    for n, i in enumerate(code):
        before = [out[j] for j in code[max(0, n - 2) : n]]
        after_engine = (before and before[-1].is_word("ENGINE")) or (
            len(before) == 2 and before[0].is_word("ENGINE") and before[1].text == "="
        )
        m = _REPLICATED.fullmatch(out[i].text) if out[i].kind == "word" and after_engine else None
        if not m:
            continue
        out[i] = Token("word", m.group(1))
        following = [out[j] for j in code[n + 1 : n + 6]]
        texts = [t.text for t in following]
        if (
            len(following) >= 4
            and texts[0] == "("
            and following[1].kind == "string"
            and texts[2] == ","
            and following[3].kind == "string"
        ):
            # Drop the path and the replica name, and the comma after them if more arguments follow.
            end = n + 4 + (1 if len(texts) > 4 and texts[4] == "," else 0)
            drop.update(range(code[n + 2], code[end] + 1))
    return [t for j, t in enumerate(out) if j not in drop]


# -- the proxy -------------------------------------------------------------------------------------------------------

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "content-length",
    "host",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An answer goes out as two writes (headers, then body): with Nagle's algorithm on, the body waits for the
    # client's delayed ACK of the headers, 40 ms on Linux, on every statement through the fan-out.
    disable_nagle_algorithm = True
    server: _ProxyServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._serve(b"")

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else self._chunked_body()
        self._serve(body)

    def _chunked_body(self) -> bytes:
        if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
            return b""
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self._skip_trailers()
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _skip_trailers(self) -> None:
        while self.rfile.readline().strip():
            pass

    def _serve(self, body: bytes) -> None:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        per_node = self._fanned_out(body)
        if per_node is None:
            answer = self.server.forward(self.server.nodes[0], self.command, self.path, headers, body)
        else:
            answer = self._run_on_every_node(headers, *per_node)
        status, reply_headers, payload = answer
        self.send_response(status)
        for k, v in reply_headers:
            if k.lower() not in _HOP_BY_HOP | {"server", "date"}:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _run_on_every_node(
        self, headers: dict[str, str], cluster: str, path: str, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """An ON CLUSTER statement on every node in order, one such statement at a time (as a queue orders them);
        the first node's answer, or the first failure, naming its node and the nodes that already ran it."""
        if cluster != self.server.cluster:
            return _error(
                701,
                f"Requested cluster '{cluster}' not found (the test cluster is "
                f"'{self.server.cluster}'). (CLUSTER_DOESNT_EXIST)",
            )
        with self.server.ddl_lock:
            first = None
            for n, node in enumerate(self.server.nodes):
                status, reply_headers, payload = self.server.forward(node, self.command, path, headers, body)
                if status != 200:
                    done = ", ".join(f"{HOST}:{m.tcp_port}" for m in self.server.nodes[:n]) or "none"
                    note = (
                        f"\n(vcmt test cluster: ON CLUSTER statement failed on node {HOST}:{node.tcp_port}; "
                        f"nodes that had already run it: {done})\n"
                    ).encode()
                    return status, reply_headers, payload + note
                first = first or (status, reply_headers, payload)
            return first

    def _fanned_out(self, body: bytes) -> tuple[str, str, bytes] | None:
        """(cluster, path, body) each node gets for an ON CLUSTER statement, or None to forward as is."""
        if self.headers.get("Content-Encoding"):
            return None  # compressed data: an INSERT's rows, never DDL
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        in_url = next((v for k, v in params if k == "query"), None)
        try:
            text = body.decode()
        except UnicodeDecodeError:
            return None
        # ClickHouse's HTTP interface: the `query` parameter, then the body, make the statement.
        statement = (in_url + ("\n" + text if text else "")) if in_url is not None else text
        found = fan_out_statement(statement)
        if found is None:
            return None
        cluster, rewritten = found
        rest = [(k, v) for k, v in params if k != "query"]
        path = urllib.parse.urlunsplit(("", "", url.path, urllib.parse.urlencode(rest), ""))
        return cluster, path, rewritten.encode()


def _error(code: int, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """An answer as a node gives it for a failed query."""
    return (
        500,
        [("Content-Type", "text/plain; charset=UTF-8"), ("X-ClickHouse-Exception-Code", str(code))],
        f"Code: {code}. DB::Exception: {message}\n".encode(),
    )


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, nodes: Sequence[ServedNode], cluster: str, ddl_lock: threading.Lock | None = None):
        super().__init__((HOST, 0), _Handler)
        self.nodes = list(nodes)
        self.cluster = cluster
        # One queue for the cluster: every fan-out in front of it runs ON CLUSTER statements one at a time.
        self.ddl_lock = ddl_lock or threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away before its answer (a connection the fault harness cut) is no error of the
        fan-out's; anything else is printed as usual."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)

    @staticmethod
    def forward(
        node: ServedNode, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(HOST, node.http_port, timeout=NODE_TIMEOUT_S)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        except (OSError, http.client.HTTPException) as ex:
            return _error(
                210,
                f"vcmt test cluster: node {HOST}:{node.tcp_port} (HTTP port {node.http_port}) did not "
                f"answer ({ex!r}). (NETWORK_ERROR)",
            )
        finally:
            conn.close()


@dataclass
class DdlFanOut:
    """The proxy, serving on 127.0.0.1:`port` from a thread of this process until `stop`."""

    nodes: Sequence[ServedNode]
    cluster: str
    ddl_lock: threading.Lock | None = field(default=None, repr=False)
    server: _ProxyServer | None = field(default=None, repr=False)
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_address[1]

    def start(self) -> DdlFanOut:
        self.server = _ProxyServer(self.nodes, self.cluster, self.ddl_lock)
        self.thread = threading.Thread(target=self.server.serve_forever, name="vcmt-ddl-fan-out", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


# -- the cluster -----------------------------------------------------------------------------------------------------


@dataclass
class Cluster:
    """Served nodes forming `name` (one shard each) and the DDL fan-out in front of the first."""

    name: str
    nodes: list[ServedNode]
    fan_out: DdlFanOut

    @property
    def http_port(self) -> int:
        """Where dbt and the tests connect (over HTTP): the fan-out."""
        return self.fan_out.port

    def dbt_output(self, schema: str, driver: str = "http", **extra: Any) -> dict[str, Any]:
        """A dbt-clickhouse profile output on this cluster: `type: clickhouse`, HTTP through the fan-out (the
        only driver it takes), `cluster` set."""
        if driver != "http":
            raise ValueError(f"the test cluster is reached over HTTP (its DDL fan-out); got driver {driver!r}")
        return {
            "type": "clickhouse",
            "driver": "http",
            "host": HOST,
            "port": self.http_port,
            "user": "default",
            "password": "",
            "schema": schema,
            "threads": 1,
            "cluster": self.name,
            **extra,
        }

    def entry(self, node: int) -> DdlFanOut:
        """Another way in, as behind a load balancer: a fan-out that forwards everything but ON CLUSTER statements
        to node `node` (from 0), sharing the DDL queue of the first. The caller stops it."""
        others = [n for i, n in enumerate(self.nodes) if i != node]
        assert self.fan_out.server is not None
        return DdlFanOut([self.nodes[node], *others], self.name, self.fan_out.server.ddl_lock).start()

    def client(self, database: str | None = None, **kwargs: Any):
        """A clickhouse-connect client through the fan-out (queries run on the first node)."""
        import clickhouse_connect

        return clickhouse_connect.get_client(host=HOST, port=self.http_port, database=database or "default", **kwargs)

    def stop(self) -> None:
        self.fan_out.stop()
        for node in self.nodes:
            node.stop()


def start_cluster(
    folder: Path, shards: int = 2, name: str = CLUSTER, timeout: float = START_TIMEOUT_S, attempts: int = 3
) -> Cluster:
    """`shards` nodes in `folder`/shard_<n> forming cluster `name`, and the DDL fan-out. The ports of every node
    are in every node's config, so all are picked first; a port taken meanwhile makes a node fail, and the whole
    cluster is tried again on other ports (`attempts` in all)."""
    for attempt in range(attempts):
        ports = [(free_port(), free_port()) for _ in range(shards)]
        layout = {name: [Shard(((HOST, tcp),)) for tcp, _ in ports]}
        nodes = [
            ServedNode(folder / f"shard_{n + 1}", tcp, http, layout, {"shard": str(n + 1), "replica": "r1"})
            for n, (tcp, http) in enumerate(ports)
        ]
        try:
            for node in nodes:
                node.start(timeout)
        except ServedNodeError:
            for node in nodes:
                node.stop()
            if attempt == attempts - 1:
                raise
            continue
        return Cluster(name, nodes, DdlFanOut(nodes, name).start())
    raise AssertionError("unreachable")


@contextlib.contextmanager
def two_shard_cluster(folder: Path, **kwargs: Any) -> Iterator[Cluster]:
    """A two-shard cluster for the duration of a `with` block, every process stopped in every case."""
    cluster = start_cluster(folder, **kwargs)
    try:
        yield cluster
    finally:
        cluster.stop()
