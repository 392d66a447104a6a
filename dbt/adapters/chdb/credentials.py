from dataclasses import dataclass

from dbt.adapters.clickhouse.credentials import ClickHouseCredentials


@dataclass
class ChdbCredentials(ClickHouseCredentials):
    """ClickHouse credentials for an in-process chDB engine.

    `path` is the data directory (created if missing) or `:memory:`.
    Host, port, user and TLS fields are inherited but ignored.
    """

    path: str = ":memory:"

    @property
    def type(self):
        return "chdb"

    @property
    def unique_field(self):
        return self.path

    def _connection_keys(self):
        return ("path", "schema", "custom_settings")
