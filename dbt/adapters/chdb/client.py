import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import clickhouse_connect
from clickhouse_connect.driver._chdbclient import build_connection_string
from clickhouse_connect.driver.exceptions import ClickHouseError
from dbt.adapters.chdb.statements import multi_statement_message, second_statement_at
from dbt.adapters.clickhouse.httpclient import ChHttpClient
from dbt.adapters.clickhouse.query import quote_identifier
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt_common.exceptions import DbtDatabaseError

import chdb

logger = AdapterLogger("chdb")

_LOCKED_MARKER = "Another server instance in same directory is already running"

# How often a process that waits for a data directory (the profile's `path_lock_timeout`) tries it again.
_PATH_POLL_S = 1.0

# The database a server runs a query in when the request names none.
_SERVER_DEFAULT_DATABASE = "default"

# Session settings chDB (clickhouse-local) changes from the engine's own
# defaults (system.settings: changed = 1, value != default), set back to what a
# server uses, so the embedded engine does not accept what a server refuses
# (`1 + 1` without SELECT, introspection functions) or answer differently
# (CAST from String to Dynamic). A profile's custom_settings still win.
SERVER_DEFAULT_SETTINGS = {
    "implicit_select": "0",
    "allow_introspection_functions": "0",
    "cast_string_to_dynamic_use_inference": "0",
}

# Errors the engine raises for users, roles and grants, which it does not manage.
_ACCESS_CONTROL_ERRORS = ("(ACCESS_DENIED)", "(UNKNOWN_ROLE)", "(UNKNOWN_USER)")
ACCESS_CONTROL_HINT = (
    "type: chdb runs ClickHouse in-process without users, roles or access control, so CREATE USER/ROLE, "
    "GRANT and REVOKE cannot run on it; the `grants` config is skipped with a warning. Run them on a "
    "ClickHouse server (type: clickhouse)."
)

# A query_log as a server keeps it, for `query_log: true` in the profile.
_QUERY_LOG_CONFIG = """<clickhouse>
  <query_log>
    <database>system</database>
    <table>query_log</table>
    <flush_interval_milliseconds>7500</flush_interval_milliseconds>
  </query_log>
</clickhouse>
"""

# fd 2 is process-wide: two threads swapping it at once could leave it pointing
# at a closed temp file.
_stderr_lock = threading.Lock()

# The engine stops when its last handle closes, and dbt closes every connection
# at the end of an invocation: without a handle of our own, each dbt command in
# one Python process restarted the engine, losing system.query_log and Memory
# tables. One kept handle per process (chDB hosts one engine per process), for
# the engine last opened; docs/adapters.md says what that means for the lock.
_kept_lock = threading.Lock()
_kept: dict[str, object] = {}


class ChdbOpenError(Exception):
    """The engine could not open its data directory.

    A plain Exception on purpose: dbt wraps connection errors in
    FailedToConnectError using str(), so a DbtRuntimeError here would print as a
    nested "Runtime Error" block instead of one line.
    """


