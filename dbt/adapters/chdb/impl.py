from dbt.adapters.base.meta import available
from dbt.adapters.chdb.connections import ChdbConnectionManager
from dbt.adapters.clickhouse.impl import ClickHouseAdapter
from dbt.adapters.events.logging import AdapterLogger

logger = AdapterLogger("chdb")


class ChdbAdapter(ClickHouseAdapter):
    """ClickHouseAdapter on the embedded engine.

    Materializations and dispatched macros resolve through the `clickhouse`
    parent adapter, so dbt-clickhouse's table, view, incremental and
    materialized_view materializations run unchanged.
    """

    ConnectionManager = ChdbConnectionManager

    @classmethod
    def type(cls) -> str:
        return "chdb"

    @available
    def skip_grants(self, relation, grant_config) -> str:
        """Log, as a warning, that `grants` were not applied to `relation`; returns the message."""
        grants = ", ".join(
            f"{privilege} to {grantees if isinstance(grantees, str) else ', '.join(grantees)}"
            for privilege, grantees in grant_config.items()
        )
        message = (
            f"grants not applied to {relation} ({grants}): type: chdb has no users or roles; "
            "grants are applied on a ClickHouse server (type: clickhouse)."
        )
        logger.warning(message)
        return message

    @available
    def run_concurrently(self, statements: list[str]) -> None:
        """Run `statements` at the same time on the embedded engine and wait for
        all of them (vcmt's virtual shards, docs/design.md#virtual-shards)."""
        # With dbt's query comment, as every statement dbt runs (query_log shows them as dbt's).
        statements = [self.connections._add_query_comment(sql) for sql in statements]
        for i, sql in enumerate(statements):
            logger.debug(f"chdb: concurrent statement {i + 1} of {len(statements)}: {sql}")
        self.connections.get_thread_connection().handle.run_concurrently(statements)
