"""dbt adapter plugin `type: chdb`: dbt-clickhouse on the in-process chDB engine."""

from dbt.adapters.base import AdapterPlugin
from dbt.adapters.chdb.client import release_engine  # noqa: F401
from dbt.adapters.chdb.connections import ChdbConnectionManager  # noqa: F401
from dbt.adapters.chdb.credentials import ChdbCredentials
from dbt.adapters.chdb.impl import ChdbAdapter
from dbt.include import chdb

Plugin = AdapterPlugin(
    adapter=ChdbAdapter,
    credentials=ChdbCredentials,
    include_path=chdb.PACKAGE_PATH,
    dependencies=["clickhouse"],
)
