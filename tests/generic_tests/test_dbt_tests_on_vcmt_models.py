"""dbt's own generic tests (and tests written like dbt-utils') read a vcmt_upsert model's current rows
when the project puts vcmt before dbt in its dispatch search order (macros/generic_tests/current_rows.sql)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import make_project
from tests.materialization.scenario import Scenario
from vcmt_lab.dbt_project import PROJECT_NAME

pytestmark = pytest.mark.engines("chdb", "http")

ORDERS = {
    "id": "UInt64",
    "customer_id": "UInt64",
    "status": "String",
    "carrier": "Nullable(String)",
    "_version": "UInt64",
    "sign": "Int8",
}
CUSTOMERS = {"id": "UInt64", "name": "String", "_version": "UInt64", "sign": "Int8"}

# Two tests in dbt-utils' style (dbt-utils is a git/hub package, not installable here): generic tests
# of the project, so dbt wraps their `model` with get_where_subquery as it does dbt-utils' own.
UTILS_STYLE = """
{% test unique_combination_of_columns(model, combination_of_columns) %}
select {{ combination_of_columns | join(', ') }}, count() as n
from {{ model }}
group by {{ combination_of_columns | join(', ') }}
having count() > 1
{% endtest %}

{% test expression_is_true(model, expression) %}
select * from {{ model }} where not ({{ expression }})
{% endtest %}
"""

TESTS = {
    "orders": [
        {"name": "orders_id_unique", "column": "id", "test": "unique"},
        {"name": "orders_id_not_null", "column": "id", "test": "not_null"},
        {"name": "orders_carrier_not_null", "column": "carrier", "test": "not_null"},
        {
            "name": "orders_status_accepted",
            "column": "status",
            "test": {"accepted_values": {"arguments": {"values": ["open", "shipped"]}}},
        },
        {
            "name": "orders_customer_exists",
            "column": "customer_id",
            "test": {"relationships": {"arguments": {"to": "ref('customers')", "field": "id"}}},
        },
        {
            "name": "orders_open_unique_where",
            "column": "id",
            "test": {"unique": {"config": {"where": "status = 'open'"}}},
        },
        {
            "name": "orders_utils_unique_combination",
            "test": {"unique_combination_of_columns": {"arguments": {"combination_of_columns": ["id"]}}},
        },
        {
            "name": "orders_utils_expression",
            "test": {"expression_is_true": {"arguments": {"expression": "status != 'draft'"}}},
        },
        # vcmt's own tests still read the stored rows (a subquery would make these two error).
        {"name": "orders_vcmt_single_live", "test": "vcmt.single_live_version"},
        {
            "name": "orders_vcmt_groupby",
            "test": {"vcmt.groupby_matches_final": {"arguments": {"group_by": ["status"]}}},
        },
    ],
    "customers": [{"name": "customers_id_unique", "column": "id", "test": "unique"}],
}


def _properties() -> dict:
    models = []
    for model, tests in TESTS.items():
        columns: dict[str, list] = {}
        data_tests = []
        for t in tests:
            test = t["test"]
            if isinstance(test, str):
                test = {test: {}}
            ((kind, props),) = test.items()
            entry = {kind: {"name": t["name"], **props}}
            (columns.setdefault(t["column"], []) if "column" in t else data_tests).append(entry)
        models.append(
            {
                "name": model,
                "data_tests": data_tests,
                "columns": [{"name": c, "data_tests": ts} for c, ts in columns.items()],
            }
        )
    return {"version": 2, "models": models}


def _results(project) -> dict[str, tuple[str, int]]:
    run = project.dbt("test", "--select", "orders", "customers", expect_pass=False)
    return {
        r.node.name: (str(r.status), r.failures) for r in run.result.result.results if r.node.resource_type == "test"
    }


@pytest.fixture(scope="module")
def phases(tmp_path_factory, chdb_path, lab_dir, engine) -> dict[str, dict[str, tuple[str, int]]]:
    """Test results after the first run (and `dbt show` then), after an update batch, and after OPTIMIZE
    FINAL."""
    project = make_project(
        tmp_path_factory.mktemp(f"dbt_tests_{engine.kind}") / "proj",
        "dbt_tests_on_vcmt",
        chdb_path,
        lab_dir,
        engine=engine,
    )
    config = yaml.safe_load((project.root / "dbt_project.yml").read_text())
    # The one line of project config the README documents.
    config["dispatch"] = [{"macro_namespace": "dbt", "search_order": [PROJECT_NAME, "vcmt", "dbt"]}]
    project.write("dbt_project.yml", yaml.safe_dump(config, sort_keys=False))
    project.write("macros/utils_style_tests.sql", UTILS_STYLE)
    project.write("models/_tests.yml", yaml.safe_dump(_properties(), sort_keys=False))
    orders = Scenario(project, ORDERS, {"unique_key": "id"}, name="orders")
    customers = Scenario(project, CUSTOMERS, {"unique_key": "id"}, name="customers")
    found = {}
    try:
        customers.run_batch([(1, "ann", 1, 1), (2, "bob", 1, 1)])
        orders.run_batch([(1, 1, "open", "ups", 1, 1), (2, 2, "draft", None, 1, 1)])
        found["first run"] = _results(project)
        # dbt show previews the model and the tests on it, `relationships` among them (README).
        found["show"] = project.dbt("show", "--select", "customers").log
        # Order 1 ships, order 2 is confirmed with a carrier, customer 2 is deleted (order 2 still points to it).
        customers.run_batch([(2, "bob", 2, -1)])
        orders.run_batch([(1, 1, "shipped", "ups", 2, 1), (2, 2, "open", "dhl", 2, 1)])
        found["update batch"] = _results(project)
        for table in ("orders", "customers"):
            project.command(f"optimize table `{table}` final")
        found["merged"] = _results(project)
    finally:
        project.close()
    return found


def test_first_run(phases):
    """The first run's rows: the draft order fails not_null, accepted_values and the expression."""
    assert phases["first run"] == {
        "orders_id_unique": ("pass", 0),
        "orders_id_not_null": ("pass", 0),
        "orders_carrier_not_null": ("fail", 1),
        "orders_status_accepted": ("fail", 1),
        "orders_customer_exists": ("pass", 0),
        "orders_open_unique_where": ("pass", 0),
        "orders_utils_unique_combination": ("pass", 0),
        "orders_utils_expression": ("fail", 1),
        "orders_vcmt_single_live": ("pass", 0),
        "orders_vcmt_groupby": ("pass", 0),
        "customers_id_unique": ("pass", 0),
    }


