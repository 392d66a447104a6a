"""Run a compiled dbt Python model on the SparkSession of `method: session` or `method: connect`.

The compiled code is the model's source, dbt's `dbtObj` scaffolding and the
write step rendered by the `py_write_table` macro of this plugin (which ends in
`save_model_result` below). It runs in this process, on the same session the
SQL models use, so a Python model and the SQL around it share tables, temp
views and caches. Only the DataFrame API is used (no SparkContext, no RDDs),
so the same code runs on a Spark Connect session: with `method: connect` the
session is a Spark Connect client of the profile's server, the one the SQL
models run on too (docs/adapters.md#how-the-spark-targets-work).
"""

from __future__ import annotations

import re
from typing import Any

from dbt.adapters.base import PythonJobHelper
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import SparkCredentials
from dbt.adapters.vcmt_spark.credentials import LOCAL_SESSION_DEFAULTS, VcmtSparkConnectionMethod, is_local_master
from dbt_common.exceptions import DbtRuntimeError

logger = AdapterLogger("vcmt_spark")

# One Spark Connect session per server URL and process: SQL and Python models share its temp views and settings.
_connect_sessions: dict[str, Any] = {}


def connect_session(credentials: Any) -> Any:
    """The Spark Connect session of `method: connect`, created once per URL, with the profile's parameters set.

    A process runs either a local (classic) session or Spark Connect clients:
    PySpark's functions (`F.col`, ...) build classic or Connect columns
    depending on the process-wide SPARK_CONNECT_MODE_ENABLED, which PySpark's
    own builder sets when it creates a remote session, as this does.
    """
    import os

    url = credentials.connect_url
    session = _connect_sessions.get(url)
    if session is not None:
        return session
    from pyspark.core.context import SparkContext
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    if SparkContext._active_spark_context is not None:
        raise DbtRuntimeError(
            "method: connect: this process already runs a local Spark session (method: session); PySpark "
            "cannot mix the two in one process. Run the Spark Connect target in its own dbt invocation."
        )
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    session = RemoteSparkSession.builder.remote(url).create()
    for parameter, value in credentials.server_side_parameters.items():
        try:
            session.conf.set(parameter, value)
        except Exception as e:
            session.stop()
            raise DbtRuntimeError(
                f"method: connect: server_side_parameters `{parameter}` cannot be set from a Spark Connect "
                f"client ({type(e).__name__}: {str(e).splitlines()[0]}). Static settings (master, memory, "
                "warehouse, metastore) belong to the server: set them where the server starts, and keep only "
                "SQL settings in the profile."
            ) from e
    _connect_sessions[url] = session
    return session


def spark_session(credentials: SparkCredentials) -> Any:
    """The session dbt-spark's `method: session` cursor runs SQL on (or, on `method: connect`, ours).

    Built exactly like dbt-spark's cursor builds it (Hive support, the
    profile's server_side_parameters), so getOrCreate returns that same
    session, or creates it when the Python model is the first thing to run.
    """
    if credentials.method == VcmtSparkConnectionMethod.CONNECT:
        return connect_session(credentials)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.enableHiveSupport()
    for parameter, value in credentials.server_side_parameters.items():
        builder = builder.config(parameter, value)
    session = builder.getOrCreate()
    apply_local_session_defaults(session)
    return session


def apply_local_session_defaults(session: Any) -> None:
    """LOCAL_SESSION_DEFAULTS on `session` when its master is local, for each key nothing has set: the
    profile's server_side_parameters reach the session's settings through the builder, as do
    spark-defaults.conf and a hook's SET, so any value given anywhere wins
    (docs/adapters.md#how-the-spark-targets-work)."""
    if not is_local_master(str(session.conf.get("spark.master", ""))):
        return
    for key, value in LOCAL_SESSION_DEFAULTS.items():
        if session.conf.get(key, None) is None:
            session.conf.set(key, value)


class SessionPythonJobHelper(PythonJobHelper):
    def __init__(self, parsed_model: dict, credentials: SparkCredentials) -> None:
        if credentials.method not in (VcmtSparkConnectionMethod.SESSION, VcmtSparkConnectionMethod.CONNECT):
            raise DbtRuntimeError(
                f"Python model {parsed_model['alias']}: submission_method 'session' needs a profile with "
                f"`method: session` or `method: connect`, not `{credentials.method}`."
            )
        self.credentials = credentials
        self.parsed_model = parsed_model

    def submit(self, compiled_code: str) -> list[str]:
        """Run the model; return the run summaries its staging reported (vcmt_staging.topic.report),
        which are logged to dbt's log here, also when the model fails, and become its result message."""
        from vcmt_staging.topic import collecting_summaries

        session = spark_session(self.credentials)
        name = f"<dbt python model {self.parsed_model['schema']}.{self.parsed_model['alias']}>"
        # A fresh namespace per run: models must not see each other's globals.
        namespace: dict[str, Any] = {"__name__": "__dbt_python_model__", "spark": session}
        with collecting_summaries() as summaries:
            try:
                exec(compile(compiled_code, name, "exec"), namespace)  # noqa: S102 - this is what running a model means
            finally:
                for text in summaries:
                    logger.info(text)
        prefix = f"{self.parsed_model['schema']}.{self.parsed_model['alias']}: "
        return [text.removeprefix(prefix) for text in summaries]


# insertInto replaces only the partitions it writes when the TABLE's own options say so: Spark's
# InsertIntoHadoopFsRelationCommand reads `partitionOverwriteMode` from the relation's options (the table's
# storage properties) before the session's spark.sql.sources.partitionOverwriteMode, while insertInto
# ignores the writer's options. A session setting switched around the write is not safe when dbt runs
# models in threads: another model's restore could leave it static (every partition replaced) mid-write.
# The table is checked before every such write, never remembered: another client on the same server (a
# `--full-refresh`) rebuilds the table without the option, and a write that still believed it set replaced
# every partition. docs/adapters.md#how-the-spark-targets-work
DYNAMIC_OVERWRITE_OPTION = ("partitionOverwriteMode", "dynamic")


