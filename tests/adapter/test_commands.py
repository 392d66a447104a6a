"""dbt commands other than `run` through the `type: chdb` adapter: seed, build, test, show, docs, debug."""

from __future__ import annotations

import json
import re

import pytest
from dbt.cli.main import dbtRunner

from vcmt_lab.dbt_project import DbtProject, DbtRun

CUSTOMERS_CSV = """
id,name,tier
1,ada,gold
2,bob,silver
3,cy,gold
"""

SCHEMA_YML = """
version: 2
models:
  - name: dim_customers
    columns:
      - name: id
        data_tests: [unique, not_null]
      - name: tier
        data_tests:
          - accepted_values:
              name: tier_is_gold_only
              arguments:
                values: [gold]
              config:
                tags: [expected_failure]
"""


@pytest.fixture(scope="module")
def shop(module_project: DbtProject) -> DbtProject:
    """A seed, a model on it, two passing tests and one failing one; seeded once."""
    module_project.seed("customers", CUSTOMERS_CSV)
    module_project.model(
        "dim_customers",
        """
        {{ config(materialized='table', order_by='id') }}
        select id, upper(name) as name, tier from {{ ref('customers') }}
        """,
    )
    module_project.write("models/schema.yml", SCHEMA_YML)
    module_project.dbt("seed")
    return module_project


@pytest.fixture(scope="module")
def build(shop: DbtProject) -> DbtRun:
    """`dbt build` of everything but the test that is meant to fail."""
    return shop.dbt("build", "--exclude", "tag:expected_failure")


def _statuses(run: DbtRun) -> dict[str, str]:
    return {r.node.name: str(r.status) for r in run.result.result.results}


def test_seed_loads_csv_rows_with_inferred_types(shop):
    """`dbt seed` creates a table with the CSV's rows and numeric/string types."""
    assert shop.query("select id, name, tier from customers order by id") == [
        (1, "ada", "gold"),
        (2, "bob", "silver"),
        (3, "cy", "gold"),
    ]
    types = dict(
        shop.query(f"select name, type from system.columns where database = '{shop.schema}' and table = 'customers'")
    )
    assert types["id"].endswith("Int32") and "String" in types["name"]


def test_build_creates_model_and_runs_its_passing_tests(shop, build):
    """`dbt build` builds the model from the seed and passes its unique and not_null tests."""
    statuses = _statuses(build)
    assert statuses["dim_customers"] == "success"
    assert statuses["unique_dim_customers_id"] == "pass"
    assert statuses["not_null_dim_customers_id"] == "pass"
    assert shop.query("select name from dim_customers order by id") == [("ADA",), ("BOB",), ("CY",)]


def test_schema_tests_pass_and_fail_as_data_says(shop, build):
    """`dbt test` passes the key tests and fails `accepted_values` on the one silver row."""
    run = shop.dbt("test", expect_pass=False)
    statuses = _statuses(run)
    assert statuses["unique_dim_customers_id"] == "pass"
    assert statuses["not_null_dim_customers_id"] == "pass"
    assert statuses["tier_is_gold_only"] == "fail"
    failed = next(r for r in run.result.result.results if r.node.name == "tier_is_gold_only")
    assert failed.failures == 1


def test_show_previews_model_and_inline_rows(shop, build):
    """`dbt show` returns a model's rows and an inline query's rows from the engine."""
    model = shop.dbt("show", "--select", "dim_customers", "--limit", "2").result.result.results[0]
    assert [tuple(row) for row in model.agate_table.rows] == [(1, "ADA", "gold"), (2, "BOB", "silver")]
    inline = shop.dbt("show", "--inline", "select count() as n from {{ ref('customers') }}")
    assert [tuple(row) for row in inline.result.result.results[0].agate_table.rows] == [(3,)]


def test_docs_generate_catalog_lists_model_columns(shop, build):
    """`dbt docs generate` writes a catalog with the model's columns and ClickHouse types."""
    shop.write_json = True  # this test reads dbt's artifacts
    shop.dbt("docs", "generate")
    catalog = json.loads((shop.root / "target" / "catalog.json").read_text())
    assert not catalog["errors"]
    node = catalog["nodes"]["model.vcmt_test_project.dim_customers"]
    assert node["metadata"]["schema"] == shop.schema
    assert node["metadata"]["type"] == "table"
    assert list(node["columns"]) == ["id", "name", "tier"]
    assert node["columns"]["name"]["type"] == "String"
    assert "seed.vcmt_test_project.customers" in catalog["nodes"]


def test_debug_connection_test_passes(shop):
    """`dbt debug` opens the engine at the profile's path and reports the connection OK."""
    lines: list[str] = []
    result = dbtRunner(callbacks=[lambda e: lines.append(e.info.msg)]).invoke(
        ["debug", "--project-dir", str(shop.root), "--profiles-dir", str(shop.root), "--target", "chdb"]
    )
    log = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))
    assert result.success, log
    assert "Connection test: [OK connection ok]" in log
    assert f"path: {shop.chdb_path}" in log
