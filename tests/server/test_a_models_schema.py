"""A model's schema on a ClickHouse server: who lists what in it, and its state going wherever the schema goes
(docs/operations.md, "What a schema lists").

The engine shows a user only the tables it holds a privilege on (`SHOW TABLES` reads system.tables, and so does
every BI tool's schema browser), so a reader granted SELECT on the models lists the models and nothing of vcmt's,
and reads their current rows through incremental runs, a full refresh (which swaps every object) and a schema
change. The models' `grants` config goes to the models alone. A writer granted what the page names inserts into a
model's stage directly; without any one of the SELECTs it is refused. The node keeps its users in users.xml, where
the engine stores no GRANT (system.grants lists them, and dbt reads them there): the users' privileges are written
there, and dbt's GRANTs and REVOKEs are logged, not sent (tests/conftest.py LOGGED_DCL). Each model's `grants`
names every user holding SELECT on it, so dbt revokes nothing.

The helpers are the model's state and live in its schema, so a backup of the schema restored in its place
resumes exactly: from the restored watermark, its deleted keys staying deleted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import clickhouse_driver
import pytest

from tests.conftest import LOGGED_DCL, _schema_for, logged_dcl, make_project, operations_queries
from vcmt_lab.clickhouse_server import HOST, ServedNode, served_node
from vcmt_lab.dbt_project import DbtProject, Engine

SCHEMA = _schema_for("a_models_schema")
MODELS = ("customers", "orders", "orders_by_customer")
# docs/operations.md, "Readers and BI tools: grant the models": what a writer into `orders__stage` needs (the
# transform reads the stage's rows and looks up each key's live row and tombstone).
WRITER_PRIVILEGES = {"orders__stage": ("INSERT", "SELECT"), "orders": ("SELECT",), "orders__tombstones": ("SELECT",)}
# A writer without one of the SELECTs, by the table it lacks it on (the refusal names that table).
SHORT_WRITERS = {f"writer_without_{table}": table for table in WRITER_PRIVILEGES}
# Each user's privileges, table -> privileges; USERS writes them as the node's users.xml grants.
PRIVILEGES = {
    "reader": {m: ("SELECT",) for m in MODELS},
    "writer": WRITER_PRIVILEGES,
    **{
        user: {**WRITER_PRIVILEGES, table: tuple(p for p in WRITER_PRIVILEGES[table] if p != "SELECT")}
        for user, table in SHORT_WRITERS.items()
    },
}
USERS = {
    user: [f"GRANT {', '.join(what)} ON {SCHEMA}.{table}" for table, what in tables.items() if what]
    for user, tables in PRIVILEGES.items()
}
# docs/reference.md, "External writers": what a direct INSERT into a stage is sent with.
STAGE_SETTINGS = {"async_insert": 0, "insert_deduplicate": 0, "deduplicate_blocks_in_dependent_materialized_views": 0}
# Each model's `grants` (docs/operations.md): `reporter`, a role the node does not store (so each run grants it),
# and every user holding SELECT on the model, which dbt would revoke otherwise.
GRANTEES = {
    m: ["reporter", *(user for user, tables in PRIVILEGES.items() if "SELECT" in tables.get(m, ()))] for m in MODELS
}
VCMT = "{{{{ config(materialized='vcmt_upsert', grants={{'select': {grantees}}}, {config}) }}}}\n"


@pytest.fixture(scope="module")
def node(lab_dir: Path) -> Iterator[ServedNode]:
    folder = lab_dir / "a_models_schema"
    with served_node(folder, users=USERS, backups=folder / "backups") as started:
        yield started


@pytest.fixture(scope="module")
def granted(tmp_path_factory, chdb_path: Path, lab_dir: Path, node: ServedNode) -> Iterator[DbtProject]:
    """The one project in SCHEMA, the schema USERS are granted on."""
    root = tmp_path_factory.mktemp("granted") / "proj"
    project = make_project(root, "granted", chdb_path, lab_dir, schema=SCHEMA, engine=Engine("http", node=node))
    yield project
    project.close()


def _tables(node: ServedNode, user: str) -> dict[str, list[str]]:
    """The schema's tables as `user` lists them, over HTTP and over native."""
    http = node.client(SCHEMA, username=user)
    try:
        over_http = [r[0] for r in http.query("show tables").result_rows]
    finally:
        http.close()
    native = clickhouse_driver.Client(host=HOST, port=node.tcp_port, user=user, database=SCHEMA)
    try:
        over_native = [r[0] for r in native.execute("show tables")]
    finally:
        native.disconnect()
    return {"http": over_http, "native": over_native}


