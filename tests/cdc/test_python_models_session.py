"""Python models on `method: session` through the `vcmt_spark` adapter (dbt/adapters/vcmt_spark).

One `dbt run` builds a SQL model and Python models side by side on the local
SparkSession; the results are read back from that same session. The
incremental Python model is run twice to go through the plugin's incremental
materialization (insert overwrite of the partitions a run writes). Two more
incremental models are written at the same time (threads: 2), each keeping
its table's other partitions.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import make_project
from vcmt_lab.dbt_project import spark_session_parameters

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark_project(tmp_path_factory, chdb_path: Path, lab_dir: Path):
    root = tmp_path_factory.mktemp("python_models")
    proj = make_project(root / "proj", "python_models", chdb_path, lab_dir)
    proj.model(
        "numbers",
        """
        {{ config(materialized='table', file_format='parquet') }}
        select id, id * 10 as amount from range(1, 6) as t(id)
    """,
    )
    proj.write(
        "models/doubled.py",
        """
        import pyspark.sql.functions as F


        def model(dbt, session):
            dbt.config(materialized="table")
            return dbt.ref("numbers").select("id", (F.col("amount") * 2).alias("doubled"))
    """,
    )
    proj.write(
        "models/batches.py",
        """
        import pyspark.sql.functions as F


        def model(dbt, session):
            dbt.config(materialized="incremental", incremental_strategy="insert_overwrite",
                       file_format="parquet", partition_by=["_batch_id"])
            df = dbt.ref("numbers").select("id")
            if dbt.is_incremental:
                # Second run: a new batch 1, and batch 0 rewritten with fewer rows.
                return df.where("id <= 2").select("id", F.when(F.col("id") == 1, 0).otherwise(1).alias("_batch_id"))
            return df.select("id", F.lit(0).alias("_batch_id"))
    """,
    )
    for name in ("topic_a", "topic_b"):
        # Two staging-like models: the first run writes batch 0, every later run batch 1 only.
        proj.write(
            f"models/concurrent/{name}.py",
            """
            import pyspark.sql.functions as F


            def model(dbt, session):
                dbt.config(materialized="incremental", incremental_strategy="insert_overwrite",
                           file_format="parquet", partition_by=["_batch_id"])
                return dbt.ref("numbers").select("id", F.lit(1 if dbt.is_incremental else 0).alias("_batch_id"))
        """,
        )
    return proj


def _spark():
    from pyspark.sql import SparkSession

    # The session dbt created in this process (method: session).
    return SparkSession.builder.getOrCreate()


def test_python_and_sql_models_in_one_run(spark_project, lab_dir: Path, monkeypatch) -> None:
    monkeypatch.chdir(lab_dir)
    run = spark_project.dbt("run", "--exclude", "concurrent", target="vcmt_spark")
    assert "doubled" in run.log and "numbers" in run.log
    spark = _spark()
    schema = spark_project.schema
    rows = sorted(tuple(r) for r in spark.table(f"{schema}.doubled").collect())
    assert rows == [(i, i * 20) for i in range(1, 6)]
    assert sorted(r.id for r in spark.table(f"{schema}.batches").collect()) == [1, 2, 3, 4, 5]
    # The partitioned Python model is a real partitioned table, as the SQL path makes it.
    parts = [r[0] for r in spark.sql(f"show partitions {schema}.batches").collect()]
    assert parts == ["_batch_id=0"]

    spark_project.dbt("run", "--select", "batches", target="vcmt_spark")
    got = sorted(tuple(r) for r in spark.table(f"{schema}.batches").collect())
    # insert overwrite replaced partition 0 with id 1 only and added partition 1 with id 2.
    assert got == [(1, 0), (2, 1)]
    assert not spark.catalog.tableExists(f"{schema}.batches__dbt_tmp")


def test_connect_session_defaults_yield_to_the_profile() -> None:
    """`method: connect` sessions get spark.sql.codegen.hugeMethodLimit 8000 unless the profile sets it;
    `method: session` profiles decide for themselves (docs/adapters.md#how-the-spark-targets-work)."""
    from dbt.adapters.vcmt_spark.credentials import CONNECT_SESSION_DEFAULTS, VcmtSparkCredentials

    key = "spark.sql.codegen.hugeMethodLimit"
    assert CONNECT_SESSION_DEFAULTS[key] == "8000"

    def parameters(method: str, given: dict) -> dict:
        return VcmtSparkCredentials.from_dict(
            {"host": "localhost", "method": method, "schema": "s", "server_side_parameters": given}
        ).server_side_parameters

    connect = parameters("connect", {"spark.sql.session.timeZone": "UTC"})
    assert connect[key] == "8000" and connect["spark.sql.session.timeZone"] == "UTC"
    assert parameters("connect", {key: 65535})[key] == "65535"
    assert key not in parameters("session", {"spark.master": "local[1]"})


def test_local_session_defaults_only_on_a_local_master() -> None:
    """Which masters run Spark on the driver's machine (LOCAL_SESSION_DEFAULTS apply there only), and the
    defaults are not profile parameters: a Connect or cluster profile never gets them
    (docs/adapters.md#how-the-spark-targets-work)."""
    from dbt.adapters.vcmt_spark.credentials import LOCAL_SESSION_DEFAULTS, VcmtSparkCredentials, is_local_master

    for master in ("local", "local[2]", "local[*]", "local[2,3]", " local[4] "):
        assert is_local_master(master), master
    for master in (
        "",
        "spark://10.0.0.5:7077",
        "yarn",
        "k8s://https://k8s:443",
        "localhost",
        "local-cluster[2,1,1024]",
    ):
        assert not is_local_master(master), master
    ((key, ours),) = LOCAL_SESSION_DEFAULTS.items()
    assert key == "spark.sql.sources.parallelPartitionDiscovery.threshold" and int(ours) > 32  # Spark's default
    for method in ("session", "connect"):
        given = VcmtSparkCredentials.from_dict(
            {"host": "localhost", "method": method, "schema": "s", "server_side_parameters": {}}
        ).server_side_parameters
        assert key not in given, method


def test_sql_models_still_run_on_plain_spark_target(spark_project, lab_dir: Path, monkeypatch) -> None:
    monkeypatch.chdir(lab_dir)
    spark_project.dbt("run", "--select", "numbers", target="spark")
    assert _spark().table(f"{spark_project.schema}.numbers").count() == 5


def test_concurrent_partition_overwrites_keep_other_partitions(spark_project, lab_dir: Path, monkeypatch) -> None:
    """Two partitioned Python models written at once (threads: 2) each replace only their own new partition.

    The session's spark.sql.sources.partitionOverwriteMode is switched to static over and over while they
    run, as another model restoring the setting around its own write would: a write that depends on the
    session setting would replace every partition of its table (batch 0 lost).
    """
    import threading

    monkeypatch.chdir(lab_dir)
    spark_project.dbt("run", "--select", "numbers", "concurrent", "--full-refresh", target="vcmt_spark")
    spark, schema = _spark(), spark_project.schema
    stop, switches = threading.Event(), []

    def restore_static() -> None:
        while not stop.is_set():
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")
            switches.append(1)

    switcher = threading.Thread(target=restore_static, daemon=True)
    switcher.start()
    try:
        run = spark_project.dbt("run", "--select", "concurrent", target="vcmt_spark")
    finally:
        stop.set()
        switcher.join(timeout=10)
    assert "Concurrency: 2 threads" in run.log, run.log[-2000:]
    assert len(switches) > 10
    for name in ("topic_a", "topic_b"):
        rows = sorted(tuple(r) for r in spark.table(f"{schema}.{name}").collect())
        assert rows == sorted([(i, 0) for i in range(1, 6)] + [(i, 1) for i in range(1, 6)]), (name, rows)


SPARK_CONSOLE_LINES = ("Using Spark's default log4j profile", "Setting default log level to")


def test_spark_log_goes_to_a_file_not_the_console(spark_project, tmp_path):
    """A `dbt run --target vcmt_spark` in its own process: Spark's log is in `<log path>/spark.log` and one line
    says where; with VCMT_SPARK_LOG=console Spark prints on the console as it usually does."""
    p = spark_project
    # Its own target: this process's session holds the shared Hive metastore (Derby allows one process).
    profiles = yaml.safe_load((p.root / "profiles.yml").read_text())
    outputs_ = profiles["vcmt_test"]["outputs"]
    own = tmp_path / "spark"
    outputs_["vcmt_spark_own"] = {
        **outputs_["vcmt_spark"],
        "server_side_parameters": {
            **outputs_["vcmt_spark"]["server_side_parameters"],
            **spark_session_parameters(tmp_path),
        },
    }
    (p.root / "profiles.yml").write_text(yaml.safe_dump(profiles, sort_keys=False))
    assert str(own / "metastore_db") in str(outputs_["vcmt_spark_own"])
    outputs = {}
    for name, value in (("quiet", None), ("console", "console")):
        proc = p.dbt_process(
            name,
            "run",
            "--select",
            "numbers",
            target="vcmt_spark_own",
            env={"SPARK_CONF_DIR": None, "VCMT_SPARK_LOG": value},
        )
        outputs[name], _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, outputs[name][-3000:]
    log_file = p.root / "logs_quiet" / "spark.log"
    assert f"vcmt_spark adapter: Spark's own log goes to {log_file}" in outputs["quiet"], outputs["quiet"][-3000:]
    assert not [line for line in SPARK_CONSOLE_LINES if line in outputs["quiet"]], outputs["quiet"][-3000:]
    assert log_file.stat().st_size > 0
    assert all(line in outputs["console"] for line in SPARK_CONSOLE_LINES), outputs["console"][-3000:]
    assert "Spark's own log goes to" not in outputs["console"]


def test_without_java_a_run_says_what_to_install(spark_project, tmp_path):
    """JAVA_HOME pointing nowhere: PySpark failed with a traceback ending in JAVA_GATEWAY_EXITED; the run now
    fails at once, naming Java 17 and how to get it, and starts no Spark."""
    # A Spark session of an earlier test in this process set SPARK_CONF_DIR to vcmt's log configuration
    # (dbt/adapters/vcmt_spark/spark_log.py): a child inheriting it would look like a user's own Spark set-up,
    # to which the check defers. The child gets this test's environment only.
    proc = spark_project.dbt_process(
        "nojava",
        "run",
        "--select",
        "numbers",
        target="vcmt_spark",
        env={
            "JAVA_HOME": str(tmp_path / "no-java"),
            "SPARK_CONF_DIR": None,
            "SPARK_HOME": None,
            "VCMT_SPARK_LOG": None,
        },
    )
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert f"Spark needs Java 17 or later, and JAVA_HOME={tmp_path / 'no-java'} has no bin/java" in out, out[-3000:]
    assert "openjdk-17-jre-headless" in out
    assert "JAVA_GATEWAY_EXITED" not in out and "Traceback" not in out, out[-3000:]


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21-ea"', 21),
        ('openjdk version "11.0.2" 2019-01-15', 11),
        ("no version here", None),
    ],
)
def test_java_major_reads_every_version_scheme(text, major):
    from dbt.adapters.vcmt_spark.java import java_major

    assert java_major(text) == major


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('openjdk version "11.0.2" 2019-01-15\nOpenJDK Runtime Environment', 'openjdk version "11.0.2" 2019-01-15'),
        ('Picked up JAVA_TOOL_OPTIONS: -Xmx1g\njava version "1.8.0_392"', 'java version "1.8.0_392"'),
        ('Picked up JAVA_TOOL_OPTIONS: -Dapp.version=2\nopenjdk version "11.0.2"', 'openjdk version "11.0.2"'),
        ("Error: could not open `lib/jvm.cfg'", "Error: could not open `lib/jvm.cfg'"),
        ("", "no version"),
    ],
)
def test_a_refused_java_is_named_by_its_version_line(text, line):
    """The message quotes the line that names the version, not a JVM's notice of JAVA_TOOL_OPTIONS before it."""
    from dbt.adapters.vcmt_spark.java import version_line

    assert version_line(text) == line


