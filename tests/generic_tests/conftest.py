"""Fixtures for the vcmt generic-test scenarios.

A fresh dbt project pays a full parse of the package (several seconds), so all
scenarios share one project and one schema: each test module writes its models
into its own folder and builds them once, then every scenario runs its own
`dbt test --select <test>`, which re-parses only what changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_project
from vcmt_lab.dbt_project import DbtProject


@pytest.fixture(scope="session")
def generic_tests_project(tmp_path_factory, chdb_path: Path, lab_dir: Path) -> Iterator[DbtProject]:
    """One dbt project for all generic-test scenarios."""
    proj = make_project(tmp_path_factory.mktemp("generic_tests") / "proj", "generic_tests", chdb_path, lab_dir)
    yield proj
    proj.close()
