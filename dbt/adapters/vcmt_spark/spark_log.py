"""Spark's own log in a file, not on the user's console (docs/adapters.md#how-the-spark-targets-work).

A `method: session` target starts Spark's JVM inside the dbt process, and by
default Spark prints its log4j banner, warnings and progress bars on the
console between dbt's lines. Before that JVM starts, the adapter points
`SPARK_CONF_DIR` at a folder holding a log4j2 configuration that writes
Spark's log (WARN and above) to `<dbt log path>/spark.log`, and a
`spark-defaults.conf` without console progress bars; pyspark's and py4j's
Python loggers go to the same file. dbt prints one line saying where.

Left alone: a configuration of the user's (`SPARK_CONF_DIR`, or a `conf/`
folder in `SPARK_HOME`: Spark would read no other, so it wins), a JVM
already running in the process, and `VCMT_SPARK_LOG=console` (Spark's
usual console output). A few lines the JVM itself writes before its log
starts (the JDK's incubator-module notice) stay on the console.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

# Set to `console` to keep Spark's log on the console.
LOG_ENV = "VCMT_SPARK_LOG"
LOG_FILE = "spark.log"

_LOG4J2 = """\
# Written by vcmt: Spark's log goes to {target}, not the console.
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
appender.out.name = out
{appender}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c{{1}}: %m%n%ex
# As Spark's own template: third-party chatter stays at WARN and above.
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.hive.name = org.apache.hadoop.hive
logger.hive.level = warn
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = warn
logger.parquet.name = org.apache.parquet
logger.parquet.level = warn
"""


def write_log_config(conf_dir: Path, log_file: Path | None, level: str = "info") -> Path:
    """A SPARK_CONF_DIR holding log4j2.properties: to `log_file`, or to stderr when None.

    Every JVM started through PySpark's `bin/` scripts with SPARK_CONF_DIR set
    reads it from its classpath: the in-process session's driver, a server,
    and the executors a local-cluster worker starts.
    """
    conf_dir.mkdir(parents=True, exist_ok=True)
    if log_file is None:
        target, appender = "stderr", "appender.out.type = Console\nappender.out.target = SYSTEM_ERR"
    else:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        target, appender = log_file, f"appender.out.type = File\nappender.out.fileName = {_property(log_file)}"
    _write(conf_dir / "log4j2.properties", _LOG4J2.format(target=target, level=level, appender=appender))
    return conf_dir


def _property(path: Path) -> str:
    """`path` as a .properties value: Java reads those files as Latin-1 and takes `\\` as an escape."""
    out = []
    for c in str(path):
        if c.isascii() and c != "\\":
            out.append(c)
        else:  # as UTF-16 code units, a surrogate pair beyond the first 65,536 code points
            units = c.encode("utf-16-be")
            out += [f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2)]
    return "".join(out)


def _write(path: Path, text: str) -> None:
    """Replace `path` whole (two dbt runs may write the same file while a JVM reads it)."""
    if path.exists() and path.read_text(encoding="latin-1", errors="replace") == text:
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text, encoding="latin-1", errors="backslashreplace")
    os.replace(temporary, path)


def log_to_file(log_file: Path) -> Path:
    """Spark's JVM log (WARN and above), without progress bars, and pyspark's and py4j's Python loggers, to
    `log_file`, for JVMs started after this call. Returns `log_file`."""
    conf_dir = write_log_config(log_file.parent / "spark-conf", log_file, level="warn")
    _write(conf_dir / "spark-defaults.conf", "spark.ui.showConsoleProgress false\n")
    os.environ["SPARK_CONF_DIR"] = str(conf_dir)
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("py4j", "pyspark"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.propagate = False
    return log_file


def user_spark_conf() -> Path | None:
    """The Spark configuration folder of the user's that Spark would read: SPARK_CONF_DIR, or SPARK_HOME/conf."""
    if os.environ.get("SPARK_CONF_DIR"):
        return Path(os.environ["SPARK_CONF_DIR"])
    home = os.environ.get("SPARK_HOME")
    return Path(home) / "conf" if home and (Path(home) / "conf").is_dir() else None


def spark_started() -> bool:
    try:
        from pyspark import SparkContext
    except ImportError:
        return False
    return SparkContext._gateway is not None  # noqa: SLF001 (pyspark's one handle on its JVM)


def quiet_session_log(log_dir: Path) -> Path | None:
    """Before a `method: session` target's JVM starts: Spark's log to `log_dir`/spark.log (see the module's
    docstring for what is left alone). Returns the log file, or None when nothing was changed."""
    if os.environ.get(LOG_ENV, "").strip().lower() == "console" or user_spark_conf() or spark_started():
        return None
    return log_to_file(Path(log_dir).resolve() / LOG_FILE)