def path_holder(path: str) -> str:
    """Which process has the data directory `path` open, from the engine's own `<path>/status` file
    (`PID: ...`, `Started at: ...`) and, where the system shows it, that process's command line."""
    try:
        status = Path(path, "status").read_text(errors="replace")
    except OSError:
        return "another process"
    fields = dict(line.split(": ", 1) for line in status.splitlines() if ": " in line)
    pid = fields.get("PID", "").strip()
    if not pid.isdigit():
        return "another process"
    try:
        command = Path("/proc", pid, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = ""
    shown = [f"`{command[:117]}...`" if len(command) > 120 else f"`{command}`"] if command else []
    if fields.get("Started at"):
        shown.append(f"started at {fields['Started at'].strip()}")
    return f"process {pid}" + (f" ({', '.join(shown)})" if shown else "")


def engine_locked_message(path: str, holder: str, waited_s: int, timeout_s: int) -> str:
    """One line telling the user which data directory is taken, by whom, and what to do."""
    return (
        f"chdb: the data directory '{path}' is in use by {holder}; waited {waited_s} s (the profile's "
        f"`path_lock_timeout` = {timeout_s}): only one process may open a chDB path at a time. Run again once "
        "that process has ended, give the profile a longer `path_lock_timeout`, or point its `path` at another "
        "directory."
    )


class _PathWait:
    """The wait of a process for a data directory another process has open: bounded by the profile's
    `path_lock_timeout`, said once when it starts and once when it ends."""

    def __init__(self, path: str, timeout_s: int) -> None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int) or timeout_s < 0:
            raise ChdbOpenError(
                f"chdb: the profile's `path_lock_timeout` must be a whole number of seconds (0 or more) a process "
                f"waits while another one has the data directory open; got `{timeout_s}`. Fix it in profiles.yml, "
                "e.g. path_lock_timeout: 600."
            )
        self.path = path
        self.timeout_s = timeout_s
        self.started: float | None = None

    def waited_s(self) -> int:
        return 0 if self.started is None else int(time.monotonic() - self.started)

    def again(self) -> None:
        """After a refused open: wait a little before the next try, or fail when the time is up."""
        holder = path_holder(self.path)
        if self.started is None:
            self.started = time.monotonic()
            if self.timeout_s > 0:
                logger.info(
                    f"the data directory '{self.path}' is in use by {holder}; waiting for it to close it, "
                    f"up to {self.timeout_s} s (the profile's `path_lock_timeout`)"
                )
        if self.waited_s() >= self.timeout_s:
            raise ChdbOpenError(engine_locked_message(self.path, holder, self.waited_s(), self.timeout_s))
        time.sleep(_PATH_POLL_S)

    def done(self) -> None:
        if self.started is not None:
            logger.info(f"the data directory '{self.path}' is free; going on after {self.waited_s()} s")


@contextmanager
def _engine_stderr() -> Iterator[list[str]]:
    """Collect what the engine prints on fd 2 while it starts.

    When the engine cannot start, chDB raises a generic "Error initializing
    EmbeddedServer" and prints the real reason (e.g. the lock on `<path>/status`)
    straight to fd 2, where it would interleave with dbt's log as a stray line.
    Output captured on success is written back, so nothing is lost.
    """
    captured: list[str] = []
    with _stderr_lock, tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        failed = False
        try:
            yield captured
        except BaseException:
            failed = True
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read()
            if failed:
                captured.extend(line for line in text.decode(errors="replace").splitlines() if line.strip())
            elif text:
                os.write(2, text)


def query_log_config_file() -> str:
    """A config file enabling system.query_log, written once per user into the temp folder."""
    target = os.path.join(tempfile.gettempdir(), f"vcmt-chdb-query-log-{os.getuid()}.xml")
    try:
        with open(target) as existing:
            if existing.read() == _QUERY_LOG_CONFIG:
                return target
    except OSError:
        pass
    fd, staging = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".xml")
    with os.fdopen(fd, "w") as out:
        out.write(_QUERY_LOG_CONFIG)
    os.replace(staging, target)
    return target


def keep_engine(connection_string: str) -> None:
    """Keep the engine of `connection_string` running for the life of the process.

    A kept engine of another path is let go first (its own open connections, if
    any, still hold it): chDB refuses a second path while one engine runs.
    """
    with _kept_lock:
        if connection_string in _kept:
            return
        _release_kept()
        _kept[connection_string] = chdb.connect(connection_string)


def release_engine() -> None:
    """Let the engine stop once dbt's connections close, unlocking its data directory for other processes."""
    with _kept_lock:
        _release_kept()


