from dataclasses import dataclass

from dbt.adapters.spark.connections import SparkCredentials
from dbt_common.dataclass_schema import StrEnum
from dbt_common.exceptions import DbtRuntimeError

# Settings a Spark Connect session gets unless the profile's `server_side_parameters` name them (the
# profile's value wins). spark.sql.codegen.hugeMethodLimit: HotSpot does not JIT-compile a method over
# 8,000 bytes of bytecode, and the staging decoding's whole-stage generated method is larger (about 21 KB
# for the demo's PostgreSQL topic), so under Spark's default limit (65535) it runs in the bytecode
# interpreter. At 8000, Spark runs such a stage without whole-stage code generation, its expressions
# compiled in small methods: warm batches cost a fifth less, the first batch of a JVM a little more. A
# Connect server's JVM outlives the dbt runs, so only it gets the default; `method: session` starts a
# JVM per dbt process and its profile decides (docs/adapters.md#how-the-spark-targets-work).
CONNECT_SESSION_DEFAULTS = {"spark.sql.codegen.hugeMethodLimit": "8000"}

# Settings a `method: session` session whose master is local gets, key by key, unless something set the
# key already (the profile's server_side_parameters, spark-defaults.conf, a hook). Applied to the live
# session (python_submissions.apply_local_session_defaults), where the master is known whatever set it
# (profile, spark-defaults.conf, PYSPARK_SUBMIT_ARGS).
# spark.sql.sources.parallelPartitionDiscovery.threshold: Spark lists the folders of a read with a Spark
# job of one task per folder once there are more than 32 of them; a staging model reads its topic folder,
# which gains a `_batch_id=<N>` folder per landed batch, so under the default every run paid one task per
# batch ever landed (about 1.5 s per model at 400 landed batches on 2 cores, against 0.05 s listed on the
# driver). A local master's tasks run on the driver's own machine: the job only adds its overhead.
# Clusters keep Spark's default (docs/adapters.md#how-the-spark-targets-work).
LOCAL_SESSION_DEFAULTS = {"spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000"}


def is_local_master(master: str) -> bool:
    """Whether Spark runs in the driver's process: `local`, `local[N]`, `local[*]`, `local[N,F]`."""
    master = master.strip()
    return master == "local" or master.startswith("local[")


class VcmtSparkConnectionMethod(StrEnum):
    """dbt-spark's connection methods, plus `connect` (Spark Connect, docs/adapters.md#how-the-spark-targets-work)."""

    THRIFT = "thrift"
    HTTP = "http"
    ODBC = "odbc"
    SESSION = "session"
    CONNECT = "connect"


@dataclass
class VcmtSparkCredentials(SparkCredentials):
    """dbt-spark's credentials under the plugin's own type name; every field means what it means there.

    `method: connect` adds a Spark Connect client: `host` (a name, or a whole
    `sc://host:port/;param=value` URL) and `port` (Spark Connect's default is
    15002) name the server; `token` and `use_ssl` become URL parameters.
    `server_side_parameters` are set on the remote session (SQL settings only:
    the cluster's static settings belong to the server); they start from
    CONNECT_SESSION_DEFAULTS. A `method: session` session with a local master
    gets LOCAL_SESSION_DEFAULTS for the keys nothing has set.
    """

    method: VcmtSparkConnectionMethod = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method == VcmtSparkConnectionMethod.CONNECT:
            self.server_side_parameters = {**CONNECT_SESSION_DEFAULTS, **self.server_side_parameters}
            try:
                from pyspark.sql.connect.utils import check_dependencies

                check_dependencies()
            except ImportError as e:
                raise DbtRuntimeError(
                    "method: connect needs the Spark Connect client: install `pyspark[connect]` "
                    f"(this package's `spark` extra pins it).\n\nImportError({e})"
                ) from e

    @property
    def type(self) -> str:
        return "vcmt_spark"

    @property
    def connect_url(self) -> str:
        """The Spark Connect URL of `method: connect`."""
        if str(self.host).startswith("sc://"):
            return str(self.host)
        params = [f"token={self.token}"] if self.token else []
        if self.use_ssl:
            params.append("use_ssl=true")
        if self.user:
            params.append(f"user_id={self.user}")
        return f"sc://{self.host}:{self.port}" + (f"/;{';'.join(params)}" if params else "")
