"""docs/staging.md's `dbt_project.yml`, as written: each model is enabled on its engine's target only, a folder
the example does not name included (docs/staging.md, "Set-up")."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from vcmt_cli.dbt_invoke import invoke

ROOT = Path(__file__).resolve().parents[2]
MODELS = {
    "staging/stg_orders.sql": "select 1 as id",
    "marts/fct_orders.sql": "select 1 as id",
    # A ClickHouse folder of the user's own, which the docs' example does not name.
    "reports/rpt_orders.sql": "select 1 as id",
    "fct_top.sql": "select 1 as id",
}


def _docs_project() -> dict:
    """The `dbt_project.yml` block of docs/staging.md's set-up, parsed."""
    blocks = re.findall(
        r"```yaml\n(# dbt_project\.yml: where the lake is, and which models run on which engine.*?)```", _docs(), re.S
    )
    assert len(blocks) == 1, "docs/staging.md: one `# dbt_project.yml: where the lake is, ...` block expected"
    return yaml.safe_load(blocks[0])


def _docs() -> str:
    return (ROOT / "docs" / "staging.md").read_text()


def _enabled(root: Path, target: str) -> set[str]:
    run = invoke(
        [
            "ls",
            "--resource-type",
            "model",
            "--output",
            "name",
            "--target",
            target,
            "--project-dir",
            str(root),
            "--profiles-dir",
            str(root),
            "--log-path",
            str(root / "logs"),
            "--target-path",
            str(root / "target"),
        ]
    )
    assert run.success, run.log[-3000:]
    return set(run.result.result)


def test_the_staging_docs_enable_each_folder_on_its_engine_only(tmp_path: Path) -> None:
    """On the Spark target only the staging; on the ClickHouse target every other model, in any folder."""
    project = {"name": "my_project", "version": "1.0", "config-version": 2, "profile": "my_project", **_docs_project()}
    (tmp_path / "dbt_project.yml").write_text(yaml.safe_dump(project))
    outputs = {
        "vcmt_spark": {"type": "vcmt_spark", "method": "session", "host": "localhost", "schema": "staging"},
        "chdb": {"type": "chdb", "path": str(tmp_path / "chdb"), "schema": "analytics"},
    }
    (tmp_path / "profiles.yml").write_text(yaml.safe_dump({"my_project": {"target": "chdb", "outputs": outputs}}))
    for path, sql in MODELS.items():
        (tmp_path / "models" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "models" / path).write_text(sql)
    assert _enabled(tmp_path, "vcmt_spark") == {"stg_orders"}
    assert _enabled(tmp_path, "chdb") == {"fct_orders", "rpt_orders", "fct_top"}
