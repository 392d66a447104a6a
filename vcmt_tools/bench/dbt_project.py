"""The throwaway dbt project that builds the bench model with vcmt_upsert.

It installs this repository as a local package, so the target, stage,
transform and helpers are exactly what the materialization generates; the
model reads the reference article's columns from one input table.
"""

from __future__ import annotations

import shutil
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from dbt.cli.main import dbtRunner

MODEL = "bench_vcmt"
EVENTS = "bench_events"
PROJECTION = "by_department"
PROJECTION_QUERY = "select Department, sum(sign), sum(metric1 * sign) group by Department"

_MODEL_SQL = f"""
{{{{ config(
    materialized='vcmt_upsert',
    unique_key='id',
    partition_by='id % 20',
    settings={{'index_granularity': 4096}},
    projections=[{{'name': '{PROJECTION}',
                  'query': '{PROJECTION_QUERY}'}}],
) }}}}
select id, Department, metric1, metric2, _version, sign
from {{{{ source('bench', '{EVENTS}') }}}}
"""


@dataclass(frozen=True)
class DbtRun:
    success: bool
    wall_ms: float
    log: str


class BenchProject:
    """Writes the project under `root` and runs dbt in this process."""

    def __init__(self, root: Path, package_root: Path, chdb_path: Path, schema: str) -> None:
        self.root = root
        self.schema = schema
        if root.exists():
            shutil.rmtree(root)
        (root / "models").mkdir(parents=True)
        self._yaml(
            "dbt_project.yml",
            {
                "name": "vcmt_bench",
                "version": "1.0",
                "config-version": 2,
                "profile": "vcmt_bench",
                "model-paths": ["models"],
                "flags": {"send_anonymous_usage_stats": False},
            },
        )
        self._yaml("packages.yml", {"packages": [{"local": str(package_root.resolve())}]})
        self._yaml(
            "profiles.yml",
            {
                "vcmt_bench": {
                    "target": "chdb",
                    "outputs": {
                        "chdb": {"type": "chdb", "path": str(chdb_path.resolve()), "schema": schema, "threads": 1}
                    },
                }
            },
        )
        self._yaml(
            "models/sources.yml",
            {"version": 2, "sources": [{"name": "bench", "schema": schema, "tables": [{"name": EVENTS}]}]},
        )
        (root / "models" / f"{MODEL}.sql").write_text(textwrap.dedent(_MODEL_SQL).lstrip())

    def _yaml(self, rel: str, data: Any) -> None:
        (self.root / rel).write_text(yaml.safe_dump(data, sort_keys=False))

    def deps(self) -> DbtRun:
        return self._invoke(["deps"])

    def run(self) -> DbtRun:
        paths = ["--log-path", str(self.root / "logs"), "--target-path", str(self.root / "target")]
        return self._invoke(["run", "--select", MODEL, *paths])

    def _invoke(self, args: list[str]) -> DbtRun:
        lines: list[str] = []

        def collect(event: Any) -> None:
            if event.info.level in ("info", "warn", "error") and event.info.msg:
                lines.append(str(event.info.msg))

        cli = [*args, "--project-dir", str(self.root), "--profiles-dir", str(self.root), "--quiet"]
        started = time.perf_counter()
        result = dbtRunner(callbacks=[collect]).invoke(cli)
        wall = (time.perf_counter() - started) * 1000
        if result.exception is not None:
            lines.append(f"EXCEPTION: {result.exception!r}")
        return DbtRun(success=bool(result.success), wall_ms=wall, log="\n".join(lines))