def test_show_previews_a_model_whose_relationships_test_ends_with_settings(phases):
    """`dbt show --select customers` also runs, with a limit, the tests on it, `relationships`
    (orders_customer_exists, whose parent is customers) among them, which dbt-clickhouse ends with `settings
    join_use_nulls = 1`: with the dispatch line the limit goes before the settings (dbt's own put it after them,
    a syntax error that failed the command)."""
    assert "Previewing node 'customers'" in phases["show"]
    assert "Excluded node 'orders_customer_exists' from results" in phases["show"]


@pytest.mark.parametrize("phase", ["update batch", "merged"])
def test_current_rows_before_and_after_merges(phases, phase):
    """After an update batch the tables hold cancel rows and old states until a merge: dbt's tests see the
    current rows either way. The only failure is real: order 2 points to the deleted customer 2."""
    assert phases[phase] == {
        "orders_id_unique": ("pass", 0),
        "orders_id_not_null": ("pass", 0),
        "orders_carrier_not_null": ("pass", 0),
        "orders_status_accepted": ("pass", 0),
        "orders_customer_exists": ("fail", 1),
        "orders_open_unique_where": ("pass", 0),
        "orders_utils_unique_combination": ("pass", 0),
        "orders_utils_expression": ("pass", 0),
        "orders_vcmt_single_live": ("pass", 0),
        "orders_vcmt_groupby": ("pass", 0),
        "customers_id_unique": ("pass", 0),
    }


@pytest.mark.engines("chdb")
def test_without_the_dispatch_line_the_run_warns(project):
    """Without the dispatch line dbt's tests read the stored rows and may pass or fail wrongly: the run warns,
    naming each such test and the line to add; vcmt's own tests and tests with the line are not named."""
    project.write(
        "models/_tests.yml",
        yaml.safe_dump(
            {
                "version": 2,
                "models": [
                    {
                        "name": "orders",
                        "columns": [{"name": "id", "data_tests": [{"unique": {"name": "orders_id_unique"}}]}],
                        "data_tests": [{"vcmt.single_live_version": {"name": "orders_vcmt_single_live"}}],
                    }
                ],
            },
            sort_keys=False,
        ),
    )
    orders = Scenario(project, ORDERS, {"unique_key": "id"}, name="orders")
    orders.run_batch([(1, 1, "open", "ups", 1, 1)])
    orders.run_batch([(1, 1, "shipped", "ups", 2, 1)])
    # `dbt test` as a schedule runs it: the package's data test runs too, and its warning counts in WARN=.
    run = project.dbt("test", expect_pass=False)
    warning = next(line for line in run.log.splitlines() if "vcmt: " in line and "read the stored rows" in line)
    assert "vcmt: 1 data test(s) on vcmt_upsert models read the stored rows" in warning
    assert "orders_id_unique (orders)" in warning and "orders_vcmt_single_live" not in warning
    assert f"dispatch: [{{macro_namespace: dbt, search_order: [{PROJECT_NAME}, vcmt, dbt]}}]" in warning
    statuses = {r.node.name: (str(r.status), r.failures) for r in run.result.result.results}
    assert statuses["vcmt_dispatch_line"] == ("warn", 1), statuses
    assert "WARN=1 " in run.log, run.log[-2000:]

    config = yaml.safe_load((project.root / "dbt_project.yml").read_text())
    config["dispatch"] = [{"macro_namespace": "dbt", "search_order": [PROJECT_NAME, "vcmt", "dbt"]}]
    project.write("dbt_project.yml", yaml.safe_dump(config, sort_keys=False))
    run = project.dbt("test")
    assert "read the stored rows" not in run.log
    assert "WARN=0 " in run.log and "PASS=4 " in run.log, run.log[-2000:]  # the hook, three data tests
