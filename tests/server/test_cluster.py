"""The two-shard test cluster (vcmt_lab.clickhouse_cluster): its DDL fan-out, the stand-in for the DDL queue,
rewrites ON CLUSTER statements on the package's tokens only (dbt.adapters.chdb.statements), and the cluster routes, gathers and fans out for real."""

from __future__ import annotations

import contextlib

import pytest

from vcmt_lab.clickhouse_cluster import fan_out_statement

REWRITES = [
    # The clause goes; a Replicated engine becomes its plain engine, its path and replica dropped.
    (
        "create table db.t on cluster c (x Int8) engine = ReplicatedVersionedCollapsingMergeTree(sign, v) order by x",
        "create table db.t  (x Int8) engine = VersionedCollapsingMergeTree(sign, v) order by x",
    ),
    (
        "CREATE TABLE t ON CLUSTER `my c` (x Int8) ENGINE = ReplicatedMergeTree('/ch/{shard}/t', '{replica}') ORDER BY x",
        "CREATE TABLE t  (x Int8) ENGINE = MergeTree() ORDER BY x",
    ),
    (
        "create table t on cluster 'c' (x Int8) engine = ReplicatedReplacingMergeTree('/p', '{replica}', v) order by x",
        "create table t  (x Int8) engine = ReplacingMergeTree( v) order by x",
    ),
    ("exchange tables a and b on cluster c", "exchange tables a and b "),
    ("system stop merges on cluster c `t`", "system stop merges  `t`"),
    ("drop table if exists x on cluster c sync", "drop table if exists x  sync"),
    # Literals, quoted names and comments are never changed, even when they spell the clause or an engine.
    (
        "create table x on cluster c (s String default 'on cluster c ReplicatedMergeTree') engine = Memory",
        "create table x  (s String default 'on cluster c ReplicatedMergeTree') engine = Memory",
    ),
    ("create table x -- on cluster c2\n on cluster c as y", "create table x -- on cluster c2\n  as y"),
    (
        "create table x /* a /* on cluster c */ on cluster c */ on cluster c as y",
        "create table x /* a /* on cluster c */ on cluster c */  as y",
    ),
    ("create table x // it's on cluster c\n on cluster c as y", "create table x // it's on cluster c\n  as y"),
    # Only the table engine is made plain, never a column or function named like one.
    (
        "create table x on cluster c engine = ReplicatedMergeTree order by tuple() as select ReplicatedMergeTree "
        "from remote('h', db, ReplicatedMergeTree)",
        "create table x  engine = MergeTree order by tuple() as select ReplicatedMergeTree "
        "from remote('h', db, ReplicatedMergeTree)",
    ),
    (
        "create table `ReplicatedMergeTree` on cluster c (s String comment 'it''s \\' on cluster') engine = Log",
        "create table `ReplicatedMergeTree`  (s String comment 'it''s \\' on cluster') engine = Log",
    ),
    (
        "alter table t on cluster c update s = $$ on cluster x $$ where 1",
        "alter table t  update s = $$ on cluster x $$ where 1",
    ),
]

UNTOUCHED = [
    "select * from a join b on cluster in (1)",  # not DDL
    # An `on cluster` past the object's name is not the clause.
    "create view v as select * from a join b on cluster and x = 1",
    "create table t (on Int8, cluster Int8) engine = Memory",
    "insert into t select 'create table x on cluster c'",
    "drop table x /* on cluster c */ sync",
    "create table x (s String default 'abc on cluster c",  # unterminated: the rest is one token
    "create table x engine = ReplicatedMergeTree order by tuple()",  # no ON CLUSTER: forwarded as written
]


@pytest.mark.parametrize(("sql", "expected"), REWRITES)
def test_on_cluster_statements_are_rewritten_on_tokens(sql, expected):
    cluster = "my c" if "`my c`" in sql else "c"
    assert fan_out_statement(sql) == (cluster, expected)


@pytest.mark.parametrize("sql", UNTOUCHED)
def test_other_statements_are_forwarded_as_written(sql):
    assert fan_out_statement(sql) is None


def test_the_cluster_fans_out_ddl_routes_inserts_and_gathers_reads(cluster):
    client = cluster.client()
    try:
        client.command(f"create database if not exists fan_out on cluster {cluster.name}")
        client.command(
            f"create or replace table fan_out.t on cluster {cluster.name} (id UInt64, s String) "
            "engine = ReplicatedReplacingMergeTree('/clickhouse/{shard}/t', '{replica}') order by id"
        )
        client.command(
            f"create or replace table fan_out.d on cluster {cluster.name} as fan_out.t "
            f"engine = Distributed({cluster.name}, fan_out, t, id)"
        )
        client.command(
            "insert into fan_out.d select number, 'on cluster x' from numbers(10) "
            "settings distributed_foreground_insert = 1"
        )
        # Routed by the key (shard n of 2 takes id % 2 = n), the Replicated engine made plain on each node (FINAL through the Distributed table below).
        for n, node in enumerate(cluster.nodes):
            local = node.client()
            assert local.query(
                "select engine from system.tables where database = 'fan_out' and name = 't'"
            ).result_rows == [("ReplacingMergeTree",)]
            assert local.query("select groupArray(id) from (select id from fan_out.t order by id)").result_rows == [
                ([i for i in range(10) if i % 2 == n],)
            ]
            local.close()
        # Reads gather every shard: through the Distributed table, GLOBAL IN, clusterAllReplicas.
        assert client.query("select count(), sum(id) from fan_out.d final").result_rows == [(10, 45)]
        assert client.query(f"select count() from clusterAllReplicas({cluster.name}, fan_out.t)").result_rows == [(10,)]
        assert client.query(
            "select count() from fan_out.d where id global in (select id from fan_out.d where id > 4)"
        ).result_rows == [(5,)]
        # A node that fails the statement fails it for the client, naming the node and those that had run it.
        second, first = (f"127.0.0.1:{node.tcp_port}" for node in reversed(cluster.nodes))
        with contextlib.closing(cluster.nodes[1].client()) as second_node:
            second_node.command("create table if not exists fan_out.only_on_2 (x Int8) engine = Memory")
        with pytest.raises(Exception, match="already exists") as refused:
            client.command(f"create table fan_out.only_on_2 on cluster {cluster.name} (x Int8) engine = Memory")
        assert f"failed on node {second}; nodes that had already run it: {first}" in str(refused.value)
        with contextlib.closing(cluster.nodes[0].client()) as first_node:
            assert first_node.query("exists table fan_out.only_on_2").result_rows == [(1,)]
        # Another cluster's name fails, as on a server.
        with pytest.raises(Exception, match="Requested cluster 'elsewhere' not found"):
            client.command("create table fan_out.u on cluster elsewhere (x Int8) engine = Memory")
    finally:
        client.command(f"drop database if exists fan_out on cluster {cluster.name} sync")
        client.close()
