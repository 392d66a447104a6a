"""Shared pytest fixtures: throwaway dbt projects on the real chDB engine (and Spark).

Every test gets its own dbt project folder and its own ClickHouse database
(schema) inside one chDB data directory for the whole session, because chDB
allows one engine path per process.
"""

from __future__ import annotations

import os
import re
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from vcmt_lab.dbt_project import DbtProject

REPO_ROOT = Path(__file__).resolve().parents[1]
# The package under test; override to test another checkout of it.
PACKAGE_ROOT = Path(os.environ.get("VCMT_PACKAGE_ROOT", REPO_ROOT))


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


def make_project(root: Path, name: str, chdb_path: Path, lab_dir: Path, **options) -> DbtProject:
    """A dbt project under `root` that installs this package with `local:`, in its own schema."""
    return DbtProject(
        root=root, package_root=PACKAGE_ROOT, chdb_path=chdb_path, schema=_schema_for(name), lab_dir=lab_dir,
        **options,
    )


@pytest.fixture
def project(request, tmp_path: Path, chdb_path: Path, lab_dir: Path) -> Iterator[DbtProject]:
    """A fresh dbt project per test."""
    proj = make_project(tmp_path / "proj", request.node.name, chdb_path, lab_dir)
    yield proj
    proj.close()


@pytest.fixture(scope="module")
def module_project(request, tmp_path_factory, chdb_path: Path, lab_dir: Path) -> Iterator[DbtProject]:
    """One project shared by a test module: a full dbt parse of a fresh project costs seconds."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    proj = make_project(tmp_path_factory.mktemp(name) / "proj", name, chdb_path, lab_dir)
    yield proj
    proj.close()


def dedent(sql: str) -> str:
    return textwrap.dedent(sql).strip() + "\n"
