"""Fixtures for the `type: chdb` adapter tests.

A full dbt parse of a fresh project costs a few seconds, so each module builds
one project (same harness as the `project` fixture) and many tests assert on it.
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


@pytest.fixture(scope="module")
def module_project(request, tmp_path_factory, chdb_path: Path, lab_dir: Path) -> Iterator[DbtProject]:
    """A dbt project shared by one test module, in its own schema of the session chDB path."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    proj = DbtProject(
        root=tmp_path_factory.mktemp(name) / "proj",
        package_root=PACKAGE_ROOT,
        chdb_path=chdb_path,
        schema=f"t_{name}_{uuid.uuid4().hex[:6]}",
        lab_dir=lab_dir,
    )
    yield proj
    proj.close()
