"""Shared pytest fixtures: throwaway dbt projects on real ClickHouse engines (and Spark).

Every test gets its own dbt project folder and its own ClickHouse database
(schema). A test runs on the engines its module (or itself) names with
`@pytest.mark.engines(...)`, by default the embedded one only:

- `chdb`: the embedded engine in this process (`type: chdb`), one data
  directory for the whole session (chDB allows one engine path per process);
- `http`, `native`: a node served on 127.0.0.1 for the whole session
  (vcmt_lab.clickhouse_server: ClickHouse 26.9's own server code in chDB's
  local-server mode), reached by dbt-clickhouse (`type: clickhouse`) over
  that driver.

Parametrised tests show the engine in their id: `test_x[http]`. A module whose
tests prove what the engine computes, not what a driver carries, names its
other engines as `matrix=(...)`: `VCMT_ENGINE_MATRIX=1 make test` runs them
there too; make test runs the named engines only (README, "two commands").
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import textwrap
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbt_common.tests import enable_test_caching

from vcmt_lab.clickhouse_cluster import Cluster, start_cluster
from vcmt_lab.clickhouse_server import ServedNode, start_node
from vcmt_lab.dbt_project import DbtProject, Engine

REPO_ROOT = Path(__file__).resolve().parents[1]
# The package under test; override to test another checkout of it.
PACKAGE_ROOT = Path(os.environ.get("VCMT_PACKAGE_ROOT", REPO_ROOT))


# A project macro that takes the place of dbt-clickhouse's DCL dispatch: each GRANT and REVOKE dbt would send is
# logged as `vcmt_test_dcl <statement>` instead. The lab's served nodes keep their users in users.xml, where the
# engine stores no grant (system.grants lists those users' privileges all the same, and dbt reads them there);
# which relations get which grants and revokes is then read from the log (logged_dcl).
LOGGED_DCL = """
{% macro clickhouse__call_dcl_statements(dcl_statement_list) %}
  {%- for s in dcl_statement_list -%}{{ log('vcmt_test_dcl ' ~ (s.split() | join(' ')), info=true) }}{%- endfor -%}
{% endmacro %}
"""


def logged_dcl(log: str) -> list[str]:
    """The GRANT and REVOKE statements LOGGED_DCL logged in a dbt log, sorted."""
    return sorted(re.findall(r"vcmt_test_dcl (.*)", log))


def operations_queries() -> list[str]:
    """Every SQL statement of docs/operations.md's ```sql blocks, as the page writes it (schema `analytics`)."""
    page = (REPO_ROOT / "docs" / "operations.md").read_text()
    return [q.strip() for block in re.findall(r"```sql\n(.*?)```", page, re.S) for q in block.split(";") if q.strip()]


@pytest.fixture(scope="session")
def lab_dir(tmp_path_factory) -> Path:
    """One folder per pytest session for the chDB data dir and the Spark warehouse."""
    root = tmp_path_factory.mktemp("lab")
    os.environ.setdefault("VCMT_SPARK_WAREHOUSE", str(root / "spark" / "warehouse"))
    os.environ.setdefault("VCMT_SPARK_METASTORE", str(root / "spark" / "metastore_db"))
    os.environ.setdefault("VCMT_SPARK_DERBY_HOME", str(root / "spark"))
    return root


@pytest.fixture(scope="session")
def chdb_path(lab_dir: Path) -> Path:
    return lab_dir / "chdb"