def _rows(node: ServedNode, user: str, sql: str) -> list[tuple]:
    client = node.client(SCHEMA, username=user)
    try:
        return [tuple(r) for r in client.query(sql).result_rows]
    finally:
        client.close()


def _write(node: ServedNode, user: str, values: str) -> None:
    """One INSERT of `values` into `orders__stage` as `user`."""
    client = node.client(SCHEMA, username=user)
    try:
        client.command(
            f"insert into orders__stage (id, customer, x, x2, _version, sign) values {values}", settings=STAGE_SETTINGS
        )
    finally:
        client.close()


def _run(project: DbtProject, *args: str, granted: list[str]) -> None:
    """A `dbt run` whose `grants` reach the `granted` models, each in one GRANT to some of its GRANTEES, `reporter`
    among them (on a first run all), and nothing else: no helper, and no REVOKE."""
    run = project.dbt("run", *args)
    dcl = logged_dcl(run.log)
    to = {}
    for line in dcl:
        found = re.fullmatch(rf"grant select on `{SCHEMA}`\.`(\w+)` to (.*)", line)
        assert found and found[1] not in to, (line, dcl)
        to[found[1]] = found[2].split(", ")
    assert sorted(to) == sorted(granted), dcl
    assert all("reporter" in users and set(users) <= set(GRANTEES[m]) for m, users in to.items()), dcl


def test_a_reader_lists_the_models_only_and_a_writer_feeds_the_stage(granted: DbtProject, node: ServedNode) -> None:
    project = granted
    project.write("macros/logged_dcl.sql", LOGGED_DCL)
    project.command(
        "create table ev (id Int32, customer Int32, x Int64, _version UInt64, sign Int8) engine = MergeTree order by id"
    )
    project.command("insert into ev values (1, 7, 10, 1, 1), (2, 7, 20, 1, 1), (3, 8, 30, 1, 1)")
    project.model(
        "orders",
        VCMT.format(grantees=GRANTEES["orders"], config="unique_key='id'")
        + f"select id, customer, x, _version, sign from {SCHEMA}.ev",
    )
    project.model(
        "customers",
        VCMT.format(grantees=GRANTEES["customers"], config="unique_key='customer', delete_mode='unconditional'")
        + f"select customer, max(_version) as _version, toInt8(1) as sign from {SCHEMA}.ev group by customer",
    )
    project.model(
        "orders_by_customer",
        f"{{{{ config(materialized='view', grants={{'select': {GRANTEES['orders_by_customer']}}}) }}}}\n"
        "select customer, sum(x * sign) as x from {{ ref('orders') }} group by customer having sum(sign) > 0",
    )
    _run(project, granted=list(MODELS))
    owner = {r[0] for r in project.query("select name from system.tables where database = currentDatabase()")}
    assert {"orders__tombstones", "orders__applied", "orders__loads", "orders__lock"} <= owner  # the dbt user's
    assert _tables(node, "reader") == {"http": list(MODELS), "native": list(MODELS)}

    # An update and a delete, a run; a full refresh of `orders`; a column added (on_schema_change).
    project.command("insert into ev values (1, 7, 11, 2, 1), (2, 7, 20, 2, -1)")
    _run(project, granted=list(MODELS))
    _run(project, "--full-refresh", "--select", "orders", granted=["orders"])
    project.model(
        "orders",
        VCMT.format(grantees=GRANTEES["orders"], config="unique_key='id', on_schema_change='append_new_columns'")
        + f"select id, customer, x, _version, sign, x * 2 as x2 from {SCHEMA}.ev",
    )
    project.command("insert into ev values (3, 8, 33, 2, 1)")
    _run(project, "--select", "orders", granted=["orders"])
    assert _tables(node, "reader") == {"http": list(MODELS), "native": list(MODELS)}
    current = "select id, customer, x from orders final where sign = 1 order by id"
    assert _rows(node, "reader", current) == [(1, 7, 11), (3, 8, 33)]
    assert _rows(node, "reader", "select customer, x from orders_by_customer order by customer") == [(7, 11), (8, 33)]
    assert _rows(node, "reader", "select customer from customers final where sign = 1 order by customer") == [
        (7,),
        (8,),
    ]
    with pytest.raises(Exception, match="ACCESS_DENIED|Not enough privileges"):
        _rows(node, "reader", "select count() from orders__tombstones")

    # The writer: one event per key per INSERT, with the settings the reference names; it lists what it holds.
    # Without one of the SELECTs the INSERT is refused, naming that table, while the stage's views run: nothing
    # reaches `orders` (a delete's tombstone may be recorded by then). Sent again with the privileges, it applies.
    delete_3, insert_4 = "(3, 8, 33, 66, 3, -1)", "(4, 8, 40, 80, 1, 1)"
    for user, table in SHORT_WRITERS.items():
        with pytest.raises(Exception, match=rf"grant SELECT\b.* ON {SCHEMA}\.{re.escape(table)}\b"):
            _write(node, user, f"{delete_3}, {insert_4}")
        assert _rows(node, "reader", current) == [(1, 7, 11), (3, 8, 33)], user
    _write(node, "writer", f"{delete_3}, {insert_4}")
    writer_lists = ["orders", "orders__stage", "orders__tombstones"]
    assert _tables(node, "writer") == {"http": writer_lists, "native": writer_lists}
    signs = "select id, sum(sign) as s from orders group by id having s not in (0, 1)"
    for _ in range(2):  # the writer's events, then a run that reads `ev` again: older, all skipped
        assert _rows(node, "reader", current) == [(1, 7, 11), (4, 8, 40)]
        assert project.query(signs) == []
        _run(project, "--select", "orders", granted=["orders"])
    # docs/operations.md's listing query, as the dbt user, lists what the reader lists, beside the source.
    (listing,) = [q for q in operations_queries() if "without vcmt objects" in q]
    names = [r[0] for r in project.query(listing.replace("analytics", SCHEMA))]
    assert names == sorted([*MODELS, "customers__stage", "ev", "orders__stage"])


