from dataclasses import dataclass
from typing import Any

from dbt.adapters.clickhouse.credentials import ClickHouseCredentials


@dataclass
class ChdbCredentials(ClickHouseCredentials):
    """ClickHouse credentials for an in-process chDB engine.

    `path` is the data directory (created if missing) or `:memory:`.
    `query_log: true` starts the engine with system.query_log enabled;
    `chdb_options` are extra engine startup options (e.g. `config-file`).
    Both apply when the process opens the engine. `path_lock_timeout` is how
    long a process waits, in seconds, while another process has the data
    directory open (0: fail at once). Host, port, user and TLS fields are
    inherited but ignored.
    """

    path: str = ":memory:"
    query_log: bool = False
    chdb_options: dict[str, Any] | None = None
    path_lock_timeout: int = 600

    @property
    def type(self):
        return "chdb"

    @property
    def unique_field(self):
        return self.path

    def _connection_keys(self):
        return ("path", "schema", "custom_settings", "query_log", "chdb_options", "path_lock_timeout")