def stop_statements_of_thread(thread: int) -> None:
    """Ask the kept engine to stop (KILL QUERY, not waiting) the statements it runs for the OS thread `thread`:
    the thread that sends a statement runs it, and the engine lists it among the statement's `thread_ids`."""
    with _kept_lock:
        handle = next(iter(_kept.values()), None)
    if handle is not None:
        handle.query(f"KILL QUERY WHERE has(thread_ids, {int(thread)}) ASYNC", "TSV")


# Which statement a client runs, and whether dbt cancelled it, change together (ChdbClient._statement,
# stop_statement): a statement either sees the cancel and never starts, or is seen running and stopped.
_statement_state_lock = threading.Lock()
# How long a cancel keeps stopping the statement it found running (ChdbClient.stop_statement), and how often it
# asks again: a statement sent but not yet listed by the engine is not stopped by the first ask.
STOP_WAIT_S = 60.0
_STOP_POLL_S = 0.05
_STOP_ASK_AGAIN_S = 0.5


def _release_kept() -> None:
    for handle in _kept.values():
        handle.close()
    _kept.clear()


def engine_options(credentials) -> dict:
    """chDB startup options from the profile: `chdb_options`, plus a config file for `query_log: true`."""
    options = {str(k): v for k, v in (credentials.chdb_options or {}).items()}
    if credentials.query_log:
        if "config-file" in options:
            raise ChdbOpenError(
                "chdb: the profile sets both `query_log: true` and chdb_options `config-file`; "
                "add a <query_log> section to your config file instead."
            )
        options["config-file"] = query_log_config_file()
    return options