def _schema_for(node_name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", node_name.lower()).strip("_")[:40]
    return f"t_{slug}_{uuid.uuid4().hex[:6]}"


ENGINES = ("chdb", "http", "native")
# Every engine a module names, its `matrix` ones included (`VCMT_ENGINE_MATRIX=1`).
ENGINE_MATRIX = os.environ.get("VCMT_ENGINE_MATRIX") == "1"


# What every JVM a test starts runs with (pytest_configure).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    # dbt's own test fixtures do this (dbt-core #9498/#9499, dbt-common #56): in-process dbt runs keep the Jinja
    # parse of a text they parsed before (its AST, top-level blocks and macro calls, keyed by the text). Each test
    # has its own project, profile and schema, so each test's first dbt command parses the whole project; without
    # this that is about 3.5 s of CPU, parsing the same dbt, dbt-clickhouse and vcmt macros again: a fifth
    # of make test's time. Everything after the parse (the manifest, compilation, every statement) is as
    # before; a changed file is a new text and is parsed anew. dbt started in its own process does not share it.
    enable_test_caching()
    # Every JVM the tests start (Spark sessions, the Spark Connect and Thrift servers and their executors) inherits
    # this: JIT-compiled to C1 only, one GC thread. A test's JVM lives minutes and runs small data, so the optimising
    # compiler's threads cost more CPU than its code gains back, on cores the tests share. Measured alone, 2 idle
    # cores, 2026-11-30: tests/spark_servers 392 core-seconds in 224 s before, 219 in 145 s after; two session
    # modules (Debezium decoding, Python models) 212 core-seconds in 143 s before, 164 in 160 s after. The JVM says
    # so on its stderr ("Picked up JAVA_TOOL_OPTIONS"). Set it yourself to run the tests with other flags (empty: none).
    os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JVM_OPTIONS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`engine` takes the engines of the closest `engines` mark (default: the embedded one), and its `matrix`
    ones under VCMT_ENGINE_MATRIX=1 (not collected otherwise: nothing counts them as run)."""
    if "engine" in metafunc.fixturenames:
        mark = metafunc.definition.get_closest_marker("engines")
        kinds = mark.args if mark else ("chdb",)
        if mark and ENGINE_MATRIX:
            kinds = (*kinds, *mark.kwargs.get("matrix", ()))
        unknown = set(kinds) - set(ENGINES)
        if unknown:
            raise ValueError(f"engines mark: unknown engine(s) {sorted(unknown)}; known: {ENGINES}")
        metafunc.parametrize("engine", kinds, indirect=True, scope="module")


# Seconds a module takes, roughly (the sum of its tests' times in `make test`, pytest --junitxml, on 2 idle
# cores, 2026-11-30), longest first, for those of 15 s or more. Any other module counts LONG_TEST_SECONDS per test,
# at most UNLISTED_MODULE_MAX_SECONDS. Only an order, never a selection: a stale figure costs time, not coverage.
MODULE_SECONDS = {
    "tests/materialization/test_sharded.py": 415,
    "tests/server/test_overlapping_loads.py": 365,
    "tests/server/test_faults.py": 175,
    "tests/cdc/test_staged_lake.py": 160,
    "tests/fuzz/test_fuzz.py": 145,
    "tests/materialization/test_crash.py": 145,
    "tests/cdc/test_debezium_decoding.py": 140,
    "tests/materialization/test_semantics.py": 135,
    "tests/cdc/test_python_models_session.py": 85,
    "tests/materialization/test_validation.py": 85,
    "tests/materialization/test_external_writer.py": 75,
    "tests/materialization/test_lifecycle_safety.py": 70,
    "tests/materialization/test_lifecycle.py": 70,
    "tests/e2e/test_demo.py": 70,
    "tests/materialization/test_cdc_events.py": 60,
    "tests/bench/test_bench_smoke.py": 50,
    "tests/materialization/test_reliability.py": 45,
    "tests/materialization/test_downstream.py": 35,
    "tests/materialization/test_virtual_shards.py": 35,
    "tests/cdc/test_lake_records.py": 35,
    "tests/cdc/test_staging_amended_batches.py": 35,
    "tests/cdc/test_fixtures_to_marts.py": 30,
    "tests/cdc/test_staging_spark.py": 30,
    "tests/bench/test_rows_read.py": 30,
    "tests/bench/test_statements_bench.py": 35,
    "tests/cdc/test_staging_exact_values.py": 25,
    "tests/materialization/test_dbt_features.py": 25,
    "tests/test_layout.py": 25,
    "tests/adapter/test_engine_path.py": 25,
    "tests/adapter/test_server_parity.py": 20,
    "tests/server/test_a_models_schema.py": 20,
    "tests/cdc/test_python_staging_model.py": 20,
    "tests/generic_tests/test_dbt_tests_on_vcmt_models.py": 20,
    "tests/server/test_lake_on_server.py": 15,
}
LONG_TEST_SECONDS = 3
UNLISTED_MODULE_MAX_SECONDS = 15  # below every listed module: an unlisted one goes out after them


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, modules in order of their expected time, longest first (make test runs
    `--dist loadscope --no-loadscope-reorder`: a worker takes a whole module, the next in this order, when
    it is free). Started last, the short ones let both workers end together; a long module left for the end
    would run alone on one of them."""
    if not hasattr(config, "workerinput"):  # not a pytest-xdist worker (a worker's own `dist` option is "no")
        return
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(
        by_module,
        key=lambda m: -MODULE_SECONDS.get(m, min(UNLISTED_MODULE_MAX_SECONDS, LONG_TEST_SECONDS * len(by_module[m]))),
    )
    items[:] = [item for module in order for item in by_module[module]]


def _ignored_signals() -> int:
    """The signals this process ignores, as the kernel has them (/proc/self/status `SigIgn`): a native library's
    `signal(..., SIG_IGN)` does not show in Python's `signal.getsignal`."""
    with open("/proc/self/status") as status:
        return int(re.search(r"^SigIgn:\s*([0-9a-f]+)$", status.read(), re.M).group(1), 16)


# What the test process ignored when it started (Python itself ignores SIGPIPE and SIGXFSZ).
_IGNORED_AT_START = _ignored_signals()


@pytest.fixture(autouse=True)
def _signals_left_as_found(request) -> Iterator[None]:
    """A test (its fixtures included) that leaves a signal ignored in this process is named, and the signal
    restored: every child process a later test starts would inherit it. A dbt started with SIGINT ignored never
    sees a test's Ctrl-C (tests/materialization/test_crash.py, where a pytest started by `nohup ... &` hung so)."""
    yield
    added = _ignored_signals() & ~_IGNORED_AT_START
    if not added:
        return
    names = []
    for number in range(1, signal.NSIG):
        if added >> (number - 1) & 1:
            names.append(signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number))
            handler = signal.getsignal(number)
            try:  # back to the handler Python knows of (SIGINT: KeyboardInterrupt), else to the default
                signal.signal(number, signal.SIG_DFL if handler in (None, signal.SIG_IGN) else handler)
            except (OSError, ValueError):
                pass  # a signal the C library reserves
    warnings.warn(
        f"{request.node.nodeid} left {', '.join(names)} ignored in this pytest worker (restored): "
        "a child process started after it would inherit that",
        pytest.PytestWarning,
        stacklevel=1,
    )


