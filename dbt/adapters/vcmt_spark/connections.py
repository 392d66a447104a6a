"""dbt-spark's connection manager, plus `method: connect` (docs/adapters.md#how-the-spark-targets-work).

A Spark Connect connection is dbt-spark's own `method: session` connection
(its pyodbc-like cursor over DataFrames), whose cursor runs each statement on
the profile's Spark Connect session instead of a local one. Every other
method is dbt-spark's, unchanged.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dbt.adapters.contracts.connection import Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions.connection import FailedToConnectError
from dbt.adapters.spark.connections import SparkConnectionManager
from dbt.adapters.spark.session import Connection as SessionConnection
from dbt.adapters.spark.session import Cursor, SessionConnectionWrapper
from dbt.adapters.vcmt_spark.credentials import VcmtSparkConnectionMethod
from dbt_common.exceptions import DbtRuntimeError

logger = AdapterLogger("vcmt_spark")


class ConnectCursor(Cursor):
    """dbt-spark's session cursor, running SQL on the Spark Connect session of the profile."""

    def __init__(self, credentials: Any) -> None:
        super().__init__()
        self.credentials = credentials

    def execute(self, sql: str, *parameters: Any) -> None:
        from dbt.adapters.vcmt_spark.python_submissions import connect_session
        from pyspark.errors import AnalysisException

        if parameters:
            sql = sql % parameters
        try:
            self._df = connect_session(self.credentials).sql(sql)
        except AnalysisException as exc:
            raise DbtRuntimeError(str(exc)) from exc


class ConnectConnection(SessionConnection):
    def __init__(self, credentials: Any) -> None:
        super().__init__()
        self.credentials = credentials

    def cursor(self) -> Cursor:
        return ConnectCursor(self.credentials)


def _quiet_session_log() -> None:
    """Spark's own log to a file under dbt's log path, before a `method: session` JVM starts (spark_log)."""
    from dbt.adapters.vcmt_spark.spark_log import LOG_ENV, quiet_session_log

    try:
        from dbt.flags import get_flags

        log_dir = Path(getattr(get_flags(), "LOG_PATH", None) or "logs")
    except ImportError:
        log_dir = Path("logs")
    log_file = quiet_session_log(log_dir)
    if log_file is not None:
        logger.info(f"Spark's own log goes to {log_file} ({LOG_ENV}=console keeps it on the console)")


class VcmtSparkConnectionManager(SparkConnectionManager):
    TYPE = "vcmt_spark"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        creds = connection.credentials
        if connection.state != ConnectionState.OPEN and creds.method == VcmtSparkConnectionMethod.SESSION:
            from dbt.adapters.vcmt_spark.java import java_problem
            from dbt.adapters.vcmt_spark.spark_log import spark_started, user_spark_conf

            # Checked before this process's JVM starts; a configuration of the user's may set its own JAVA_HOME.
            if not spark_started() and user_spark_conf() is None and (problem := java_problem()) is not None:
                raise FailedToConnectError(f"method: session: {problem}")
            _quiet_session_log()
        if connection.state == ConnectionState.OPEN or creds.method != VcmtSparkConnectionMethod.CONNECT:
            return super().open(connection)
        from dbt.adapters.vcmt_spark.python_submissions import connect_session

        # The Spark Connect client retries an unreachable server for minutes: check the address first,
        # within connect_timeout, then make one round trip so that a server that is not Spark Connect fails here.
        address = urlparse("http://" + creds.connect_url.removeprefix("sc://"))
        host, port = address.hostname, address.port or 15002
        try:
            socket.create_connection((host, port), timeout=creds.connect_timeout).close()
            _ = connect_session(creds).version
        except DbtRuntimeError:
            raise
        except Exception as e:
            raise FailedToConnectError(
                f"method: connect: no Spark Connect server answered at {host}:{port} within "
                f"connect_timeout={creds.connect_timeout}s ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}). Start the server (sbin/start-connect-server.sh) "
                "or fix host and port in the profile."
            ) from e
        connection.handle = SessionConnectionWrapper(ConnectConnection(creds))
        connection.state = ConnectionState.OPEN  # type: ignore[assignment]
        return connection
