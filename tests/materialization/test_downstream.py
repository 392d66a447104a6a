"""Downstream models of a vcmt_upsert model (README, "Downstream models"): an incremental model over its change
feed (`changes=true`, vcmt.changes()) stays exact through updates, deletes, late events, redeliveries, direct
inserts into the stage, a run that fails half-way, a schema change, a rebase and a full refresh of the upstream;
what cannot stay exact is refused or warned at compile."""

from __future__ import annotations

import re
from pathlib import Path

from tests.materialization.scenario import Scenario
from vcmt_lab.dbt_project import DbtProject

ROOT = Path(__file__).resolve().parents[2]
ORDERS = {"order_id": "Int64", "status": "String", "amount": "Int64", "_version": "UInt64", "sign": "Int8"}


def readme_model(name: str) -> str:
    """The README's model `models/<name>.sql`, as written there."""
    found = re.search(rf"```sql\n-- models/{name}\.sql\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert found, f"README has no model models/{name}.sql"
    return found.group(1)


def _orders(project: DbtProject, **config) -> Scenario:
    """`fct_orders` (vcmt_upsert, changes=true) over a source table, and the README's `status_totals`."""
    orders = Scenario(project, ORDERS, {"unique_key": "order_id", "changes": True, **config}, name="fct_orders")
    project.model("status_totals", readme_model("status_totals"))
    return orders


def _totals(project: DbtProject, table: str = "status_totals") -> list[tuple]:
    """The downstream model's live statuses: (status, orders, amount)."""
    return project.query(f"select status, orders, amount from `{table}` where orders > 0 order by status")


def _expected(project: DbtProject) -> list[tuple]:
    """The same totals from the upstream model, by sign arithmetic (exact without FINAL)."""
    return project.query(
        "select status, sum(sign), sum(amount * sign) from fct_orders group by status having sum(sign) > 0 "
        "order by status"
    )


def _run(project: DbtProject, orders: Scenario, rows: list[tuple], *extra: str) -> None:
    orders.insert_source(rows)
    project.dbt("run", "--select", "fct_orders", "status_totals", *extra)
    assert _totals(project) == _expected(project), project.query("select * from fct_orders__changes")


def test_an_incremental_model_over_the_changes_stays_exact(project: DbtProject) -> None:
    """The README's `status_totals` equals the upstream's totals after every run: updates moving an order between
    statuses, a delete of a status's last order (its row stays with 0 orders), a late (older) event and a
    redelivered one (both skipped), an event inserted into the stage directly (read once the next load has
    ended), and a full refresh of `fct_orders` (the next run fails naming the --full-refresh that rebuilds
    `status_totals`, which then is exact). Runs that fail half-way and overlapping loads: tests/fuzz."""
    orders = _orders(project)
    _run(project, orders, [(1, "paid", 10, 1, 1), (2, "paid", 20, 1, 1), (3, "open", 5, 1, 1)])
    assert _totals(project) == [("open", 1, 5), ("paid", 2, 30)]
    _run(project, orders, [(1, "shipped", 11, 2, 1), (3, "open", 5, 2, -1), (2, "paid", 99, 0, 1)])
    assert project.query("select status, orders from status_totals order by status") == [
        ("open", 0),
        ("paid", 1),
        ("shipped", 1),
    ]
    _run(project, orders, [(1, "shipped", 11, 2, 1), (4, "open", 7, 3, 1)])
    # A writer inserting into the stage directly, once that load ended: its rows go with the next load.
    project.command(
        "insert into fct_orders__stage (order_id, status, amount, _version, sign) values (5, 'open', 1, 1, 1)"
    )
    project.dbt("run", "--select", "status_totals")
    assert ("open", 1, 7) in _totals(project)
    _run(project, orders, [(2, "shipped", 21, 5, 1)])
    assert _totals(project) == [("open", 2, 8), ("shipped", 2, 32)]

    # The upstream rebuilt: its feed restarts, and status_totals, behind its start, says what to run.
    orders.insert_source([(9, "lost", 3, 1, 1)])
    project.dbt("run", "--select", "fct_orders", "--full-refresh")
    refused = project.dbt("run", "--select", "status_totals", expect_pass=False)
    assert "dbt run --full-refresh --select status_totals" in refused.log, refused.log[-3000:]
    project.dbt("run", "--select", "status_totals", "--full-refresh")
    assert _totals(project) == _expected(project) == [("lost", 1, 3)]


def test_the_feed_starts_from_the_loaded_rows_follows_schema_changes_and_is_rebased(project: DbtProject) -> None:
    """`changes=true` on a model already loaded starts its feed from the model's rows (a downstream model built
    then is exact); a column added to the model reaches the feed; a feed grown past twice the table's rows (var
    `vcmt_changes_rebase_rows` lowered) is rebased at the last load ended: the downstream model that has read it
    reads on, exact, and one behind it fails naming its --full-refresh."""
    orders = _orders(project, changes=False)
    orders.run_batch([(1, "paid", 10, 1, 1), (2, "paid", 20, 1, 1)])
    orders.write_model(", ".join(ORDERS), changes=True)
    project.model("lagging", readme_model("status_totals"))
    _run(project, orders, [(3, "open", 5, 1, 1)], "lagging")
    assert project.scalar("select countIf(_vcmt_row = 1) from fct_orders__changes") == 2

    # A column the SELECT starts returning (on_schema_change) is added to the feed too.
    project.command("alter table fct_orders_src add column region String default 'eu'")
    orders.write_model(", ".join([*ORDERS, "region"]), on_schema_change="append_new_columns")
    _run(project, orders, [(1, "shipped", 11, 2, 1), (2, "paid", 21, 2, 1)])
    assert project.query(
        "select sign, region from fct_orders__changes where _vcmt_row = 2 and order_id = 1 and _version = 2"
    ) == [(1, "eu")]

    # Past twice the table's rows (merged), the next load rebases the feed at the last load ended.
    project.command("optimize table fct_orders final")
    project.vars = {"vcmt_changes_rebase_rows": 0}
    before = project.scalar("select max(`load`) from fct_orders__loads")
    _run(project, orders, [(2, "open", 20, 3, 1)])
    assert project.query("select min(_vcmt_load), countIf(_vcmt_row = 0) from fct_orders__changes") == [(before, 1)]
    refused = project.dbt("run", "--select", "lagging", expect_pass=False)
    assert "dbt run --full-refresh --select lagging" in refused.log, refused.log[-3000:]
    project.dbt("run", "--select", "lagging", "--full-refresh")
    assert _totals(project, "lagging") == _totals(project) == _expected(project)


def test_what_cannot_stay_exact_is_refused_or_warned(project: DbtProject) -> None:
    """At compile: an incremental model over vcmt.changes() without a strategy that swaps its table in at once,
    or without `_vcmt_load`, is refused, and one with a HAVING warns (a group filtered out keeps its old totals);
    one over vcmt.current_rows() warns (a deleted row would stay); a model over a vcmt model without `changes`
    is refused. Unit tests read a fixture as the changes."""
    orders = _orders(project)
    orders.run_batch([(1, "paid", 10, 1, 1)])
    project.dbt("run", "--select", "status_totals")
    recipe = readme_model("status_totals")
    project.model(
        "status_totals", recipe.replace("unique_key='status'", "unique_key='status', incremental_strategy='append'")
    )
    refused = project.dbt("run", "--select", "status_totals", expect_pass=False)
    assert "default (legacy) strategy" in refused.log and "incremental_strategy=append" in refused.log
    project.model("status_totals", recipe.replace("group by status", "group by status having sum(orders) > 0"))
    warned = project.dbt("compile", "--select", "status_totals")
    assert "the model has a HAVING" in warned.log, warned.log[-3000:]
    project.model("status_totals", recipe.replace(", max(_vcmt_load) as _vcmt_load", ""))
    project.dbt("run", "--select", "status_totals", "--full-refresh")
    refused = project.dbt("run", "--select", "status_totals", expect_pass=False)
    assert "keeps no `_vcmt_load` column" in refused.log, refused.log[-3000:]

    project.model(
        "recent_orders",
        """
        {{ config(materialized='incremental', unique_key='order_id') }}
        select order_id, status from {{ vcmt.current_rows(ref('fct_orders')) }}
        """,
    )
    warned = project.dbt("compile", "--select", "recent_orders")
    assert "stays in recent_orders forever" in warned.log, warned.log[-3000:]

    orders.write_model(", ".join(ORDERS), changes=False)
    project.model("status_totals", recipe)
    project.dbt("run", "--select", "fct_orders")
    refused = project.dbt("run", "--select", "status_totals", "--full-refresh", expect_pass=False)
    assert "fct_orders has no change feed. Set changes=true" in refused.log, refused.log[-3000:]
    # Turned off, the feed and its view are gone: turned on again, a feed starts anew instead of with a gap.
    gone = "select count() from system.tables where database = currentDatabase() and name like 'fct_orders__changes%'"
    assert project.scalar(gone) == 0

    project.write(
        "models/_unit_tests.yml",
        """
        unit_tests:
          - name: status_totals_sums_the_changes
            model: status_totals
            overrides:
              macros: {is_incremental: false}
            given:
              - input: ref('fct_orders')
                rows:
                  - {order_id: 1, status: paid, amount: 10, _version: 1, sign: 1}
                  - {order_id: 1, status: paid, amount: 10, _version: 1, sign: -1}
                  - {order_id: 1, status: shipped, amount: 12, _version: 2, sign: 1}
            expect:
              rows:
                - {status: paid, orders: 0, amount: 0}
                - {status: shipped, orders: 1, amount: 12}
        """,
    )
    run = project.dbt("test", "--select", "test_type:unit")
    unit = [(r.node.name, str(r.status)) for r in run.result.result.results if r.node.resource_type == "unit_test"]
    assert unit == [("status_totals_sums_the_changes", "pass")], run.log[-3000:]


def _online(project: DbtProject) -> list[tuple]:
    """The README's online aggregate as it is read: summed per status, the live ones."""
    return project.query(
        "select status, sum(orders), sum(amount) from status_online group by status having sum(orders) > 0 "
        "order by status"
    )


def test_an_online_aggregate_is_backfilled_kept_exact_and_rebuilt_with_its_upstream(project: DbtProject) -> None:
    """The README's `status_online` (vcmt_aggregate) over a loaded `fct_orders`: its first run backfills the
    totals; then every load of `fct_orders` updates them with no run of its own, updates and deletes included; a
    --full-refresh of `fct_orders` rebuilds them from the new rows; an upstream replaced behind its back is seen
    by its next run, which rebuilds them. A build that fails under the upstream's lock leaves it released. An
    aggregate that collapsing cannot keep exact (count()) is refused."""
    orders = Scenario(project, ORDERS, {"unique_key": "order_id"}, name="fct_orders")
    orders.run_batch([(1, "paid", 10, 1, 1), (2, "paid", 20, 1, 1)])
    project.model("status_online", readme_model("status_online"))
    project.dbt("run", "--select", "status_online")
    assert _online(project) == _expected(project) == [("paid", 2, 30)]
    orders.run_batch([(1, "shipped", 11, 2, 1), (2, "paid", 20, 2, -1), (3, "open", 5, 1, 1)])
    assert _online(project) == _expected(project) == [("open", 1, 5), ("shipped", 1, 11)]

    orders.insert_source([(4, "lost", 3, 1, 1)])
    project.dbt("run", "--select", "fct_orders", "--full-refresh")
    assert _online(project) == _expected(project) == [("lost", 1, 3)]
    kept = project.dbt("run", "--select", "status_online")
    assert "kept online" in kept.log and "building its totals" not in kept.log

    # Replaced behind its back (dropped and built again): its next run sees another table and rebuilds.
    project.command("drop table fct_orders sync")
    orders.insert_source([(5, "open", 7, 1, 1)])
    project.dbt("run", "--select", "fct_orders")
    rebuilt = project.dbt("run", "--select", "status_online")
    assert "its upstream was rebuilt" in rebuilt.log, rebuilt.log[-3000:]
    assert _online(project) == _expected(project) == [("open", 1, 7)]

    # A build that fails under the upstream's lock (its backfill divides by zero): the run's end releases the lock,
    # so the next load does not wait out its lease.
    project.model(
        "status_online", readme_model("status_online").replace("amount * sign", "intDiv(amount, amount - 7) * sign")
    )
    project.dbt("run", "--select", "status_online", "--full-refresh", expect_pass=False)
    orders.insert_source([(6, "open", 1, 1, 1)])
    assert "waiting for another load" not in project.dbt("run", "--select", "fct_orders").log

    project.model("status_online", readme_model("status_online").replace("sum(sign) as orders", "count() as orders"))
    refused = project.dbt("run", "--select", "status_online", expect_pass=False)
    assert "uses the aggregate `count()`" in refused.log, refused.log[-3000:]
