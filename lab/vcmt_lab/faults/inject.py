"""The child side of the fault-injection harness: dbt with one fault at one named statement.

    python -m vcmt_lab.faults.inject <dbt arguments>

The process runs dbt's own CLI, with dbt-clickhouse's connection manager
wrapped so that every statement it sends is named first (`statement_label`).
The environment says what to do:

- VCMT_FAULT_LOG: a file; each statement's name is appended to it, one a line
  (the harness enumerates a load's statements from a clean run's file);
- VCMT_FAULT: `<fault>@<name>#<n>`: at the n-th statement of that name, before
  it is sent, `pause` stops this process (SIGSTOP; the harness resumes it),
  `kill` kills it (SIGKILL); `cut` sends it and cuts every connection of
  this process to the server (a proxy or a load balancer restarting) as soon
  as the server shows it running or sends its first byte back, whichever
  comes first: the statement goes on (or has ended) on the server, the client
  gets a broken connection and never its answer;
- VCMT_FAULT_PROXY: `<listen port>:<server port>` for `cut`: this process
  reaches the server through a forwarder of its own on 127.0.0.1, which the
  cut breaks (new connections go through again afterwards);
- VCMT_FAULT_RENEW_WAIT: seconds this process waits, once its load has sent
  its claim of the lock, right before each statement. A holder renews its
  lease at a step of its load only if it has been silent for a while, by its
  own clock (macros/vcmt/load/lock.sql `_renew_lock`): waiting longer than
  that before each statement makes every step renew, so the renewals are the
  same statements run after run, as the sweep needs, instead of depending on
  how fast the machine was.

Nothing here changes what dbt or vcmt send: the fault is the only difference
(and with VCMT_FAULT_RENEW_WAIT, when the statements are sent).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from vcmt_cli.processes import LOOPBACK

CUT_VISIBLE_TIMEOUT_S = 60.0
# How a vcmt load's statements begin their `log_comment` (macros/vcmt/load/lock.sql `_lock_holder`).
LOAD_LOG_COMMENT = "vcmt load by dbt invocation "

_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_OBJECT = re.compile(
    r"\b(?:into|table(?:\s+if\s+(?:not\s+)?exists)?|tables|from|view(?:\s+if\s+(?:not\s+)?exists)?)"
    r"\s+((?:`[^`]*`|\"[^\"]*\"|[\w$]+)(?:\.(?:`[^`]*`|\"[^\"]*\"|[\w$]+))?)",
    re.I,
)
_LOCK_KIND = re.compile(r"'(acquired|renewed|released)' as kind")
# An INSERT through a table function that names its table in its third argument, as a sharded model's lock writes
# its rows to the first shard: `insert into function cluster('c', 'db', 'm_local__lock', 0)` (macros/vcmt/load/lock.sql
# `_lock_rows_into`) is named `insert m_local__lock ...`, as an INSERT into that table is.
_QUOTED = r"(?:[^'\\]|\\.)*"  # the inside of a string literal, escapes included
_FUNCTION_TABLE = re.compile(rf"\binto\s+function\s+\w+\s*\(\s*'{_QUOTED}'\s*,\s*'{_QUOTED}'\s*,\s*'({_QUOTED})'", re.I)


def sent_statements(log: Path) -> list[str]:
    """The statement names (`name#n`) a process wrote to its VCMT_FAULT_LOG, in order; none if it wrote none.
    One a line: a name holds spaces (`insert m__loads#1`)."""
    return log.read_text().splitlines() if log.exists() else []


def statement_label(sql: str) -> str:
    """A statement's stable name: its verb and the first object it names (without the database; the
    generation of a lock or of a load's batch or fan-out as N), and for the lock's rows their kind. The same load
    sends the same names run after run, whatever the invocation."""
    text = _COMMENT.sub(" ", sql).strip()
    verb = (text.split(None, 1) or ["?"])[0].lower()
    found = _OBJECT.search(text)
    obj = ""
    if found:
        obj = found.group(1).split(".")[-1].strip('`"')
        through = _FUNCTION_TABLE.search(text) if obj.lower() == "function" else None
        obj = through.group(1) if through else obj
        obj = re.sub(r"__(lock|batch|fanout)_\d+(?=(?:_\d+)?$)", r"__\1_N", obj)
    kind = _LOCK_KIND.search(text)
    return " ".join(part for part in (verb, obj, kind.group(1) if kind else "") if part)


class _Forwarder:
    """A TCP forwarder on 127.0.0.1:`listen` to 127.0.0.1:`server`, whose open connections can be cut."""

    def __init__(self, listen: int, server: int) -> None:
        self.server = server
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.armed = threading.Event()  # cut at the server's next byte
        self.listener = socket.create_server((LOOPBACK, listen), reuse_port=False)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            upstream = socket.create_connection((LOOPBACK, self.server), timeout=30)
            upstream.settimeout(None)
            for s in (client, upstream):  # forward each piece as it comes, as the direct connection would
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b, b is client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while data := src.recv(65536):
                if answers and self.armed.is_set():
                    self.cut()
                    return
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.armed.clear()
        with self.lock:
            cut, self.sockets = self.sockets, []
        for s in cut:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass


def _cut_when_running(forwarder: _Forwarder, http_port: int, marker: str) -> None:
    """Cut the connections once the server shows a statement whose text holds `marker`, or one named as a vcmt
    load's (its `log_comment`: the one running, as dbt sends one statement at a time), whose text a profile may
    have cut (vcmt_lab.faults.harness.HIDING_PROFILE)."""
    import clickhouse_connect

    client = clickhouse_connect.get_client(host=LOOPBACK, port=http_port)
    deadline = time.monotonic() + CUT_VISIBLE_TIMEOUT_S
    try:
        while time.monotonic() < deadline and forwarder.armed.is_set():
            if client.command(
                "select count() from system.processes where query_id != queryID() and (position(query, {m:String}) > 0 "
                "or startsWith(Settings['log_comment'], {load:String}))",
                parameters={"m": marker, "load": LOAD_LOG_COMMENT},
            ):
                forwarder.cut()
                return
            time.sleep(0.02)
    finally:
        client.close()


def install(
    fault: str | None, log: Path | None, forwarder: _Forwarder | None, http_port: int | None, renew_wait: float = 0.0
) -> None:
    """Wrap dbt-clickhouse's connection manager: name each statement, log it, inject the fault."""
    from dbt.adapters.clickhouse.connections import ClickHouseConnectionManager

    kind, _, where = (fault or "").partition("@")
    wanted, _, nth = where.rpartition("#")
    seen: Counter[str] = Counter()

    def before(sql: str) -> None:
        name = statement_label(sql)
        if renew_wait and any(n.endswith(" acquired") for n in seen):
            time.sleep(renew_wait)
        seen[name] += 1
        if log is not None:
            with log.open("a") as out:
                out.write(f"{name}#{seen[name]}\n")
        if not fault or name != wanted or seen[name] != int(nth):
            return
        print(f"vcmt fault: {kind} at {name}#{nth}", flush=True)
        if kind == "pause":
            # To this thread, not the process: a stop sent to the process is taken by one thread (often the main
            # one), and this thread runs on until that one has stopped the rest, long enough under load to send
            # the statement (seen: the statement ran, then the process stopped). Sent to this thread, the stop
            # takes effect before the call returns.
            signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        elif kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "cut":
            if forwarder is None or http_port is None:
                raise SystemExit("vcmt fault: cut needs VCMT_FAULT_PROXY and VCMT_FAULT_HTTP_PORT")
            forwarder.armed.set()
            # The statement's own text, past dbt's query comment: what the server shows while it runs.
            marker = _COMMENT.sub(" ", sql).strip()[:120]
            threading.Thread(target=_cut_when_running, args=(forwarder, http_port, marker), daemon=True).start()
        else:
            raise SystemExit(f"vcmt fault: unknown fault {kind!r} (pause, kill or cut)")

    for method in ("execute", "add_query"):
        original = getattr(ClickHouseConnectionManager, method)

        def wrapped(self, sql, *args, _original=original, **kwargs):
            before(sql)
            return _original(self, sql, *args, **kwargs)

        setattr(ClickHouseConnectionManager, method, wrapped)


def main(argv: list[str]) -> int:
    forwarder = None
    if os.environ.get("VCMT_FAULT_PROXY"):
        listen, _, server = os.environ["VCMT_FAULT_PROXY"].partition(":")
        forwarder = _Forwarder(int(listen), int(server))
    log = os.environ.get("VCMT_FAULT_LOG")
    http_port = os.environ.get("VCMT_FAULT_HTTP_PORT")
    install(
        os.environ.get("VCMT_FAULT"),
        Path(log) if log else None,
        forwarder,
        int(http_port) if http_port else None,
        float(os.environ.get("VCMT_FAULT_RENEW_WAIT") or 0),
    )
    from dbt.cli.main import dbtRunner

    result = dbtRunner().invoke(argv)
    return 0 if result.success else (2 if result.exception is not None else 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
