import os

import clickhouse_connect
from clickhouse_connect.driver.exceptions import ClickHouseError
from dbt.adapters.clickhouse.httpclient import ChHttpClient
from dbt_common.exceptions import DbtRuntimeError

_LOCKED_MARKER = "Another server instance in same directory is already running"


def engine_locked_message(path: str) -> str:
    """One line telling the user which data directory is taken and what to do."""
    return (
        f"chdb: the data directory '{path}' is in use by another process "
        "(only one process may open a chDB path at a time); stop that process "
        "or point the profile's `path` at another directory."
    )


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
            return clickhouse_connect.get_client(
                interface="chdb",
                path=path,
                query_limit=0,
                settings=self._conn_settings,
            )
        except ClickHouseError as ex:
            if _LOCKED_MARKER in str(ex):
                raise DbtRuntimeError(engine_locked_message(path)) from None
            raise DbtRuntimeError(f"chdb: cannot open the engine at '{path}': {ex}") from ex

    def _check_atomic_exchange(self) -> bool:
        # chDB's default database engine is Atomic, which supports EXCHANGE TABLES.
        return True