@pytest.fixture(scope="session")
def served_node(lab_dir: Path) -> Iterator[ServedNode]:
    """One served ClickHouse node per test process, started on first use and stopped by PID at the end."""
    node = start_node(lab_dir / "served_node")
    yield node
    node.stop()


@pytest.fixture(scope="session")
def cluster(lab_dir: Path) -> Iterator[Cluster]:
    """A real two-shard cluster (two served nodes) behind its DDL fan-out, the stand-in for the DDL queue
    (vcmt_lab.clickhouse_cluster), started on first use and stopped by PID at the end."""
    started = start_cluster(lab_dir / "cluster")
    yield started
    started.stop()


@pytest.fixture(scope="module")
def engine(request, chdb_path: Path) -> Engine:
    kind = getattr(request, "param", "chdb")
    if kind == "chdb":
        return Engine("chdb", chdb_path=chdb_path)
    return Engine(kind, node=request.getfixturevalue("served_node"))


def make_project(
    root: Path, name: str, chdb_path: Path, lab_dir: Path, schema: str | None = None, **options
) -> DbtProject:
    """A dbt project under `root` that installs this package with `local:`, in its own schema (`schema`, or one
    named after `name`)."""
    return DbtProject(
        root=root,
        package_root=PACKAGE_ROOT,
        chdb_path=chdb_path,
        schema=_schema_for(name) if schema is None else schema,
        lab_dir=lab_dir,
        **options,
    )


@pytest.fixture
def project(request, tmp_path: Path, chdb_path: Path, lab_dir: Path, engine: Engine) -> Iterator[DbtProject]:
    """A fresh dbt project per test, on the test's engine. In a module that sets `SHARE_PROJECT = True`, the
    module's project (module_project) instead, each test's model named `m` (the fixture): a fresh project's
    first run parses the whole project, seconds that most tests spend again and again."""
    if getattr(request.module, "SHARE_PROJECT", False):
        yield request.getfixturevalue("module_project")
        return
    proj = make_project(tmp_path / "proj", request.node.name, chdb_path, lab_dir, engine=engine)
    yield proj
    proj.close()


_model_names = itertools.count()


@pytest.fixture
def m() -> str:
    """A model name of this test's own, for a test in a module whose tests share one project."""
    return f"m{next(_model_names)}"


@pytest.fixture(scope="module")
def module_project(request, tmp_path_factory, chdb_path: Path, lab_dir: Path, engine: Engine) -> Iterator[DbtProject]:
    """One project shared by a test module (per engine): a full dbt parse of a fresh project costs seconds."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    proj = make_project(
        tmp_path_factory.mktemp(f"{name}_{engine.kind}") / "proj", name, chdb_path, lab_dir, engine=engine
    )
    yield proj
    proj.close()


def dedent(sql: str) -> str:
    return textwrap.dedent(sql).strip() + "\n"
