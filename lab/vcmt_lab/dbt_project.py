"""Drive dbt in-process against a generated dbt project that installs this package.

Used by the tests, the fuzzer, the benchmark and the demo: one place that knows
how to write a project, its profile (chdb and spark targets) and run dbt.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import clickhouse_connect
import yaml
from dbt.adapters.chdb.client import query_log_config_file

from vcmt_cli.dbt_invoke import DbtRun, invoke

PROJECT_NAME = "vcmt_test_project"
# The dbt-clickhouse drivers a served node is reached with.
SERVER_DRIVERS = ("http", "native")


@dataclass(frozen=True)
class Engine:
    """The ClickHouse a project's ClickHouse target runs on: `chdb`, the embedded engine in this process
    (`type: chdb`), or a served node reached by dbt-clickhouse (`type: clickhouse`) over `http` or
    `native`. With `cluster`, the profile names that cluster of the node's config (sharded models). With
    `query_log` (chdb only), the engine keeps system.query_log: the profile sets the adapter's `query_log: true`,
    and this process's clients open the engine with the same config (a node keeps it when started with
    `query_logs=True`)."""

    kind: str
    chdb_path: Path | None = None
    node: Any = None  # vcmt_lab.clickhouse_server.ServedNode
    cluster: str | None = None
    query_log: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("chdb", *SERVER_DRIVERS):
            raise ValueError(f"engine kind must be chdb, http or native; got {self.kind!r}")
        if (self.kind == "chdb") != (self.node is None):
            raise ValueError("chdb takes a chdb_path, http and native a served node")
        if self.query_log and self.served:
            raise ValueError("query_log is the embedded engine's option: start a node with query_logs=True instead")

    @property
    def served(self) -> bool:
        return self.node is not None

    @property
    def target(self) -> str:
        """The profile output's name."""
        return "chdb" if self.kind == "chdb" else "clickhouse"

    def output(self, schema: str, custom_settings: dict[str, Any]) -> dict[str, Any]:
        extra: dict[str, Any] = {"custom_settings": custom_settings} if custom_settings else {}
        if self.cluster:
            extra["cluster"] = self.cluster
        if self.served:
            return self.node.dbt_output(schema, driver=self.kind, **extra)
        if self.query_log:
            extra["query_log"] = True
        return {"type": "chdb", "path": str(self.chdb_path), "schema": schema, "threads": 1, **extra}

    def client(self, schema: str):
        """A client of the same engine, in database `schema` (created if missing)."""
        if self.served:
            # On a cluster, on every node (as dbt-clickhouse creates a schema there).
            on_cluster = f" on cluster `{self.cluster}`" if self.cluster else ""
            self.node.client().command(f"create database if not exists `{schema}`{on_cluster}")
            return self.node.client(schema)
        options = {"chdb_options": {"config-file": query_log_config_file()}} if self.query_log else {}
        bootstrap = clickhouse_connect.get_client(interface="chdb", path=str(self.chdb_path), **options)
        bootstrap.command(f"create database if not exists `{schema}`")
        bootstrap.close()
        return clickhouse_connect.get_client(interface="chdb", path=str(self.chdb_path), database=schema, **options)


# The run-operation that names a model's objects from vcmt's registry (macros/vcmt/model/objects.sql).
OBJECT_NAMES_OPERATION = ("run-operation", "vcmt._log_object_names", "--args")


def object_names(run: DbtRun) -> dict[str, str]:
    """role -> table name, from the log of OBJECT_NAMES_OPERATION."""
    found = re.search(r"vcmt_objects (\{.*\})", run.log)
    if not found:
        raise RuntimeError(f"vcmt._log_object_names gave no names: {run.log[-2000:]}")
    return json.loads(found.group(1))


def spark_session_parameters(lab_dir: Path) -> dict[str, str]:
    """The local Spark session of the `spark` and `vcmt_spark` targets.

    Tests that build a session themselves use the same parameters, so that
    dbt's `method: session` later finds the same session (getOrCreate) in
    the same process, Hive metastore included.
    """
    return {
        "spark.master": "local[2]",
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": str(lab_dir / "spark" / "warehouse"),
        # The Hive metastore (Derby) and its log stay in the lab, not in the cwd.
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={lab_dir / 'spark' / 'metastore_db'};create=true"
        ),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={lab_dir / 'spark'}",
        "spark.sql.session.timeZone": "UTC",
        # As dbt-spark's credentials force it: casts of bad input give NULL instead of failing.
        "spark.sql.ansi.enabled": "false",
    }