def test_the_java_on_this_machine_is_accepted(monkeypatch):
    from dbt.adapters.vcmt_spark import java

    java.java_problem.cache_clear()
    assert java.java_problem() is None
    java.java_problem.cache_clear()
    monkeypatch.setenv("JAVA_HOME", "/nonexistent-java-home")
    assert "JAVA_HOME=/nonexistent-java-home has no bin/java" in java.java_problem()
    java.java_problem.cache_clear()


def test_spark_log_leaves_a_configuration_of_the_users_alone(tmp_path, monkeypatch):
    """A SPARK_CONF_DIR, a SPARK_HOME with a conf/ folder (Spark reads no other), VCMT_SPARK_LOG=console:
    nothing is redirected, and the Java check is left to Spark (that configuration may set JAVA_HOME)."""
    from dbt.adapters.vcmt_spark import spark_log

    monkeypatch.setattr(spark_log, "spark_started", lambda: False)
    for name in ("SPARK_CONF_DIR", "SPARK_HOME", spark_log.LOG_ENV):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home" / "conf").mkdir(parents=True)
    for env in (
        {"SPARK_CONF_DIR": str(tmp_path / "mine")},
        {"SPARK_HOME": str(tmp_path / "home")},
        {spark_log.LOG_ENV: "console"},
    ):
        with monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
            assert spark_log.quiet_session_log(tmp_path / "logs") is None, env
            assert os.environ.get("SPARK_CONF_DIR") == env.get("SPARK_CONF_DIR"), env
    assert not (tmp_path / "logs").exists()
    # A SPARK_HOME without conf/ (PySpark's own install has none) is redirected.
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    log_file = spark_log.quiet_session_log(tmp_path / "logs")
    assert log_file == (tmp_path / "logs" / "spark.log").resolve()
    assert os.environ["SPARK_CONF_DIR"] == str(log_file.parent / "spark-conf")


def test_spark_log_file_name_is_a_valid_properties_value(tmp_path):
    """Java reads .properties files as Latin-1 with backslash escapes: a non-ASCII or backslashed log path
    is written as \\u escapes (UTF-16 code units), and reading it back as Java does gives the path."""
    from dbt.adapters.vcmt_spark.spark_log import write_log_config

    log_file = tmp_path / "josé" / "a\\b" / "😀.log"
    conf = write_log_config(tmp_path / "conf", log_file)
    text = (conf / "log4j2.properties").read_bytes().decode("latin-1")
    (line,) = [x for x in text.splitlines() if x.startswith("appender.out.fileName = ")]
    value = line.split(" = ", 1)[1]
    assert value.isascii()
    assert value.encode("ascii").decode("unicode_escape").encode("utf-16", "surrogatepass").decode("utf-16") == str(
        log_file
    )
