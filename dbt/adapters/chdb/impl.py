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
