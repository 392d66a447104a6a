"""Fixtures for the vcmt generic-test scenarios.

A fresh dbt project pays a full parse of the package (several seconds), so all
scenarios share one project and one schema: each test module writes its models
into its own folder and builds them once, then every scenario runs its own
`dbt test --select <test>`, which re-parses only what changed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from vcmt_tools.dbt_project import DbtProject

# Same package under test as the `project` fixture (VCMT_PACKAGE_ROOT overrides it there too).
PACKAGE_ROOT = Path(os.environ.get("VCMT_PACKAGE_ROOT", Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="session")
def generic_tests_project(tmp_path_factory, chdb_path: Path, lab_dir: Path) -> Iterator[DbtProject]:
    """One dbt project, in its own schema of the session chDB path, for all generic-test scenarios."""
    proj = DbtProject(
        root=tmp_path_factory.mktemp("generic_tests") / "proj",
        package_root=PACKAGE_ROOT,
        chdb_path=chdb_path,
        schema=f"t_generic_tests_{uuid.uuid4().hex[:6]}",
        lab_dir=lab_dir,
    )
    yield proj
    proj.close()
