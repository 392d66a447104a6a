"""A model's schema on a ClickHouse server: who lists what in it, and its state going wherever it goes
(docs/operations.md, "What a schema lists").

The engine shows a user only the tables it holds a privilege on (`SHOW TABLES`, system.tables, and so every BI
tool's schema browser), so a reader granted SELECT on the models lists the models and nothing of vcmt's, and reads
their current rows through incremental runs, a full refresh (which swaps every object) and a schema change. A
writer granted what that page names inserts into a model's stage directly, and lists those tables only. The users
are the node's own (users.xml): a real server's `grants` config or GRANT statements give the same privileges.

The helpers are the model's state and live in its schema, so a backup of the schema restored in its place
resumes exactly: a deleted key stays deleted, the events after the backup apply once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import clickhouse_driver
import pytest

from tests.conftest import _schema_for, make_project, operations_queries
from vcmt_lab.clickhouse_server import HOST, ServedNode, served_node
from vcmt_lab.dbt_project import DbtProject, Engine

SCHEMA = _schema_for("a_models_schema")
MODELS = ("customers", "orders", "orders_by_customer")
# docs/operations.md, "What a schema lists": what a writer into `orders__stage` needs (the transform reads the
# stage's rows, and looks up each key's live row and tombstone; ClickHouse checks no INSERT on a view's table).
WRITER_GRANTS = [
    f"GRANT INSERT, SELECT ON {SCHEMA}.orders__stage",
    f"GRANT SELECT ON {SCHEMA}.orders",
    f"GRANT SELECT ON {SCHEMA}.orders__tombstones",
]
USERS = {
    "reader": [f"GRANT SELECT ON {SCHEMA}.{m}" for m in MODELS],
    "writer": WRITER_GRANTS,
    "writer_without_tombstones": WRITER_GRANTS[:2],
}
# README, "External writers": what a direct INSERT into a stage is sent with.
STAGE_SETTINGS = {"async_insert": 0, "insert_deduplicate": 0, "deduplicate_blocks_in_dependent_materialized_views": 0}


@pytest.fixture(scope="module")
def node(lab_dir: Path) -> Iterator[ServedNode]:
    folder = lab_dir / "a_models_schema"
    with served_node(folder, users=USERS, backups=folder / "backups") as started:
        yield started


@pytest.fixture
def granted(tmp_path: Path, chdb_path: Path, lab_dir: Path, node: ServedNode) -> Iterator[DbtProject]:
    """A project in SCHEMA, the schema USERS are granted on."""
    engine = Engine("http", node=node)
    project = make_project(tmp_path / "proj", "granted", chdb_path, lab_dir, schema=SCHEMA, engine=engine)
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


def test_a_reader_lists_the_models_only_and_a_writer_feeds_the_stage(granted: DbtProject, node: ServedNode) -> None:
    project = granted
    project.command(
        "create table ev (id Int32, customer Int32, x Int64, _version UInt64, sign Int8) engine = MergeTree order by id"
    )
    project.command("insert into ev values (1, 7, 10, 1, 1), (2, 7, 20, 1, 1), (3, 8, 30, 1, 1)")
    project.model(
        "orders",
        "{{ config(materialized='vcmt_upsert', unique_key='id') }}\n"
        f"select id, customer, x, _version, sign from {SCHEMA}.ev",
    )
    project.model(
        "customers",
        "{{ config(materialized='vcmt_upsert', unique_key='customer', delete_mode='unconditional') }}\n"
        f"select customer, max(_version) as _version, toInt8(1) as sign from {SCHEMA}.ev group by customer",
    )
    project.model(
        "orders_by_customer",
        "{{ config(materialized='view') }}\n"
        "select customer, sum(x * sign) as x from {{ ref('orders') }} group by customer having sum(sign) > 0",
    )
    project.dbt("run")
    owner = project.query("select name from system.tables where database = currentDatabase() order by name")
    assert len(owner) > len(MODELS) + 1  # the dbt user lists vcmt's helpers too (the page's query leaves them out)
    assert _tables(node, "reader") == {"http": list(MODELS), "native": list(MODELS)}

    # An update and a delete, a run; a full refresh of `orders`; a column added (on_schema_change).
    project.command("insert into ev values (1, 7, 11, 2, 1), (2, 7, 20, 2, -1)")
    project.dbt("run")
    project.dbt("run", "--full-refresh", "--select", "orders")
    project.model(
        "orders",
        "{{ config(materialized='vcmt_upsert', unique_key='id', on_schema_change='append_new_columns') }}\n"
        f"select id, customer, x, _version, sign, x * 2 as x2 from {SCHEMA}.ev",
    )
    project.command("insert into ev values (3, 8, 33, 2, 1)")
    project.dbt("run", "--select", "orders")
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
    # Without SELECT on the tombstones the INSERT is refused, naming them, while its views run: the delete's
    # tombstone may be written by then (here it was), its -1 row is not. Sent again with the privilege, it applies
    # once.
    delete_3, insert_4 = "(3, 8, 33, 66, 3, -1)", "(4, 8, 40, 80, 1, 1)"
    with pytest.raises(Exception, match=rf"grant SELECT\b.* ON {SCHEMA}\.orders__tombstones"):
        _write(node, "writer_without_tombstones", f"{delete_3}, {insert_4}")
    assert _rows(node, "reader", current) == [(1, 7, 11), (3, 8, 33)]
    _write(node, "writer", f"{delete_3}, {insert_4}")
    assert _tables(node, "writer")["http"] == ["orders", "orders__stage", "orders__tombstones"]
    assert _rows(node, "reader", current) == [(1, 7, 11), (4, 8, 40)]
    project.dbt("run", "--select", "orders")  # reads `ev` again: older than the writer's events, all skipped
    assert _rows(node, "reader", current) == [(1, 7, 11), (4, 8, 40)]
    # docs/operations.md's listing query, as the dbt user, lists what the reader lists, beside the source.
    (listing,) = [q for q in operations_queries() if "without vcmt objects" in q]
    names = [r[0] for r in project.query(listing.replace("analytics", SCHEMA))]
    assert names == sorted([*MODELS, "customers__stage", "ev", "orders__stage"])


def test_a_schema_restored_from_its_backup_resumes_exactly(
    tmp_path: Path, chdb_path: Path, lab_dir: Path, node: ServedNode
) -> None:
    """BACKUP DATABASE of a model's schema, more runs, DROP DATABASE, RESTORE: the model, its tombstones, record and
    lock come back together; the next run applies the events after the backup once, and a late, older upsert of a
    key deleted before the backup stays out. (The events live in another database, which the restore leaves.)"""
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
        # Read after the restored watermark: batch 3 again, and a late upsert older than key 2's delete.
        admin.command(f"insert into {raw}.ev values (4, 2, 21, 1, 1)")
        project.dbt("run")
        project.dbt("run")
        assert project.query(current) == [(1, 10), (3, 33)]
        by_sign = "select id, sum(x * sign) from m group by id having sum(sign) > 0 order by id"
        assert project.query(by_sign) == [(1, 10), (3, 33)]
        assert project.query("select id, sum(sign) as s from m group by id having s not in (0, 1)") == []
    finally:
        admin.command(f"drop database if exists {raw} sync")
        admin.close()
        project.close()
