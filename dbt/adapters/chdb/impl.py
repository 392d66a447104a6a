from dbt.adapters.chdb.connections import ChdbConnectionManager
from dbt.adapters.clickhouse.impl import ClickHouseAdapter


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
