"""VCMT fixture tables and dbt result readers shared by the generic-test scenarios."""

from __future__ import annotations

from typing import Any

import yaml

from vcmt_lab.dbt_project import DbtProject, DbtRun

COLUMNS = "k UInt64, _version UInt64, sign Int8, status String, amount Float64"

# A correct history at rest, before any merge: key 1 updated (cancel + new
# state), key 2 inserted once, key 3 inserted and deleted.
GOOD_ROWS: list[tuple] = [
    (1, 1, 1, "open", 10.1),
    (1, 1, -1, "open", 10.1),
    (1, 2, 1, "shipped", 12.2),
    (2, 1, 1, "open", 5.05),
    (3, 1, 1, "open", 7.7),
    (3, 1, -1, "open", 7.7),
]


def vcmt_table_sql(rows: list[tuple], *, unique_key: str | None = "k", config: str = "") -> str:
    """Model SQL for a table-materialized VCMT table holding exactly `rows`, uncollapsed."""
    settings = [
        "materialized='table'",
        "engine='VersionedCollapsingMergeTree(sign, _version)'",
        "order_by='k'",
        # Keep +1/-1 pairs of one insert: the tests must see the stored history.
        "query_settings={'optimize_on_insert': 0}",
    ]
    if unique_key:
        settings.append(f"unique_key='{unique_key}'")
    if config:
        settings.append(config)
    values = ", ".join(repr(row) for row in rows)
    return f"{{{{ config({', '.join(settings)}) }}}}\nselect * from values('{COLUMNS}', {values})"


def build_scenarios(
    project: DbtProject,
    folder: str,
    models: dict[str, str],
    tests: dict[str, tuple],
    seeds: dict[str, str] | None = None,
) -> None:
    """Write models (and seeds) into `folder`, attach the tests and build everything but the tests.

    `tests` maps a test node name to (model, vcmt generic test, arguments[, test config]).
    """
    for name, csv in (seeds or {}).items():
        project.seed(f"{folder}/{name}", csv)
    for name, sql in models.items():
        project.model(f"{folder}/{name}", sql)
    data_tests: dict[str, list] = {name: [] for name in models}
    for test_name, (model, generic, arguments, *config) in tests.items():
        properties: dict[str, Any] = {"name": test_name, "arguments": arguments}
        if config:
            properties["config"] = config[0]
        data_tests[model].append({f"vcmt.{generic}": properties})
    project.write(
        f"models/{folder}/_tests.yml",
        yaml.safe_dump(
            {"version": 2, "models": [{"name": m, "data_tests": t} for m, t in data_tests.items()]},
            sort_keys=False,
        ),
    )
    selection = [f"path:models/{folder}"] + ([f"path:seeds/{folder}"] if seeds else [])
    project.dbt("build", "--select", *selection, "--exclude-resource-type", "test")


def run_test(project: DbtProject, test_name: str, *, expect_pass: bool) -> tuple[str, int | None, DbtRun]:
    """Run one test node; return its status ('pass', 'fail', 'error'), failure count and the run."""
    run = project.dbt("test", "--select", test_name, expect_pass=expect_pass)
    # The package's on-run-end hook (it releases a failed run's locks) is a result of its own.
    (result,) = [r for r in run.result.result.results if r.node.resource_type == "test"]
    return str(result.status), result.failures, run


def failure_logged(run: DbtRun, test_name: str) -> bool:
    """The run's log names the failed test: "Failure in test <name>" up to dbt-core 1.11, "[ERROR]: in test
    <name> (<file>)" from 1.12."""
    return f"Failure in test {test_name}" in run.log or f"in test {test_name} (" in run.log


def failing_rows(project: DbtProject, test_name: str) -> list[tuple]:
    """The rows a compiled generic test returns, run on the same engine."""
    compiled = next((project.root / "target" / "compiled").rglob(f"{test_name}.sql"))
    return project.query(compiled.read_text())