def test_a_schema_restored_from_its_backup_resumes_exactly(
    tmp_path: Path, chdb_path: Path, lab_dir: Path, node: ServedNode
) -> None:
    """BACKUP DATABASE of a model's schema, another run, DROP DATABASE, RESTORE: the model, its tombstones and its
    record come back together. The next run reads from the restored watermark (the batch after the backup again,
    and a new one) and applies it once; a late, older upsert of a key deleted before the backup stays out, and
    comes back when the tombstones are emptied after a restore. The events live in another database, which the
    restore leaves as it is."""
    project = make_project(tmp_path / "proj", "restored", chdb_path, lab_dir, engine=Engine("http", node=node))
    raw = f"{project.schema}_raw"
    backup = f"File('{node.backups / project.schema}')"
    admin = node.client()
    try:
        admin.command(f"create database {raw}")
        admin.command(
            f"create table {raw}.ev (_batch_id UInt64, id Int32, x Int64, _version UInt64, sign Int8) "
            "engine = MergeTree order by _batch_id"
        )
        admin.command(f"insert into {raw}.ev values (1, 1, 10, 1, 1), (1, 2, 20, 1, 1), (1, 3, 30, 1, 1)")
        project.model(
            "m",
            "{{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id') }}\n"
            f"select _batch_id, id, x, _version, sign from {raw}.ev\n"
            "where _batch_id > {{ vcmt.watermark(default=0) }}",
        )
        project.dbt("run")
        admin.command(f"insert into {raw}.ev values (2, 2, 20, 2, -1)")
        project.dbt("run")
        current = "select id, x from m final where sign = 1 order by id"
        assert project.query(current) == [(1, 10), (3, 30)]
        assert admin.query(f"backup database {project.schema} to {backup}").result_rows[0][1] == "BACKUP_CREATED"
        admin.command(f"insert into {raw}.ev values (3, 3, 33, 3, 1)")
        project.dbt("run")
        project.close()  # its session's database is dropped next
        admin.command(f"drop database {project.schema} sync")
        assert admin.query(f"restore database {project.schema} from {backup}").result_rows[0][1] == "RESTORED"
        assert project.query(current) == [(1, 10), (3, 30)]  # as backed up
        # Batch 3 again, and a late upsert older than key 2's delete.
        admin.command(f"insert into {raw}.ev values (4, 2, 21, 1, 1)")
        run = project.dbt("run")
        assert "vcmt_upsert m: 2 events read" in run.log, run.log[-3000:]
        assert project.query(current) == [(1, 10), (3, 33)]
        by_sign = "select id, sum(x * sign) from m group by id having sum(sign) > 0 order by id"
        assert project.query(by_sign) == [(1, 10), (3, 33)]
        assert project.query("select id, sum(sign) as s from m group by id having s not in (0, 1)") == []
        # The same restore with its tombstones emptied takes key 2 back: they are what keeps it deleted.
        project.close()
        admin.command(f"drop database {project.schema} sync")
        admin.command(f"restore database {project.schema} from {backup}")
        project.command("truncate table m__tombstones")
        project.dbt("run")
        assert project.query(current) == [(1, 10), (2, 21), (3, 33)]
    finally:
        admin.command(f"drop database if exists {raw} sync")
        admin.close()
        project.close()
