"""Fixtures for the vcmt generic-test scenarios.

A fresh dbt project pays a full parse of the package (several seconds), so all
scenarios share one project and one schema: each test module writes its models
into its own folder and builds them once, then every scenario runs its own
`dbt test --select <test>`, which re-parses only what changed. Every
scenario runs on the embedded engine and on a served node over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_project
from vcmt_lab.dbt_project import DbtProject, Engine


@pytest.fixture(scope="session")
def _generic_tests_projects(tmp_path_factory, chdb_path: Path, lab_dir: Path) -> Iterator[dict[str, DbtProject]]:
    """The shared projects, one per engine, made on first use."""
    projects: dict[str, DbtProject] = {}
    yield projects
    for proj in projects.values():
        proj.close()


@pytest.fixture(scope="module")
def generic_tests_project(
    _generic_tests_projects, tmp_path_factory, chdb_path: Path, lab_dir: Path, engine: Engine
) -> DbtProject:
    """One dbt project for all generic-test scenarios on the module's engine."""
    if engine.kind not in _generic_tests_projects:
        _generic_tests_projects[engine.kind] = make_project(
            tmp_path_factory.mktemp(f"generic_tests_{engine.kind}") / "proj",
            "generic_tests",
            chdb_path,
            lab_dir,
            engine=engine,
        )
    return _generic_tests_projects[engine.kind]
