from dbt.adapters.chdb.client import ChdbClient
from dbt.adapters.clickhouse.connections import ClickHouseConnectionManager
from dbt.adapters.clickhouse.logger import logger


class ChdbConnectionManager(ClickHouseConnectionManager):
    TYPE = "chdb"

    @classmethod
    def open(cls, connection):
        if connection.state == "open":
            logger.debug("Connection is already open, skipping open.")
            return connection
        credentials = cls.get_credentials(connection.credentials)
        # A locked data directory will not unlock by retrying: open once.
        return cls.retry_connection(
            connection,
            connect=lambda: ChdbClient(credentials),
            logger=logger,
            retry_limit=0,
            retryable_exceptions=[],
        )

    def cancel(self, connection):
        """Stop the connection's running statement, then close it (dbt cancels on Ctrl-C and --fail-fast)."""
        connection.handle.stop_statement()
        super().cancel(connection)