def _ensure_dynamic_overwrite(session: Any, table: str) -> None:
    """Give `table` the dynamic partition overwrite option unless it has it (one metastore call)."""
    key, value = DYNAMIC_OVERWRITE_OPTION
    rows = session.sql(f"describe table extended {table}").collect()
    storage = next((str(r[1]) for r in rows if r[0] == "Storage Properties"), "")
    if f"{key}={value}" not in storage.strip("[]").split(", "):
        session.sql(f"alter table {table} set serdeproperties ('{key}' = '{value}')")


_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def _fits(given: str, stored: str) -> bool:
    """A `given` column can be written into a `stored` one without changing a value: the same type, a wider
    integer, a float into a double, or a decimal with the same scale and at least the integer digits."""
    if given == stored:
        return True
    if given in _INTEGRAL and stored in _INTEGRAL:
        return _INTEGRAL.index(given) <= _INTEGRAL.index(stored)
    if (given, stored) == ("float", "double"):
        return True
    g, t = re.fullmatch(r"decimal\((\d+),(\d+)\)", given), re.fullmatch(r"decimal\((\d+),(\d+)\)", stored)
    return bool(g and t and g[2] == t[2] and int(g[1]) <= int(t[1]))


def _refuse_other_columns(session: Any, df: Any, table: str) -> None:
    """Refuse a result whose columns are not the existing `table`'s, name by name in order, each fitting its
    column (`_fits`). An incremental write goes by position (Spark's insertInto ignores names): a renamed,
    added, dropped or moved column would land its values under another column, and a narrower type would
    cast them (docs/staging.md, "Changing the declared columns")."""
    stored = [(f.name, f.dataType.simpleString()) for f in session.table(table).schema]
    given = [(f.name, f.dataType.simpleString()) for f in df.schema]
    if len(stored) == len(given) and all(
        g.lower() == s.lower() and _fits(gt, st) for (g, gt), (s, st) in zip(given, stored, strict=True)
    ):
        return
    raise DbtRuntimeError(
        f"{table}: the model's result is not in the table's columns: the table has "
        f"({', '.join(f'{n} {t}' for n, t in stored)}), the result ({', '.join(f'{n} {t}' for n, t in given)}). "
        "An incremental run writes by position, so its rows would land under other columns or be cast; nothing "
        f"was written. Rebuild the table with the new columns: dbt run --select {table.rsplit('.', 1)[-1]} "
        "--full-refresh (a staging "
        "model then restages every landed batch; the marts reading it ask for their own --full-refresh), or "
        "return the table's columns, in its order (partition columns last)."
    )


def save_model_result(
    session: Any,
    df: Any,
    table: str,
    file_format: str,
    partition_by: list[str] | None = None,
    location: str | None = None,
    mode: str = "create",
) -> None:
    """Save a model's result as `table`, replacing it, as dbt-spark's SQL `create table ... as` would.

    `partition_by` and `location` apply to the model's own table only; the
    incremental materialization's `__dbt_tmp` table is a plain managed table
    (it would otherwise land in the model's own folder).

    `mode`: `create` replaces the table; `overwrite_partitions` replaces the
    partitions the result holds in the existing `table` (the others stay),
    `append` appends to it. Columns go by position, partition columns last.
    """
    from pyspark.sql import DataFrame

    if not isinstance(df, DataFrame):
        try:
            import pandas
        except ImportError:  # without pandas, a Spark DataFrame is the only possible result
            pandas = None
        if pandas is not None and isinstance(df, pandas.DataFrame):
            df = session.createDataFrame(df)
    if not isinstance(df, DataFrame):
        raise DbtRuntimeError(f"{table}: a Python model must return a Spark or pandas DataFrame, not {type(df)}")
    from vcmt_staging.topic import record_staged, restaged_batches, unwritten

    if mode in ("overwrite_partitions", "append"):
        _refuse_other_columns(session, df, table)
        if unwritten(table):
            # Nothing new to stage: the result has no row, so the write would replace no partition and append
            # nothing. Skipped: a Spark job, a commit and metastore calls per run (docs/staging.md).
            return
        if mode == "overwrite_partitions":
            _ensure_dynamic_overwrite(session, table)
        elif restaged := restaged_batches(table):
            raise DbtRuntimeError(
                f"{table}: the raw batches {', '.join(f'{b} ({why})' for b, why in sorted(restaged.items()))} changed "
                "since they were staged; an append would stage their lines twice, nothing was written. Stage with "
                "incremental_strategy='insert_overwrite' and partition_by=['_batch_id'] (each changed batch's "
                "partition is replaced whole)."
            )
        df.write.insertInto(table, overwrite=mode == "overwrite_partitions")
        # The raw files of the batches a staging model wrote, recorded after the write: a run killed between
        # the two leaves them unrecorded, and the next run stages them again (docs/staging.md).
        record_staged(session, table)
        return
    if mode != "create":
        raise DbtRuntimeError(f"{table}: unknown write mode {mode!r}; expected create, overwrite_partitions or append")
    writer = df.write.mode("overwrite").format(file_format)
    if partition_by:
        # As a SQL model's `partitioned by`. Spark stores partition columns last, and dbt-spark's insert
        # overwrite does `select *` from the unpartitioned `__dbt_tmp` table: a model returns them last too.
        writer = writer.partitionBy(*partition_by)
    if location:
        writer = writer.option("path", location)
    writer.saveAsTable(table)
    record_staged(session, table)