class ChdbClient(ChHttpClient):
    """dbt-clickhouse's client wrapper over clickhouse-connect's in-process chDB backend.

    The HTTP wrapper already speaks the clickhouse-connect client API; construction
    differs, and a few behaviours are aligned with what a server does: one statement
    per query, the schema cache, the database after a dropped schema.
    """

    # The native id of the thread whose statement this client runs now (None between statements), and whether
    # dbt cancelled the connection (stop_statement).
    _running_on: int | None = None
    _cancelled = False

    def query(self, sql, **kwargs):
        self._refuse_multi_statements(sql)
        with self._explain_access_errors(), self._statement():
            return super().query(sql, **kwargs)

    def command(self, sql, **kwargs):
        self._refuse_multi_statements(sql)
        with self._explain_access_errors(), self._statement():
            return super().command(sql, **kwargs)

    def columns_in_query(self, sql: str, **kwargs):
        self._refuse_multi_statements(sql)
        with self._statement():
            return super().columns_in_query(sql, **kwargs)

    @contextmanager
    def _statement(self) -> Iterator[None]:
        with _statement_state_lock:
            if self._cancelled:
                raise DbtDatabaseError("chdb: the connection was cancelled (Ctrl-C, or dbt's --fail-fast)")
            self._running_on = threading.get_native_id()
        try:
            yield
        finally:
            with _statement_state_lock:
                self._running_on = None

    def stop_statement(self, wait_s: float = STOP_WAIT_S) -> bool:
        """Stop the statement this client runs, if any, and refuse any later one: dbt cancels a connection
        (Ctrl-C, --fail-fast) from another thread. Closing the client alone, as dbt-clickhouse's cancel does,
        waits for the statement to end: a load's INSERT went on for minutes (docs/adapters.md, "Ctrl-C").

        The engine is asked again every half second until the statement has returned, for at most `wait_s`:
        a statement sent just before the cancel may not be listed by the engine yet when first asked. Returns
        whether no statement runs any more."""
        with _statement_state_lock:
            self._cancelled = True
            thread = self._running_on
        if thread is None:
            return True
        deadline = time.monotonic() + wait_s
        while self._running_on == thread:
            if time.monotonic() >= deadline:
                logger.warning(
                    f"chdb: the running statement did not stop within {wait_s:.0f} s of the cancel; dbt waits for it"
                )
                return False
            with _statement_state_lock:
                # Asked under the lock its end takes: `thread` runs this statement until the ask is sent, never
                # another one that began on the same thread after this one had ended.
                if self._running_on != thread:
                    break
                stop_statements_of_thread(thread)
            ask_again = min(deadline, time.monotonic() + _STOP_ASK_AGAIN_S)
            while self._running_on == thread and time.monotonic() < ask_again:
                time.sleep(_STOP_POLL_S)
        return True

    @staticmethod
    def _refuse_multi_statements(sql) -> None:
        """A server parses each query with multi-statements disabled; chDB would run them all."""
        if isinstance(sql, str) and (at := second_statement_at(sql)) is not None:
            raise DbtDatabaseError(multi_statement_message(sql, at))

    @staticmethod
    @contextmanager
    def _explain_access_errors() -> Iterator[None]:
        try:
            yield
        except DbtDatabaseError as ex:
            if any(code in str(ex.msg) for code in _ACCESS_CONTROL_ERRORS):
                raise DbtDatabaseError(f"{ex.msg}\n{ACCESS_CONTROL_HINT}") from ex
            raise

    def _ensure_database(self, database_engine, cluster_name) -> None:
        """Create the profile's schema if missing, on every new client.

        dbt-clickhouse remembers ensured databases for the whole process by name
        only. On chDB the engine behind a name can change within one process
        (another `path`, a `:memory:` engine reopened, a data directory removed
        between two invocations), so a remembered name would skip CREATE DATABASE
        and the next query would fail with UNKNOWN_DATABASE. The check is one
        in-process call, so it is not cached.
        """
        if not self.database:
            return
        cluster_clause = f' ON CLUSTER "{cluster_name}"' if cluster_name and cluster_name.strip() else ""
        engine_clause = f" ENGINE {database_engine}" if database_engine else ""
        try:
            self.command(
                f"CREATE DATABASE IF NOT EXISTS {quote_identifier(self.database)}{cluster_clause}{engine_clause}"
            )
        except DbtDatabaseError as ex:
            raise FailedToConnectError(f"Failed to create {self.database} database: {ex.msg}") from ex
        self._set_client_database()

    def database_dropped(self, database: str):
        """After the connection's own schema is dropped, run unqualified queries in `default`.

        The inherited method sets the client's database to None, which a server
        reads as "the default database". chDB applies the database with USE on
        its handle and None leaves the handle on the dropped database, so the
        next unqualified query would fail.
        """
        super().database_dropped(database)
        if self.database == database:
            self._client.database = _SERVER_DEFAULT_DATABASE

    def _create_client(self, credentials):
        path = credentials.path
        if path != ":memory:" and not path.startswith("file:"):
            path = os.path.abspath(os.path.expanduser(path))
            os.makedirs(path, exist_ok=True)
        options = engine_options(credentials)
        for name, value in SERVER_DEFAULT_SETTINGS.items():
            self._conn_settings.setdefault(name, value)
        wait = _PathWait(path, credentials.path_lock_timeout)
        while True:
            try:
                with _engine_stderr() as engine_said:
                    keep_engine(build_connection_string(path, options or None))
                    client = clickhouse_connect.get_client(
                        interface="chdb",
                        path=path,
                        query_limit=0,
                        settings=self._conn_settings,
                        chdb_options=options or None,
                    )
            except (ClickHouseError, RuntimeError) as ex:
                # The engine's first line is the cause; str(ex) is only a generic wrapper.
                reason = engine_said[0] if engine_said else str(ex)
                if _LOCKED_MARKER not in reason:
                    raise ChdbOpenError(f"chdb: cannot open the engine at '{path}': {reason}") from ex
            else:
                wait.done()
                return client
            # Another process has the path open, until it ends (docs/adapters.md, "One process per data directory").
            wait.again()

    def _check_atomic_exchange(self) -> bool:
        # chDB's default database engine is Atomic, which supports EXCHANGE TABLES.
        return True