@dataclass
class DbtProject:
    root: Path
    package_root: Path
    chdb_path: Path
    schema: str
    lab_dir: Path
    vars: dict[str, Any] = field(default_factory=dict)
    # The chdb target's `custom_settings` (session settings of every dbt query).
    custom_settings: dict[str, Any] = field(default_factory=dict)
    # Running Spark servers, "connect" / "thrift" -> (host, port): targets spark_connect and spark_thrift.
    spark_servers: dict[str, tuple[str, int]] = field(default_factory=dict)
    # A dbt project (examples/cdc) whose models, macros, vars and model configs this project starts with.
    example: Path | None = None
    # The ClickHouse target's engine; by default the embedded one at `chdb_path`.
    engine: Engine | None = None
    # Whether `dbt` (in-process) writes manifest.json and run_results.json: only for a test that reads them
    # (dbt docs, retry, clone); writing them costs about a third of a small run.
    write_json: bool = False
    _client: Any = None

    def __post_init__(self) -> None:
        if self.engine is None:
            self.engine = Engine("chdb", chdb_path=self.chdb_path)
        self.root.mkdir(parents=True, exist_ok=True)
        project = {
            "name": PROJECT_NAME,
            "version": "1.0",
            "config-version": 2,
            "profile": "vcmt_test",
            "model-paths": ["models"],
            "seed-paths": ["seeds"],
            "macro-paths": ["macros"],
            "test-paths": ["tests"],
            "flags": {"send_anonymous_usage_stats": False},
        }
        if self.example is not None:
            project.update(self._from_example(self.example))
        for sub in ("models", "seeds", "macros", "tests"):
            (self.root / sub).mkdir(exist_ok=True)
        self._write_yaml("dbt_project.yml", project)
        self._write_yaml("packages.yml", {"packages": [{"local": str(self.package_root)}]})
        self._write_profiles()
        self._deps_done = False

    def use_custom_settings(self, settings: dict[str, Any]) -> None:
        """From the next dbt command on, the ClickHouse target's `custom_settings` are `settings` (a profile
        edited between runs)."""
        self.custom_settings = dict(settings)
        self._write_profiles()

    def _write_profiles(self) -> None:
        spark_session_target = {
            "method": "session",
            "host": "localhost",
            "schema": self.schema,
            "threads": 1,
            "server_side_parameters": spark_session_parameters(self.lab_dir),
        }
        self._write_yaml(
            "profiles.yml",
            {
                "vcmt_test": {
                    "target": self.engine.target,
                    "outputs": {
                        self.engine.target: self.engine.output(self.schema, self.custom_settings),
                        "spark": {"type": "spark", **spark_session_target},
                        # dbt-spark plus Python models on the same session (dbt/adapters/vcmt_spark); two
                        # threads, as in profiles.yml: independent models run at the same time.
                        "vcmt_spark": {"type": "vcmt_spark", **spark_session_target, "threads": 2},
                        **self._spark_server_targets(),
                    },
                }
            },
        )

    def _from_example(self, example: Path) -> dict[str, Any]:
        """Copy `example`'s models and macros here; its vars and model configs, for this project's name."""
        config = yaml.safe_load((example / "dbt_project.yml").read_text())
        for sub in ("models", "macros"):
            if (example / sub).is_dir():
                shutil.copytree(example / sub, self.root / sub, dirs_exist_ok=True)
        models = next(iter((config.get("models") or {}).values()), {})
        return {"vars": config.get("vars") or {}, "models": {PROJECT_NAME: models}}

    def _spark_server_targets(self) -> dict[str, dict[str, Any]]:
        """spark_connect / spark_thrift targets, as in the repository's profiles.yml, on the given servers."""
        methods = {"connect": ("spark_connect", "vcmt_spark", {}), "thrift": ("spark_thrift", "spark", {"user": "dbt"})}
        targets = {}
        for kind, (host, port) in self.spark_servers.items():
            name, adapter_type, extra = methods[kind]
            targets[name] = {
                "type": adapter_type,
                "method": kind,
                "host": host,
                "port": port,
                **extra,
                "schema": self.schema,
                "threads": 1,
                "server_side_parameters": {"spark.sql.session.timeZone": "UTC"},
            }
        return targets

    # -- files ---------------------------------------------------------------
    def _write_yaml(self, rel: str, data: Any) -> None:
        (self.root / rel).write_text(yaml.safe_dump(data, sort_keys=False))

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).strip() + "\n")
        return path

    def model(self, name: str, sql: str) -> Path:
        return self.write(f"models/{name}.sql", sql)

    def seed(self, name: str, csv_text: str) -> Path:
        return self.write(f"seeds/{name}.csv", csv_text)

    def remove(self, rel: str) -> None:
        path = self.root / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    # -- dbt -----------------------------------------------------------------
    @property
    def ch_target(self) -> str:
        """The name of the ClickHouse target (the profile's default)."""
        return self.engine.target

    def dbt(self, *args: str, expect_pass: bool = True, target: str | None = None) -> DbtRun:
        """Run one dbt command in-process (on the ClickHouse target unless `target`); assert it passed or
        failed as expected."""
        target = target or self.ch_target
        if args and args[0] == "debug":
            return self._checked(self._invoke([*args, "--target", target], common=False), args, expect_pass)
        self._ensure_deps()
        cli = [*args, "--target", target]
        if self.vars:
            cli += ["--vars", json.dumps(self.vars)]
        if not self.write_json:
            cli.append("--no-write-json")
        return self._checked(self._invoke(cli), args, expect_pass)

    @staticmethod
    def _checked(run: DbtRun, args: tuple[str, ...], expect_pass: bool) -> DbtRun:
        if run.success != expect_pass:
            raise AssertionError(
                f"dbt {' '.join(args)} expected {'success' if expect_pass else 'failure'}, "
                f"got {'success' if run.success else 'failure'}:\n{run.log[-6000:]}"
            )
        return run

    def dbt_subprocess(self, *args: str, target: str, timeout: float = 900) -> subprocess.CompletedProcess:
        """Run one dbt command in a fresh Python process and assert it passed.

        For a Spark Connect target: PySpark cannot run a local session and
        Spark Connect clients in one process (docs/adapters.md#how-the-spark-targets-work).
        """
        self._ensure_deps()
        cli = [*args, "--target", target, *(["--vars", json.dumps(self.vars)] if self.vars else [])]
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "dbt"), *self._cli(cli)], capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"dbt {' '.join(args)} --target {target} failed:\n{proc.stdout[-6000:]}{proc.stderr[-3000:]}"
            )
        return proc

    def dbt_process(
        self,
        name: str,
        *args: str,
        target: str | None = None,
        env: dict[str, str | None] | None = None,
        program: list[str] | None = None,
    ) -> subprocess.Popen:
        """Start one dbt command in its own process, with its own target and log folders (`target_<name>`,
        `logs_<name>`), so that several run at once; its output (text) is in `stdout`. `env` changes its
        environment (None removes a variable); `program` runs instead of the `dbt` command (with the same
        arguments)."""
        self._ensure_deps()
        own = [
            "--target",
            target or self.ch_target,
            *(["--vars", json.dumps(self.vars)] if self.vars else []),
            "--target-path",
            str(self.root / f"target_{name}"),
            "--log-path",
            str(self.root / f"logs_{name}"),
        ]
        cli = [*(program or [str(Path(sys.executable).with_name("dbt"))]), *self._cli([*args, *own], common=False)]
        environment = {**os.environ, "DO_NOT_TRACK": "1", **(env or {})}
        # The project's parse as its last in-process run saved it: a process with its own target path would parse
        # the whole project again (seconds of CPU each). dbt reparses what changed, or all of it when the vars or
        # the target differ, and writes its own parse to its own target path.
        parsed = self.root / "target" / "partial_parse.msgpack"
        if parsed.exists():
            environment.setdefault("DBT_PARTIAL_PARSE_FILE_PATH", str(parsed))
        return subprocess.Popen(
            cli,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={k: v for k, v in environment.items() if v is not None},
        )

    def _ensure_deps(self) -> None:
        if not self._deps_done:
            deps = self._invoke(["deps"], common=False)
            if not deps.success:
                raise AssertionError(f"dbt deps failed:\n{deps.log[-4000:]}")
            self._deps_done = True

    def _cli(self, args: list[str], common: bool = True) -> list[str]:
        cli = [*args, "--project-dir", str(self.root), "--profiles-dir", str(self.root)]
        if common:
            cli += ["--log-path", str(self.root / "logs"), "--target-path", str(self.root / "target")]
        return cli

    def _invoke(self, args: list[str], common: bool = True) -> DbtRun:
        return invoke(self._cli(args, common))

    def object_names(self, model: str) -> dict[str, str]:
        """`model`'s objects, role -> table name, as vcmt.objects names them."""
        return object_names(self.dbt(*OBJECT_NAMES_OPERATION, json.dumps({"model": model})))

    def writer_args(self) -> dict[str, Any]:
        """The keyword arguments of vcmt_cli.load_stage's loaders for this project's ClickHouse target."""
        return {
            "profiles_dir": self.root,
            "target": self.ch_target,
            "extra_args": ["--log-path", str(self.root / "logs"), "--target-path", str(self.root / "target")],
        }

    def load_rows(self, model: str, rows: list[dict[str, Any]]) -> str:
        """Apply rows to a vcmt_upsert model through the external writer's path (vcmt.load_stage), from a
        Parquet file (see `load_file`)."""
        from vcmt_cli import load_stage

        if not rows:
            return load_stage.load_rows(rows, model, self.root, **self.writer_args())
        with load_stage.parquet_of(rows) as path:
            return self.load_file(model, path)

    def load_file(self, model: str, path: Path) -> str:
        """Apply a file of events to a vcmt_upsert model: as `vcmt-load-stage` does on the embedded engine; on
        a served node (which refuses `vcmt-load-stage`) as its users do, `vcmt.load_stage` over `file()`
        (the node runs on this machine, so its file system is this one)."""
        from vcmt_cli import load_stage

        if not self.engine.served:
            return load_stage.load_file(path, model, self.root, **self.writer_args())
        return load_stage.load_select(load_stage.file_select(path), model, self.root, **self.writer_args())

    # -- direct SQL on the same engine ------------------------------------------
    @property
    def client(self):
        if self._client is None:
            self._client = self.engine.client(self.schema)
        return self._client

    def query(self, sql: str, **settings: Any) -> list[tuple]:
        return [tuple(r) for r in self.client.query(sql, settings=settings or None).result_rows]

    def scalar(self, sql: str) -> Any:
        rows = self.query(sql)
        return rows[0][0] if rows else None

    def command(self, sql: str, **settings: Any) -> Any:
        return self.client.command(sql, settings=settings or None)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
