import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import clickhouse_connect
from clickhouse_connect.driver.exceptions import ClickHouseError
from dbt.adapters.clickhouse.httpclient import ChHttpClient

_LOCKED_MARKER = "Another server instance in same directory is already running"

# fd 2 is process-wide: two threads swapping it at once could leave it pointing
# at a closed temp file.
_stderr_lock = threading.Lock()


class ChdbOpenError(Exception):
    """The engine could not open its data directory.

    A plain Exception on purpose: dbt wraps connection errors in
    FailedToConnectError using str(), so a DbtRuntimeError here would print as a
    nested "Runtime Error" block instead of one line.
    """


def engine_locked_message(path: str) -> str:
    """One line telling the user which data directory is taken and what to do."""
    return (
        f"chdb: the data directory '{path}' is in use by another process "
        "(only one process may open a chDB path at a time); stop that process "
        "or point the profile's `path` at another directory."
    )


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


class ChdbClient(ChHttpClient):
    """dbt-clickhouse's client wrapper over clickhouse-connect's in-process chDB backend.

    The HTTP wrapper already speaks the clickhouse-connect client API; only the
    construction differs, so everything else (queries, settings, errors) is reused.
    """

    def _create_client(self, credentials):
        path = credentials.path
        if path != ":memory:" and not path.startswith("file:"):
            path = os.path.abspath(os.path.expanduser(path))
            os.makedirs(path, exist_ok=True)
        try:
            with _engine_stderr() as engine_said:
                return clickhouse_connect.get_client(
                    interface="chdb",
                    path=path,
                    query_limit=0,
                    settings=self._conn_settings,
                )
        except ClickHouseError as ex:
            # The engine's first line is the cause; str(ex) is only a generic wrapper.
            reason = engine_said[0] if engine_said else str(ex)
            if _LOCKED_MARKER in reason:
                raise ChdbOpenError(engine_locked_message(path)) from None
            raise ChdbOpenError(f"chdb: cannot open the engine at '{path}': {reason}") from ex

    def _check_atomic_exchange(self) -> bool:
        # chDB's default database engine is Atomic, which supports EXCHANGE TABLES.
        return True
