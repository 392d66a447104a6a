"""Sharded clusters (`cluster` in the profile, `sharding_key` on the model;
docs/design.md#sharded-clusters).

- On a real two-shard cluster (two served nodes, tests/conftest.py `cluster`;
  its DDL fan-out stands in for the DDL queue, vcmt_lab.clickhouse_cluster):
  generated streams of every model shape through dbt-clickhouse with
  `cluster:`, compared with the oracle through the Distributed table and
  checked shard by shard; the generic tests on a Distributed model; the run
  report, watermark and truncate floor across shards; a schema change and
  `--full-refresh`; a shard killed during a load.
- The DDL and loader SQL for a cluster, rendered through `dbt run-operation`
  and parsed by the engine's parser (their shape, for any topology).
- `sharding_key` refusals.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import signal
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import LOGGED_DCL, PACKAGE_ROOT, logged_dcl, make_project, operations_queries
from vcmt_cli.load_stage import LoadError
from vcmt_lab import invariants
from vcmt_lab.clickhouse_cluster import Cluster, DdlFanOut
from vcmt_lab.clickhouse_server import HOST, ServedNode, Shard, free_port
from vcmt_lab.dbt_project import DbtProject, Engine
from vcmt_lab.faults.harness import inject_program, target_on_port, wait_until_stopped
from vcmt_lab.fuzz.runner import HOSTILE_PROFILE_SETTINGS, run_campaign, sharding_key
from vcmt_lab.fuzz.streams import MODEL_SPECS

CLUSTER = "two_shards_two_replicas"
# The campaign of every model shape on the cluster: in make test, each stream's first 100 events in up to 4
# batches (a load through the cluster costs seconds, a round of a rounds load about one);
# VCMT_SHARDED_EVENTS=200 VCMT_SHARDED_MAX_BATCHES=0 runs the long form (up to 21 batches).
SHARDED_EVENTS = int(os.environ.get("VCMT_SHARDED_EVENTS", "100"))
SHARDED_MAX_BATCHES = int(os.environ.get("VCMT_SHARDED_MAX_BATCHES", "4")) or None
SHARDING_KEY = "cityHash64(tenant_id, `order id`)"

RENDER = """
{% macro render_sharded_sql() %}
  {%- set columns = [{'name': 'tenant_id', 'data_type': 'Int32'}, {'name': 'order id', 'data_type': 'Int64'},
                     {'name': 'status', 'data_type': 'String'}, {'name': 'amount', 'data_type': 'Decimal(18, 2)'},
                     {'name': '_version', 'data_type': 'UInt64'}, {'name': 'sign', 'data_type': 'Int8'}] -%}
  {%- set select_columns = columns + [{'name': '_batch_id', 'data_type': 'UInt32'}] -%}
  {%- set target = api.Relation.create(schema='analytics', identifier='orders', type='table',
                                       can_on_cluster=adapter.get_clickhouse_cluster_name() is not none) -%}
  {%- for merge in [{}, {'amount': 'sum'}] -%}
    {%- set cfg = vcmt._read_config({'unique_key': ['tenant_id', 'order id'], 'sharding_key': var('sharding_key'),
                                     'merge': merge, 'watermark': '_batch_id', 'delete_mode': 'unconditional' if merge else 'versioned'}) -%}
    {%- set objs = vcmt.objects(target, cfg.sharding_key) -%}
    {%- set data = vcmt._loaded_data_columns(cfg, columns, select_columns) -%}
    {%- set events_sql = vcmt._normalized_events_sql(cfg, columns, select_columns, 'select * from analytics.orders_events') -%}
    {%- set statements = [] -%}
    {%- for name, sql in vcmt._create_statements(cfg, objs, columns, true) -%}{%- do statements.append(('ddl', sql)) -%}{%- endfor -%}
    {%- do statements.append(('truncate', vcmt._truncate_deletes_sql(cfg, objs, columns))) -%}
    {%- if merge -%}
      {%- do statements.append(('batch', vcmt._batch_create_sql(cfg, objs, data, events_sql, none))) -%}
      {%- do statements.append(('round', vcmt._round_insert_sql(cfg, objs, data, 1))) -%}
      {%- set cfg_fold = vcmt._read_config({'unique_key': ['tenant_id', 'order id'], 'sharding_key': var('sharding_key'), 'merge': merge}) -%}
      {%- do statements.append(('fold_batch', vcmt._fold_batch_sql(cfg_fold, objs, columns, data, vcmt._fold_aggregates(cfg_fold, columns, data)))) -%}
    {%- else -%}
      {%- do statements.append(('fold', vcmt._fold_insert_sql(cfg, objs, data, events_sql))) -%}
    {%- endif -%}
    {%- do statements.append(('report', vcmt._applied_totals_sql(objs, vcmt._next_watermark_sql(cfg, objs, columns, select_columns, '7')))) -%}
    {%- do statements.append(('watermark', vcmt._recorded_watermark_sql(objs))) -%}
    {%- for kind, s in statements -%}{{ print('<<vcmt ' ~ kind ~ '>>' ~ s ~ '<</vcmt>>') }}{%- endfor -%}
  {%- endfor -%}
{% endmacro %}
"""


@pytest.fixture(scope="module")
def project(module_project):
    p = module_project
    profiles = yaml.safe_load((p.root / "profiles.yml").read_text())
    # A server that is not there: rendering must not need a connection.
    profiles["vcmt_test"]["outputs"]["cluster"] = {
        "type": "clickhouse",
        "host": "127.0.0.1",
        "port": 1,
        "schema": "analytics",
        "threads": 1,
        "cluster": CLUSTER,
    }
    (p.root / "profiles.yml").write_text(yaml.safe_dump(profiles))
    p.write("macros/render_sharded.sql", RENDER)
    return p


def _render(project) -> list[tuple[str, str]]:
    run = project.dbt(
        "run-operation", "render_sharded_sql", "--vars", f"{{sharding_key: '{SHARDING_KEY}'}}", target="cluster"
    )
    return [(k, s.strip()) for k, s in re.findall(r"<<vcmt (\w+)>>(.*?)<</vcmt>>", run.log, flags=re.S)]


def _formatted(project, sql: str) -> str:
    """The engine's parser: formatQuery raises on anything it cannot parse."""
    return project.client.query("select formatQuerySingleLine({q:String})", parameters={"q": sql}).result_rows[0][0]


def _says(log: str, text: str) -> bool:
    """The run log says `text`, a count in front of it whole ("0 events read" is not "20 events read")."""
    return re.search(r"(?<![\d,])" + re.escape(text), re.sub(r"\s+", " ", log)) is not None


def test_cluster_ddl_and_loader_sql_parse_and_shard_by_key(project):
    statements = _render(project)
    formatted = [(kind, _formatted(project, sql)) for kind, sql in statements]
    ddl = [s for kind, s in formatted if kind == "ddl"]
    # Per config: target, 4 helpers, guard stage, 3 views (4 with unconditional deletes), stage, exchange,
    # drop guard, 2 Distributed tables.
    assert len(ddl) == 14 + 15, [d[:60] for d in ddl]
    assert all(f"ON CLUSTER {CLUSTER}" in s for s in ddl), [s for s in ddl if "ON CLUSTER" not in s]

    by_name = {
        re.match(r"CREATE (?:TABLE|MATERIALIZED VIEW) (\S+)", s).group(1): s for s in ddl if s.startswith("CREATE")
    }
    # Per shard: a Replicated VCMT target and a Null stage, under dbt-clickhouse's local suffix.
    assert "ENGINE = ReplicatedVersionedCollapsingMergeTree(sign, _version)" in by_name["analytics.orders_local"]
    # The stage is created as a guard that refuses inserts, then exchanged with the real one (a Null table).
    assert "CHECK 0) ENGINE = `Null`" in by_name["analytics.orders__stage_local"]
    assert "ENGINE = `Null`" in by_name["analytics.orders__vcmt_new__stage_local"]
    assert (
        "EXCHANGE TABLES analytics.orders__vcmt_new__stage_local AND analytics.orders__stage_local "
        f"ON CLUSTER {CLUSTER}" in ddl
    )
    # The model's relations: Distributed tables over them, sharded by the same key expression.
    key = _formatted(project, f"select {SHARDING_KEY}").removeprefix("SELECT ")
    assert by_name["analytics.orders"].endswith(
        f"AS analytics.orders_local ENGINE = Distributed('{CLUSTER}', 'analytics', 'orders_local', {key})"
    )
    assert by_name["analytics.orders__stage"].endswith(
        f"AS analytics.orders__stage_local ENGINE = Distributed('{CLUSTER}', 'analytics', 'orders__stage_local', {key})"
    )
    # The Distributed tables come last, the stage's very last: writers reach shards whose transform is attached.
    assert [s.split(" ON CLUSTER")[0] for s in ddl[12:14]] == [
        "CREATE TABLE analytics.orders",
        "CREATE TABLE analytics.orders__stage",
    ]
    # Views are per shard: they read and write local tables only.
    views = [s for s in ddl if s.startswith("CREATE MATERIALIZED VIEW")]
    assert len(views) == 3 + 4
    for view in views:
        assert "clusterAllReplicas" not in view and "Distributed" not in view, view
        assert re.search(r"analytics\.orders(__stage)?(?!\w)", view) is None, view
    transform = by_name["analytics.orders__transform"]
    assert "TO analytics.orders_local" in transform and "FROM analytics.orders__stage_local AS _vcmt_new" in transform

    loader = {kind: s for kind, s in formatted if kind != "ddl"}
    # Loads go through the Distributed stage, synchronously.
    for kind in ("fold", "round", "truncate"):
        assert loader[kind].startswith("INSERT INTO analytics.orders__stage ("), loader[kind]
        assert "distributed_foreground_insert = 1" in loader[kind]
    # Reads gather every shard: the Distributed target, helper tables from every replica.
    all_replicas = f"clusterAllReplicas('{CLUSTER}', 'analytics', 'orders__"
    assert "FROM analytics.orders FINAL PREWHERE" in loader["fold_batch"]
    assert (
        "FROM analytics.orders FINAL WHERE" in loader["truncate"] and f"{all_replicas}truncates')" in loader["truncate"]
    )
    # The batch of a round load stays on the dbt node.
    assert loader["batch"].startswith("CREATE TABLE analytics.orders__batch ENGINE = MergeTree")
    assert "GLOBAL IN" in loader["fold_batch"] and f"{all_replicas}tombstones')" in loader["fold_batch"]
    assert f"{all_replicas}applied')" in loader["report"] and f"{all_replicas}loads')" in loader["report"]
    assert f"FROM {all_replicas}loads')" in loader["watermark"]


REFUSED = {
    "sk_other": (
        "cityHash64(id, qty)",
        [
            "`sharding_key` (cityHash64(id, qty)) must be a function of `unique_key` ['id'] only, but it reads ['qty']",
            "sharding_key='cityHash64(id)'",
        ],
    ),
    "sk_rand": ("id + rand()", ["but rand can return another value for the same `unique_key` ['id']"]),
    # A SQL function is never marked deterministic by the engine (review of issue 14: this one wraps rand()).
    "sk_udf": ("vcmt_sk_jitter(id)", ["but vcmt_sk_jitter can return another value for the same `unique_key`"]),
    "sk_float": ("id / 2", ["must return an integer of 64 bits at most", "it returns Float64"]),
    # Created by the engine, then every INSERT fails (TYPE_MISMATCH): refused before any DDL.
    "sk_wide": ("toUInt128(id)", ["must return an integer of 64 bits at most", "it returns UInt128"]),
    "sk_cluster": (
        "cityHash64(id)",
        ["`sharding_key` needs dbt-clickhouse's `cluster` in the profile", "Set `cluster: <name>`"],
    ),
}


def test_sharding_key_must_be_a_function_of_the_key_on_a_cluster(project):
    project.command("create function if not exists vcmt_sk_jitter as (x) -> x + rand()")
    for name, (key, _) in REFUSED.items():
        project.model(
            name,
            f"{{{{ config(materialized='vcmt_upsert', unique_key='id', sharding_key={key!r}) }}}}\n"
            "select toInt64(1) as id, toInt64(2) as qty, toUInt64(1) as _version",
        )
    run = project.dbt("run", "--select", *REFUSED, expect_pass=False)
    log = re.sub(r"\s+", " ", run.log)
    for name, (_, messages) in REFUSED.items():
        for message in messages:
            assert message in log, (name, message)
        assert not project.query(
            f"select name from system.tables where database = currentDatabase() and startsWith(name, '{name}')"
        ), name
    for name in REFUSED:
        project.remove(f"models/{name}.sql")


# -- on a real two-shard cluster ----------------------------------------------------------------------------------------

SHARDS = 2


@pytest.fixture(scope="module")
def on_cluster(tmp_path_factory, chdb_path, lab_dir, cluster):
    """A project whose ClickHouse target is the two-shard cluster: `type: clickhouse`, `cluster:` set, over HTTP
    through the DDL fan-out, with the fuzz's hostile profile settings but one: under
    `aggregate_functions_null_for_empty` dbt-clickhouse's own listing of relations on a cluster (over
    clusterAllReplicas) fails in the engine, before any vcmt code runs (README "Sharded clusters"). And one more:
    `insert_shard_id`, which would send every row of the loads to the first shard (vcmt pins it to 0); every test
    that checks each shard holds only its keys would fail."""
    settings = {k: v for k, v in HOSTILE_PROFILE_SETTINGS.items() if k != "aggregate_functions_null_for_empty"}
    settings["insert_shard_id"] = 1
    proj = make_project(
        tmp_path_factory.mktemp("sharded_cluster") / "proj",
        "sharded",
        chdb_path,
        lab_dir,
        engine=Engine("http", node=cluster, cluster=cluster.name),
        custom_settings=settings,
    )
    yield proj
    proj.close()


def _routed(key_sql: str, shard: int) -> str:
    """The Distributed engine's rule with equal weights: the n-th shard (from 0) gets key % shards = n."""
    return f"({key_sql}) % {SHARDS} = {shard}"


def _shard_clients(cluster, project):
    return [node.client(project.schema) for node in cluster.nodes]


def _check_shards(cluster, project, spec, problems: list[str]) -> None:
    """Each shard holds only the keys the sharding key gives it, rows and tombstones, and satisfies the
    invariants; both shards received rows."""
    local = f"`{spec.name}_local`"
    for shard, client in enumerate(_shard_clients(cluster, project)):

        def query(sql, client=client):
            return [tuple(r) for r in client.query(sql).result_rows]

        for table in (local, f"`{spec.name}__tombstones`"):
            misplaced = query(f"select countIf(not {_routed(sharding_key(spec), shard)}) from {table}")[0][0]
            if misplaced:
                problems.append(f"{spec.name}: shard {shard + 1}'s {table} holds {misplaced} rows of other shards")
        if not query(f"select count() from {local}")[0][0]:
            problems.append(f"{spec.name}: shard {shard + 1} holds no row: the stream does not exercise it")
        for finding in invariants.check(query, invariants.Target(local, spec.keys), list(spec.columns)):
            if not finding.ok:
                problems.append(f"{spec.name}: shard {shard + 1}: {finding.name}: {finding.detail}")
        client.close()


def test_streams_on_two_shards_equal_the_oracle(on_cluster, cluster):
    """A stream of every model shape (replace, merge policies, truncates, unsent columns, hot keys, unconditional
    deletes, composite and hostile keys), sharded by key, through `dbt run` and the external writer, with crashes,
    empty runs, virtual shards and full refreshes (some failing mid-load): read through the Distributed table the
    model equals the oracle, and every shard holds only its own keys and satisfies the invariants."""
    results = run_campaign(
        on_cluster, len(MODEL_SPECS), events=SHARDED_EVENTS, seed=2000, dbt_every=2, max_batches=SHARDED_MAX_BATCHES
    )
    problems = [f"seed {r.seed} ({r.model} via {r.path}): {p}" for r in results for p in r.problems]
    for spec in MODEL_SPECS:
        _check_shards(cluster, on_cluster, spec, problems)
    assert {r.model for r in results} == {s.name for s in MODEL_SPECS}
    assert {r.path for r in results} == {"dbt", "writer"}
    assert any(r.virtual_shards > 1 for r in results)
    assert any(r.full_refreshes for r in results)
    assert not problems, "\n".join(problems[:40])


def _shard_rows(cluster, project, sql: str) -> list[list[tuple]]:
    """`sql` on each node alone (not through the Distributed tables)."""
    out = []
    for client in _shard_clients(cluster, project):
        out.append([tuple(r) for r in client.query(sql).result_rows])
        client.close()
    return out


SHARDED = "{{{{ config(materialized='vcmt_upsert', unique_key='id', sharding_key='cityHash64(id)'{extra}) }}}}\n"


def test_report_watermark_and_truncate_floor_read_every_shard(on_cluster, cluster):
    """The run report counts the events of both shards, `vcmt.watermark()` and `m__loads` read every node, and
    a truncate removes the rows at or below it on both shards, whose later events below it are then ignored."""
    p = on_cluster
    p.command(
        "create or replace table wm_src (id Int64, a Int64, _version UInt64, _op String, _batch_id UInt64) "
        "engine = MergeTree order by tuple()"
    )
    p.model(
        "wm_sharded",
        SHARDED.format(extra=", watermark='_batch_id', truncate_when=\"_op = 't'\"")
        + "select * from wm_src where _batch_id > {{ vcmt.watermark(0) }}",
    )
    p.command("insert into wm_src select number, number, 10, 'c', 1 from numbers(200)")
    run = p.dbt("run", "--select", "wm_sharded")
    assert _says(run.log, "200 events read (200 upserts, 0 deletes)") and _says(run.log, "200 inserted"), run.log[
        -3000:
    ]
    # Each shard applied its own part of the one load.
    per_shard = [rows[0][0] for rows in _shard_rows(cluster, p, "select count() from wm_sharded_local")]
    assert sum(per_shard) == 200 and min(per_shard) > 50, per_shard
    # Batch 2: a truncate at version 20; events at or below it (version 15) are ignored wherever their key lives,
    # events above it (version 30) are kept. Batch 1 is not read again (the watermark is 1, across shards).
    p.command("insert into wm_src values (0, 0, 20, 't', 2)")
    p.command("insert into wm_src select number, -1, 15, 'c', 2 from numbers(200)")
    p.command("insert into wm_src select number, number * 100, 30, 'c', 2 from numbers(0, 200, 10)")
    run = p.dbt("run", "--select", "wm_sharded")
    assert _says(run.log, "220 events read") and _says(run.log, "200 ignored at or below a truncate"), run.log[-3000:]
    assert p.query("select id, a, _version from wm_sharded final where sign = 1 order by id") == [
        (i, i * 100, 30) for i in range(0, 200, 10)
    ]
    # The loads' records and the truncate floor, read from every node as the package reads them.
    every = f"clusterAllReplicas('{cluster.name}', currentDatabase(), "
    assert p.query(f"select toUInt64(max(watermark)), count() from {every}'wm_sharded__loads')") == [(2, 2)]
    assert p.query(f"select max(version) from {every}'wm_sharded__truncates')") == [(20,)]
    # A late event below the floor, on either shard, is still ignored; a run with nothing new reads nothing.
    p.command("insert into wm_src select number, -2, 5, 'c', 3 from numbers(0, 200, 10)")
    run = p.dbt("run", "--select", "wm_sharded")
    assert _says(run.log, "20 events read") and _says(run.log, "20 ignored at or below a truncate"), run.log[-3000:]
    run = p.dbt("run", "--select", "wm_sharded")
    assert _says(run.log, "0 events read"), run.log[-3000:]
    for rows in _shard_rows(cluster, p, "select countIf(_version < 30) from wm_sharded_local final where sign = 1"):
        assert rows == [(0,)]


def _tables(cluster, project, pattern: str) -> list[list[str]]:
    """Per node, the names in the project's schema matching `pattern` (a regex)."""
    return [
        sorted(r[0] for r in rows)
        for rows in _shard_rows(
            cluster,
            project,
            f"select name from system.tables where database = currentDatabase() and match(name, '{pattern}')",
        )
    ]


def test_schema_change_is_refused_then_full_refresh_swaps_on_every_shard(on_cluster, cluster):
    """A new column on a sharded model is refused with the plan and the fix, changing nothing; `--full-refresh`
    builds the new tables beside the old ones on every shard and swaps them in: the Distributed tables then carry
    the new column, no staging table is left, and a failing `--full-refresh` keeps the old data serving."""
    p = on_cluster
    p.command("create or replace table sc_src (id Int64, a Int64, _version UInt64) engine = MergeTree order by tuple()")
    p.command("insert into sc_src select number, number, 1 from numbers(100)")
    p.model("sc_sharded", SHARDED.format(extra="") + "select id, a, _version from sc_src")
    p.dbt("run", "--select", "sc_sharded")
    p.model(
        "sc_sharded",
        SHARDED.format(extra=", on_schema_change='append_new_columns'")
        + "select id, a, a * 2 as b, _version from sc_src",
    )
    run = p.dbt("run", "--select", "sc_sharded", expect_pass=False)
    log = re.sub(r"\s+", " ", run.log)
    assert "sc_sharded: a sharded model (`sharding_key`) does not change its tables in place" in log, log[-3000:]
    assert "Nothing was changed. Run with --full-refresh" in log
    assert p.query("select count(), sum(a) from sc_sharded final where sign = 1") == [(100, 4950)]
    # A full refresh whose source fails once the new tables are built: the old model keeps serving.
    p.model(
        "sc_sharded",
        SHARDED.format(extra="")
        + "select id, a, a * 2 as b, _version from sc_src where throwIf(id = 77, 'sc: the source failed') = 0",
    )
    run = p.dbt("run", "--select", "sc_sharded", "--full-refresh", expect_pass=False)
    assert "building and loading new tables beside the old ones" in run.log and "sc: the source failed" in run.log
    assert p.query("select count(), sum(a) from sc_sharded final where sign = 1") == [(100, 4950)]
    p.model("sc_sharded", SHARDED.format(extra="") + "select id, a, a * 2 as b, _version from sc_src")
    run = p.dbt("run", "--select", "sc_sharded", "--full-refresh")
    assert "building and loading new tables beside the old ones" in run.log
    assert p.query("select count(), sum(a), sum(b) from sc_sharded final where sign = 1") == [(100, 4950, 9900)]
    for node_tables in _tables(cluster, p, "^sc_sharded"):
        assert not [t for t in node_tables if "vcmt_new" in t], node_tables
        assert "sc_sharded__stage" in node_tables and "sc_sharded_local" in node_tables
    for rows in _shard_rows(
        cluster,
        p,
        "select count() from system.columns where database = currentDatabase() "
        "and table in ('sc_sharded', 'sc_sharded__stage') and name = 'b'",
    ):
        assert rows == [(2,)], rows
    # Writers reach the new tables through the public names: an update of every key, routed to its shard.
    p.command("insert into sc_src select number, number + 1, 2 from numbers(100)")
    p.dbt("run", "--select", "sc_sharded")
    assert p.query("select count(), sum(a), sum(b) from sc_sharded final where sign = 1") == [(100, 5050, 10100)]
    assert p.scalar("select sum(sign) from sc_sharded") == 100
    # A full refresh interrupted between the local tables' exchange and the Distributed tables' replacement (a
    # node lost then) leaves `m` with the old columns: the next run replaces it again.
    for public, local in (("sc_sharded", "sc_sharded_local"), ("sc_sharded__stage", "sc_sharded__stage_local")):
        p.command(
            f"create or replace table {public} on cluster {cluster.name} (id Int64, a Int64, _version UInt64, "
            f"sign Int8) engine = Distributed('{cluster.name}', currentDatabase(), '{local}', cityHash64(id))"
        )
    # The rerun replaces both before it loads: its events, `b` included, go through the writers' stage.
    p.command("insert into sc_src select number, number + 2, 3 from numbers(100)")
    run = p.dbt("run", "--select", "sc_sharded")
    for public, local in (("sc_sharded", "sc_sharded_local"), ("sc_sharded__stage", "sc_sharded__stage_local")):
        assert (
            f"vcmt_upsert {public}: its columns differ from {local}'s (an interrupted --full-refresh); "
            "replacing it" in run.log
        ), run.log[-3000:]
    assert p.query("select count(), sum(a), sum(b) from sc_sharded final where sign = 1") == [(100, 5150, 10300)]
    # Another `sharding_key` on the stored model is refused: its keys' next events would go to other shards.
    p.model(
        "sc_sharded",
        SHARDED.format(extra="").replace("cityHash64(id)", "intHash64(id)")
        + "select id, a, a * 2 as b, _version from sc_src",
    )
    run = p.dbt("run", "--select", "sc_sharded", expect_pass=False)
    assert "`sharding_key` (or the profile's `cluster`) changed" in re.sub(r"\s+", " ", run.log), run.log[-2000:]
    # An external load names the same cause (the check of each shard's rows, by the new key, comes after it).
    with pytest.raises(LoadError) as external:
        p.load_rows("sc_sharded", [{"id": 1, "a": 5, "b": 10, "_version": 9}])
    message = re.sub(r"\s+", " ", str(external.value))
    assert "vcmt.load_stage sc_sharded: `sharding_key` (or the profile's `cluster`) changed" in message, message
    assert p.scalar("select sum(sign) from sc_sharded") == 100


GENERIC_TESTS_YML = """
version: 2
models:
  - name: gt_sharded
    data_tests:
      - vcmt.sign_sum_in_range:
          arguments: {per_version: true}
      - vcmt.single_live_version
      - vcmt.groupby_matches_final:
          arguments: {group_by: [status], metrics: [amount]}
      - vcmt.projection_matches_base
"""


def test_generic_tests_on_the_distributed_model(on_cluster, cluster):
    """The package's generic tests read the Distributed model, so they see every shard: they pass on a model
    loaded by vcmt, and fail when one shard's local table is corrupted."""
    p = on_cluster
    p.command(
        "create or replace table gt_src (id Int64, status String, amount Decimal(18, 2), _version UInt64, "
        "_deleted UInt8) engine = MergeTree order by tuple()"
    )
    p.command("insert into gt_src select number, ['open', 'paid'][number % 2 + 1], number / 4, 1, 0 from numbers(400)")
    projection = "{'name': 'by_status', 'query': 'select status, sum(sign), sum(amount * sign) group by status'}"
    p.model("gt_sharded", SHARDED.format(extra=f", projections=[{projection}]") + "select * from gt_src")
    p.write("models/gt_sharded.yml", GENERIC_TESTS_YML)
    p.dbt("run", "--select", "gt_sharded")
    # Updates and deletes of keys on both shards.
    p.command("insert into gt_src select number, 'shipped', number / 2, 2, number % 3 = 0 from numbers(0, 400, 7)")
    p.dbt("run", "--select", "gt_sharded")
    run = p.dbt("test", "--select", "gt_sharded")
    statuses = [str(r.status) for r in run.result.result.results if r.node.resource_type == "test"]
    assert len(statuses) >= 4 and set(statuses) == {"pass"}, (statuses, run.log[-2000:])
    # The aggregating projection answers through the Distributed table on both shards.
    assert p.query(
        "select status, sum(sign) from gt_sharded group by status order by status", force_optimize_projection=1
    ) == p.query("select status, count() from gt_sharded final where sign = 1 group by status order by status")
    # One shard's replayed state row: the tests reading `gt_sharded` find it.
    node = cluster.nodes[1]
    client = node.client(p.schema)
    key = None
    try:
        key = client.query("select id from gt_sharded_local final where sign = 1 limit 1").result_rows[0][0]
        client.command(
            f"insert into gt_sharded_local select * from gt_sharded_local where id = {key} and sign = 1 "
            "settings insert_deduplicate = 0"
        )
        run = p.dbt("test", "--select", "gt_sharded", expect_pass=False)
        failed = {r.node.name.split("_gt_sharded")[0] for r in run.result.result.results if str(r.status) == "fail"}
        assert "vcmt_sign_sum_in_range" in failed, failed
    finally:
        if key is not None:
            client.command(f"alter table gt_sharded_local delete where id = {key} settings mutations_sync = 1")
        client.close()


KILL_TIMEOUT_S = 300


def test_shard_lost_during_a_load_then_rerun_is_exact(on_cluster, cluster):
    """A shard's node is SIGKILLed while `dbt run` loads a batch through the Distributed stage: the run fails,
    naming the node it lost; once the node is back, the same run again ends exact on both shards."""
    p = on_cluster
    keys = 1_000_000
    p.command("create or replace table ks_src (id Int64, a Int64, _version UInt64) engine = MergeTree order by tuple()")
    p.model("ks_sharded", SHARDED.format(extra="") + "select id, a, _version from ks_src")
    p.command("insert into ks_src select number, number, 1 from numbers(1000)")
    p.dbt("run", "--select", "ks_sharded")
    # The next batch updates those keys and adds many, read slowly (3 s a read): the load's INSERT streams
    # blocks to both shards for seconds.
    p.model(
        "ks_sharded", SHARDED.format(extra="") + "select id, a, _version from ks_src where sleepEachRow(0.000003) = 0"
    )
    p.command("truncate table ks_src")
    p.command(f"insert into ks_src select number, number * 2, 2 from numbers({keys})")
    lost = cluster.nodes[1]
    watcher = cluster.nodes[0].client(p.schema)
    proc = p.dbt_process("killed", "run", "--select", "ks_sharded")
    try:
        deadline = time.monotonic() + KILL_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            loading = watcher.query(
                "select count() from system.processes where is_initial_query and query_id != queryID() "
                "and query ilike '%insert into%ks_sharded__stage%'"
            ).result_rows[0][0]
            if loading:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the load ended before the node could be killed:\n" + proc.stdout.read()[-3000:]
        time.sleep(1)
        lost.kill()
        output, _ = proc.communicate(timeout=KILL_TIMEOUT_S)
        assert proc.returncode != 0, output[-3000:]
        # What the user sees: the model's failure, naming the shard's address that stopped answering.
        assert "Failure in model ks_sharded" in output and f"127.0.0.1:{lost.tcp_port}" in output, output[-3000:]
        assert "ALL_CONNECTION_TRIES_FAILED" in output and "Insertion status" in output, output[-3000:]
        # A run while the shard is down fails at once, the same way.
        down = p.dbt("run", "--select", "ks_sharded", expect_pass=False)
        assert "ALL_CONNECTION_TRIES_FAILED" in down.log and f"127.0.0.1:{lost.tcp_port}" in down.log
    finally:
        if proc.poll() is None:
            proc.kill()
        watcher.close()
        lost.start()
    p.dbt("run", "--select", "ks_sharded")
    assert p.query("select count(), sum(a), min(_version) from ks_sharded final where sign = 1") == [
        (keys, keys * (keys - 1), 2)
    ]
    assert p.scalar("select sum(sign) from ks_sharded") == keys
    assert p.query("select count() from (select id from ks_sharded group by id having sum(sign) not in (0, 1))") == [
        (0,)
    ]
    problems: list[str] = []
    for shard, client in enumerate(_shard_clients(cluster, p)):
        for finding in invariants.check(
            lambda sql, c=client: [tuple(r) for r in c.query(sql).result_rows],
            invariants.Target("ks_sharded_local", ["id"]),
            ["a"],
        ):
            if not finding.ok:
                problems.append(f"shard {shard + 1}: {finding.name}: {finding.detail}")
        misplaced = client.query(f"select countIf(not {_routed('cityHash64(id)', shard)}) from ks_sharded_local")
        if misplaced.result_rows[0][0]:
            problems.append(f"shard {shard + 1} holds keys of the other shard")
        client.close()
    assert not problems, problems


def test_loads_through_two_nodes_are_serialised(on_cluster, cluster):
    """The lock lives on the cluster's first shard, which every node reaches: a `dbt run` through the second
    node waits while a load through the first holds it (stopped right before its stage INSERT), then goes on;
    both succeed and the model is exact (docs/design.md#one-load-at-a-time)."""
    p = on_cluster
    # The source: the same rows on every node (each load reads it where it runs).
    p.command(
        f"create or replace table two_src on cluster {cluster.name} (id Int64, a Int64, _version UInt64) "
        "engine = MergeTree order by tuple()"
    )
    clients = _shard_clients(cluster, p)
    for client in clients:
        client.command("insert into two_src select number, number, 1 from numbers(1000)")
    p.model("two_nodes", SHARDED.format(extra="") + "select id, a, _version from two_src")
    p.dbt("run", "--select", "two_nodes")
    for client in clients:
        client.command("insert into two_src select number, number * 3, 2 from numbers(1500)")
        client.close()
    entry = cluster.entry(1)
    saved = dict(p.vars)
    p.vars = {**p.vars, "vcmt_lock_lease_s": 600}  # the stopped load is never taken over here
    first = second = None
    try:
        via_second = target_on_port(p, "via_second_node", entry.port)
        first = p.dbt_process(
            "first",
            "run",
            "--select",
            "two_nodes",
            program=inject_program(),
            env={"VCMT_FAULT": "pause@insert two_nodes__stage#1"},
        )
        deadline = time.monotonic() + KILL_TIMEOUT_S
        assert wait_until_stopped(first, KILL_TIMEOUT_S), first.communicate()[0][-3000:]
        second = p.dbt_process("second", "run", "--select", "two_nodes", target=via_second)
        node2 = cluster.nodes[1].client(p.schema)
        while (
            time.monotonic() < deadline
            and second.poll() is None
            and not node2.command(
                "select count() from system.processes where query_id != queryID() "
                "and position(query, concat('select sle', 'ep(1)')) > 0"
            )
        ):
            time.sleep(0.05)
        node2.close()
        first.send_signal(signal.SIGCONT)
        out1, _ = first.communicate(timeout=KILL_TIMEOUT_S)
        out2, _ = second.communicate(timeout=KILL_TIMEOUT_S)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
        entry.stop()
        p.vars = saved
    assert first.returncode == 0 and second.returncode == 0, out1[-3000:] + out2[-3000:]
    assert "waiting for another load of this model" in out2, out2[-3000:]
    assert p.query("select count(), sum(a), min(_version) from two_nodes final where sign = 1") == [
        (1500, 3 * 1499 * 1500 // 2, 2)
    ]
    assert p.query(
        "select count() from (select id, _version from two_nodes group by id, _version having sum(sign) not in (0, 1))"
    ) == [(0,)]


# -- a node lost while a --full-refresh swaps its tables in (issue 40, case 5) -----------------------------------------

# The ON CLUSTER statements of a sharded model's --full-refresh once its checks have passed, in order, as
# vcmt_lab.faults.inject names them (`{m}` the model): the new objects created beside the old ones (then loaded),
# the exchanges (helpers, the local target, the local stage), the Distributed tables replaced, the views' queries,
# the old delete writer and round batch dropped, then the staging objects (the old tables) dropped.
REFRESH_STATEMENTS = [
    "create {m}__vcmt_new_local",
    "create {m}__vcmt_new__tombstones",
    "create {m}__vcmt_new__applied",
    "create {m}__vcmt_new__loads",
    "create {m}__vcmt_new__truncates",
    "create {m}__vcmt_new__applied_writer",
    "create {m}__vcmt_new__stage_local",
    "create {m}__vcmt_new__transform",
    "create {m}__vcmt_new__tombstones_writer",
    "create {m}__vcmt_new",
    "create {m}__vcmt_new__stage",
    "exchange {m}__vcmt_new__tombstones",
    "exchange {m}__vcmt_new__applied",
    "exchange {m}__vcmt_new__loads",
    "exchange {m}__vcmt_new__truncates",
    "exchange {m}__vcmt_new_local",
    "exchange {m}__vcmt_new__stage_local",
    "create {m}",
    "create {m}__stage",
    "alter {m}__transform",
    "alter {m}__applied_writer",
    "alter {m}__tombstones_writer",
    "drop {m}__tombstones_from_cancels",
    "drop {m}__vcmt_new__stage",
    "drop {m}__vcmt_new",
    "drop {m}__vcmt_new__transform",
    "drop {m}__vcmt_new__tombstones_writer",
    "drop {m}__vcmt_new__applied_writer",
    "drop {m}__vcmt_new__stage_local",
    "drop {m}__vcmt_new_local",
    "drop {m}__vcmt_new__tombstones",
    "drop {m}__vcmt_new__applied",
    "drop {m}__vcmt_new__loads",
    "drop {m}__vcmt_new__truncates",
]
FIRST_SWAP = REFRESH_STATEMENTS.index("exchange {m}__vcmt_new__tombstones")
# make test runs the case (the second node lost at the local target's EXCHANGE: the first node serves the
# rebuild, the second the old table); VCMT_SWAP_SWEEP=1 (make swap-sweep) runs every statement with either node
# lost.
SWEEP = os.environ.get("VCMT_SWAP_SWEEP") == "1"
MAIN_CASE = ("exchange {m}__vcmt_new_local", 1)


def _sweep_only(test):
    """A real-cluster case that `make swap-sweep` runs and make test does not collect (not skipped: nothing counts
    it): what its run plans is checked, in milliseconds, on a capture of the same state (tests/lifecycle,
    test_plans.py), and the real-engine proof that a mend makes every node serve the rebuild is MAIN_CASE's."""
    return pytest.mark.swap_sweep(test) if SWEEP else None


def _outcome(statement: str, lost_node: int) -> str:
    """What the next ordinary run finds. The fan-out runs a statement node after node and stops at the first that
    fails: with the first node lost no node ran it, with the second the first did."""
    at = REFRESH_STATEMENTS.index(statement)
    if statement.startswith("exchange") and lost_node == 1:
        return "mend"  # one node serves the rebuild's table, the other the old one: a split, mended
    if at < FIRST_SWAP or (at == FIRST_SWAP and lost_node == 0):
        return "rollback"  # no node serves any new table
    return "finish"  # every node serves the same tables, the rebuild loaded


def _swap_cases():
    for statement in REFRESH_STATEMENTS:
        for node in (1, 0):
            case = (statement, node)
            # Outside the sweep the other cases are not collected (not skipped: nothing counts them).
            if SWEEP or case == MAIN_CASE:
                yield pytest.param(*case, id=f"{statement.format(m='m').replace(' ', '_')}_node{node + 1}")


@pytest.mark.swap_sweep
@pytest.mark.parametrize("statement,lost_node", list(_swap_cases()))
def test_node_lost_at_a_swap_statement_of_a_full_refresh_then_next_runs_repair(
    on_cluster, cluster, statement, lost_node
):
    """A sharded `--full-refresh` is stopped right before one ON CLUSTER statement of its swap, a node is killed,
    and the statement runs: it fails on that node, the nodes before it in the queue having run it; the node comes
    back. If an EXCHANGE ran on some nodes only (the second node lost), the next ordinary run mends that table
    (every node copies the rebuild from the name that holds it there, and the copy is swapped in everywhere), then
    finishes the swap; in every other case it rolls back or finishes the swap on every node. Either way the model
    read through the Distributed table then equals the rebuild, and no staging object is left on any node."""
    p = on_cluster
    m = f"fr{REFRESH_STATEMENTS.index(statement)}_{lost_node}"
    saved = dict(p.vars)
    try:
        _lose_a_node_at(p, cluster, m, statement.format(m=m), lost_node)
        _next_runs_repair(p, cluster, m, _outcome(statement, lost_node))
    finally:
        p.vars = saved


def _lose_a_node_at(p, cluster, m: str, label: str, lost_node: int, before_refresh=None) -> None:
    """Model `m` loaded with 100 keys, then (after `before_refresh()`, if given) a `--full-refresh` whose SELECT has
    50 of them is stopped right before its statement `label`; node `lost_node` is killed, the statement fails
    there, and the node comes back."""
    # The model before: 100 keys. The rebuild's SELECT: 50 of them, other values, a newer version. (dbt reaches the
    # first node: the source lives there.)
    p.command(
        f"create or replace table {m}_src (id Int64, a Int64, _version UInt64) engine = MergeTree order by tuple()"
    )
    p.command(f"insert into {m}_src select number, number, 1 from numbers(100)")
    p.model(m, SHARDED.format(extra="") + f"select id, a, _version from {m}_src")
    p.dbt("run", "--select", m)
    p.command(f"truncate table {m}_src")
    p.command(f"insert into {m}_src select number, number * 7, 2 from numbers(50)")
    if before_refresh is not None:
        before_refresh()
    p.vars = {**p.vars, "vcmt_lock_lease_s": 3}  # the failed refresh's lock may be left to lapse (node lost)
    _lose_a_node_during(p, cluster, m, label, lost_node, "--full-refresh")


def _lose_a_node_during(p, cluster, m: str, label: str, lost_node: int, *args: str) -> None:
    """`dbt run --select m <args>` stopped right before its statement `label`; node `lost_node` is killed, the
    statement runs and fails there, the run fails naming that node, and the node comes back."""
    lost = cluster.nodes[lost_node]
    proc = p.dbt_process(
        f"lose_{lost_node}_{m}",
        "run",
        "--select",
        m,
        *args,
        program=inject_program(),
        env={"VCMT_FAULT": f"pause@{label}#1"},
    )
    try:
        assert wait_until_stopped(proc, KILL_TIMEOUT_S), proc.communicate()[0][-3000:]
        lost.kill()
        proc.send_signal(signal.SIGCONT)
        output, _ = proc.communicate(timeout=KILL_TIMEOUT_S)
        assert proc.returncode != 0 and f"127.0.0.1:{lost.tcp_port}" in output, output[-3000:]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        lost.start()


@_sweep_only
def test_node_lost_while_a_split_swap_is_mended_then_next_run_mends_it(on_cluster, cluster):
    """A mend can split too: the run that mends the issue's split (the local target's EXCHANGE ran on the first
    node only) loses the second node at the mend's own EXCHANGE of the copy, so the first node now serves the copy
    and the second still the old table. The next run mends again (the copies dropped first, the rebuild copied
    from wherever it is on each node) and the model equals the rebuild."""
    p = on_cluster
    m = "mend_twice"
    saved = dict(p.vars)
    try:
        _lose_a_node_at(p, cluster, m, f"exchange {m}__vcmt_new_local", 1)
        _lose_a_node_during(p, cluster, m, f"exchange {m}__vcmt_mend_local", 1)
        served = _shard_rows(cluster, p, f"select comment like 'vcmt generation %' from system.tables "
                                         f"where database = currentDatabase() and name = '{m}_local'")  # fmt: skip
        assert [rows[0][0] for rows in served] == [1, 0], served  # split again, by the mend's own EXCHANGE
        _next_runs_repair(p, cluster, m, "mend")
    finally:
        p.vars = saved


@_sweep_only
def test_a_split_rename_is_mended(on_cluster, cluster):
    """A table the model did not have before its `--full-refresh` (a helper an upgrade added; here dropped by hand)
    is renamed in, not exchanged: that RENAME split leaves the model's name on the first node only. The next run
    creates an empty table of that name where it is missing, mends the split, finishes the swap, and the model
    equals the rebuild."""
    p = on_cluster
    m = "mend_rename"
    saved = dict(p.vars)
    try:
        _lose_a_node_at(
            p, cluster, m, f"rename {m}__vcmt_new__truncates", 1,
            before_refresh=lambda: p.command(f"drop table {m}__truncates on cluster {cluster.name} sync"),
        )  # fmt: skip
        assert [rows[0][0] for rows in _shard_rows(cluster, p, f"exists table {m}__truncates")] == [1, 0]
        _next_runs_repair(p, cluster, m, "mend")
    finally:
        p.vars = saved


def test_a_split_mend_compares_what_the_engine_merges_not_stored_rows(on_cluster, cluster):
    """The issue's split, whose rebuild on the second node (still under the staging name) then gets an update as
    separate inserts: a cancel row and the new state row in parts of their own. The mend's copy is merged on
    insert, so it stores fewer rows than its source; its check compares what both read as their engine merges
    them, so the mend goes on, and the model is the rebuild with that update."""
    p = on_cluster
    m = "mend_unmerged"
    saved = dict(p.vars)
    try:
        _lose_a_node_at(p, cluster, m, f"exchange {m}__vcmt_new_local", 1)
        second = cluster.nodes[1].client(p.schema)
        # Merges stopped: the source keeps its three parts whatever the machine's pace, so it stores the cancel and
        # state rows beside the row they retire, while the copy, one insert, merges them.
        second.command(f"system stop merges {m}__vcmt_new_local")
        key = second.query(f"select id from {m}__vcmt_new_local where sign = 1 order by id limit 1").result_rows[0][0]
        second.command(f"insert into {m}__vcmt_new_local values ({key}, {7 * key}, 2, -1)")
        second.command(f"insert into {m}__vcmt_new_local values ({key}, 1000, 3, 1)")
        stored = second.query(f"select count() from {m}__vcmt_new_local").result_rows[0][0]
        second.close()
        run = p.dbt("run", "--select", m)
        assert "ran on some nodes only; mending" in re.sub(r"\s+", " ", run.log), run.log[-3000:]
        read = f"select count(), sum(a), max(_version) from {m} final where sign = 1"
        assert p.query(read) == [(50, 7 * 49 * 50 // 2 - 7 * key + 1000, 3)], run.log[-3000:]
        copied = cluster.nodes[1].client(p.schema)
        assert copied.query(f"select count() from {m}_local").result_rows[0][0] < stored  # merged on insert
        copied.close()
        for node_tables in _tables(cluster, p, f"^{m}"):
            assert not [t for t in node_tables if "__vcmt_" in t], node_tables
    finally:
        p.vars = saved


def test_a_full_refresh_that_drops_a_split_swaps_staging_then_fails_leaves_a_model_every_run_refuses(
    on_cluster, cluster
):
    """The issue's split, then a `--full-refresh` whose load fails: its build drops the split swap's staging tables
    on every node (the second node's only copy of the first rebuild). The nodes now serve two generations with
    nothing to mend from: every ordinary run fails before any write, naming each node and what it serves, until
    a `--full-refresh` rebuilds every node."""
    p = on_cluster
    m = "mend_mixed"
    saved = dict(p.vars)
    try:
        _lose_a_node_at(p, cluster, m, f"exchange {m}__vcmt_new_local", 1)
        p.model(m, SHARDED.format(extra="") + f"select id, a + throwIf(id = 3) as a, _version from {m}_src")
        p.dbt("run", "--select", m, "--full-refresh", expect_pass=False)
        p.model(m, SHARDED.format(extra="") + f"select id, a, _version from {m}_src")
        for _ in range(2):  # the first drops the failed refresh's staging tables, then refuses; the next refuses
            run = p.dbt("run", "--select", m, expect_pass=False)
            log = re.sub(r"\s+", " ", run.log)
            assert f"vcmt_upsert {m}: the nodes serve different generations of the model" in log, log[-4000:]
            assert f"{m}_local: shard 1 (" in log and "serves its first build" in log, log[-4000:]
        # An external load refuses too, before writing anything, and names the run that says what to do.
        before = p.query(f"select count(), sum(a) from {m} final where sign = 1")
        with pytest.raises(LoadError) as refused:
            p.load_rows(m, [{"id": 1, "a": 123, "_version": 9}])
        message = re.sub(r"\s+", " ", str(refused.value))
        assert f"vcmt.load_stage {m}: a --full-refresh" in message and "Nothing was loaded" in message, message
        assert f"Run `dbt run --select {m}` first" in message, message
        assert p.query(f"select count(), sum(a) from {m} final where sign = 1") == before
        run = p.dbt("run", "--select", m, "--full-refresh")
        assert p.query(f"select count(), sum(a), min(_version) from {m} final where sign = 1") == [
            (50, 7 * 49 * 50 // 2, 2)
        ], run.log[-3000:]
        assert p.dbt("run", "--select", m).log
    finally:
        p.vars = saved


@pytest.mark.parametrize("cause", ["dropped", "changed"])
def test_a_split_swap_that_cannot_be_mended_is_refused_naming_why(on_cluster, cluster, cause):
    """The issue's split, then either the rebuild's table dropped by hand on the node that had not swapped it in
    (nothing to copy there), or the model given another column (a copy built from the config would not have the
    rebuild's columns): the next run is refused before any DDL, naming each node, what it serves and why. The
    next `--full-refresh` rebuilds every node (the model given its column back: the next run mends instead)."""
    p = on_cluster
    m = f"mend_{cause}"
    saved = dict(p.vars)
    try:
        _lose_a_node_at(p, cluster, m, f"exchange {m}__vcmt_new_local", 1)
        if cause == "dropped":
            second = cluster.nodes[1].client(p.schema)
            second.command(f"drop table {m}__vcmt_new_local sync")
            second.close()
            _next_runs_repair(p, cluster, m, "split")
            return

        def objects():  # the model's, the staging and the mend's (not its lock's)
            return [[t for t in node if "__lock" not in t] for node in _tables(cluster, p, f"^{m}")]

        before = objects()
        p.model(m, SHARDED.format(extra="") + f"select id, a, _version, toInt64(0) as b from {m}_src")
        run = p.dbt("run", "--select", m, expect_pass=False)
        log = re.sub(r"\s+", " ", run.log)
        refused = f"The swap cannot be mended here: the model changed since that --full-refresh: its config now builds {m}_local"
        assert refused in log, log[-4000:]
        assert objects() == before  # refused before any DDL
        p.model(m, SHARDED.format(extra="") + f"select id, a, _version from {m}_src")
        _next_runs_repair(p, cluster, m, "mend")
    finally:
        p.vars = saved


def _next_runs_repair(p, cluster, m: str, outcome: str) -> None:
    rebuild = [(50, 7 * 49 * 50 // 2, 2)]
    read = f"select count(), sum(a), min(_version) from {m} final where sign = 1"
    left = [t for node_tables in _tables(cluster, p, f"^{m}") for t in node_tables if "__vcmt_" in t]
    run = p.dbt("run", "--select", m, expect_pass=outcome != "split")
    log = re.sub(r"\s+", " ", run.log)
    if outcome == "split":
        # Refused before any write, naming each node and what it serves, why, and the fix.
        assert "ran on some nodes only: the nodes serve different generations of the model" in log, log[-4000:]
        for node in cluster.nodes:
            assert f":{node.tcp_port}) serves the rebuild for" in log, log[-4000:]
        assert "The swap cannot be mended here: shard 2 (" in log and "under no name" in log, log[-4000:]
        assert f"Run `dbt run --select {m} --full-refresh`, which drops the staging objects on every node" in log, log[
            -4000:
        ]
        run = p.dbt("run", "--select", m, "--full-refresh")
    elif outcome == "mend":
        assert f"vcmt_upsert {m}: a --full-refresh" in log and "ran on some nodes only; mending" in log, log[-4000:]
        assert "its swap is finished on every node" in log, log[-4000:]
    elif outcome == "rollback":
        # The old model serves on every node, the staging objects are gone, the run's events are applied to it.
        if left:  # none when the first CREATE failed on the first node
            assert f"vcmt_upsert {m}: a --full-refresh stopped before it swapped any table in" in log, log[-4000:]
        assert p.query(read) == [(100, 7 * 49 * 50 // 2 + sum(range(50, 100)), 1)], run.log[-3000:]
        for node_tables in _tables(cluster, p, f"^{m}"):
            assert not [t for t in node_tables if "vcmt_new" in t], node_tables
        run = p.dbt("run", "--select", m, "--full-refresh")
    else:
        assert f"vcmt_upsert {m}: a --full-refresh" in log and "its swap is finished on every node" in log, log[-4000:]
    assert p.query(read) == rebuild, run.log[-3000:]
    assert p.scalar(f"select sum(sign) from {m}") == 50
    for node_tables in _tables(cluster, p, f"^{m}"):
        assert not [t for t in node_tables if "__vcmt_" in t], node_tables
    # Each node serves its own keys only, and the model goes on: an update of every key.
    for shard, client in enumerate(_shard_clients(cluster, p)):
        rows = client.query(f"select countIf(not {_routed('cityHash64(id)', shard)}), count() from {m}_local")
        client.close()
        assert rows.result_rows[0][0] == 0 and rows.result_rows[0][1] > 0, (shard, rows.result_rows)
    p.command(f"insert into {m}_src select number, number * 9, 3 from numbers(50)")
    run = p.dbt("run", "--select", m)
    assert p.query(read) == [(50, 9 * 49 * 50 // 2, 3)], run.log[-3000:]


def test_the_lock_is_read_from_its_own_shard_only(on_cluster, cluster):
    """The lock's table lives on every node, but its rows are the first shard's. A node without it (one added to
    the cluster since the model was built, or one that missed the CREATE) was asked too, and failed every run and
    every `--full-refresh`. The lock is read through the first shard alone (pruned by a constant sharding key, as
    its rows are written), so the run goes on and is exact."""
    p = on_cluster
    m = "lock_first_shard"
    p.command(
        f"create or replace table {m}_src (id Int64, a Int64, _version UInt64) engine = MergeTree order by tuple()"
    )
    p.command(f"insert into {m}_src select number, number, 1 from numbers(100)")
    p.model(m, SHARDED.format(extra="") + f"select id, a, _version from {m}_src")
    p.dbt("run", "--select", m)
    second = cluster.nodes[1].client(p.schema)
    locks = [r[0] for r in second.query(f"select name from system.tables where database = currentDatabase() "
                                          f"and name like '{m}\\_local\\_\\_lock%'").result_rows]  # fmt: skip
    assert len(locks) == 2, f"the lock's table and the 0.4 lock's sentinel are on every node: {locks}"
    for name in locks:
        second.command(f"drop table {name} sync")
    second.close()
    p.command(f"insert into {m}_src select number, number * 3, 2 from numbers(100)")
    run = p.dbt("run", "--select", m)
    assert p.query(f"select count(), sum(a), max(_version) from {m} final where sign = 1") == [(100, 3 * 4950, 2)], (
        run.log[-3000:]
    )
    # docs/operations.md's listing of a schema without vcmt's objects, on the first node: the model, its stage and
    # their per-shard tables; its lock (`<m>_local__lock`, there) and helpers are not listed.
    (listing,) = [q for q in operations_queries() if "without vcmt objects" in q]
    names = [r[0] for r in p.query(listing.replace("analytics", p.schema))]
    assert [n for n in names if n.startswith(m)] == [m, f"{m}__stage", f"{m}__stage_local", f"{m}_local", f"{m}_src"], (
        names
    )


def test_grants_go_to_the_model_and_its_per_shard_table_only(on_cluster, cluster):
    """A sharded model's `grants` go to `m` and its per-shard `m_local`, on the cluster, as dbt-clickhouse's
    distributed materializations grant (a Distributed table's read of its own node's shard checks the reader
    there: ClickHouse issue 9101), and to none of its helpers, on a first run and on a `--full-refresh`. The
    GRANTs are logged, not sent (tests/conftest.py LOGGED_DCL); users holding those privileges then read the
    model, and one holding SELECT on `m` alone is refused."""
    p = on_cluster
    m = "granted_shards"
    p.command(f"create or replace table {m}_src (id Int64, a Int64, _version UInt64) engine = MergeTree order by ()")
    p.command(f"insert into {m}_src select number, number, 1 from numbers(10)")
    p.model(m, SHARDED.format(extra=", grants={'select': ['reporter']}") + f"select id, a, _version from {m}_src")
    p.write("macros/logged_dcl.sql", LOGGED_DCL)
    try:
        for args in ((), ("--full-refresh",)):
            run = p.dbt("run", "--select", m, *args)
            assert logged_dcl(run.log) == sorted(
                f'grant ON CLUSTER "{cluster.name}" select on `{p.schema}`.`{name}` to reporter'
                for name in (m, f"{m}_local")
            ), run.log[-3000:]
    finally:
        p.remove("macros/logged_dcl.sql")
    # What those grants are for: through the Distributed `m`, a reader holding SELECT on `m` alone is refused at
    # its own node's shard, and one holding it on `m_local` too reads every shard. The nodes keep users in
    # users.xml, so they are restarted with these users (their data survives), then without.
    table = f"{p.schema}.{m}"
    users = {
        "reads_m": [f"GRANT SELECT ON {table}"],
        "reads_both": [f"GRANT SELECT ON {table}", f"GRANT SELECT ON {table}_local"],
    }
    try:
        _restart_with_users(cluster, users)
        with contextlib.closing(cluster.nodes[0].client(p.schema, username="reads_both")) as reader:
            assert reader.query(f"select count(), sum(a) from {m} final where sign = 1").result_rows == [(10, 45)]
        with contextlib.closing(cluster.nodes[0].client(p.schema, username="reads_m")) as refused:
            with pytest.raises(Exception, match=rf"grant SELECT\b.* ON {re.escape(table)}_local\b"):
                refused.query(f"select count() from {m}")
    finally:
        _restart_with_users(cluster, None)


def _restart_nodes(cluster, configure) -> None:
    """Every node of the cluster stopped, then each changed by `configure(node)` and started again, on the same
    data."""
    for node in cluster.nodes:
        node.stop()
    for node in cluster.nodes:
        configure(node)
        node.start()


def _restart_with(cluster, change) -> None:
    """Every node of the cluster restarted with its shards (in shard order) replaced by `change(shards)`: what an
    operator's change of `remote_servers` does, on the same nodes and data."""

    def configure(node) -> None:
        node.clusters = {**node.clusters, cluster.name: list(change(node.clusters[cluster.name]))}

    _restart_nodes(cluster, configure)


def _restart_with_users(cluster, users) -> None:
    """Every node of the cluster restarted with `users` (config_xml's), on the same data."""
    _restart_nodes(cluster, lambda node: setattr(node, "users", users))


def _restart_with_weights(cluster, weights: list[int]) -> None:
    """The cluster restarted with its shards given `weights`, in shard order."""
    _restart_with(
        cluster, lambda shards: [dataclasses.replace(s, weight=w) for s, w in zip(shards, weights, strict=True)]
    )


def test_a_cluster_that_places_keys_otherwise_is_refused_until_a_full_refresh(on_cluster, cluster):
    """The cluster's shards given other weights (4 and 3): the Distributed engine now sends some of the stored
    keys' events to the shard that does not hold them, where each would get a second live row. The next run and an
    external load are refused before any write, naming the placement the model's last load recorded and the
    cluster's now; a `--full-refresh` rebuilds every shard on the new placement, and the model goes on exact.
    A second model, sharded by a negative-going Int16, is not refused after its own rebuild: the check of each
    shard's rows takes a narrow signed value as the engine's insert does (on 32 bits; 7 slots tell 32 from 64)."""
    p = on_cluster
    m = "placement"
    read = f"select count(), sum(a), max(_version) from {m} final where sign = 1"
    loads = f"clusterAllReplicas('{cluster.name}', currentDatabase(), {m}__loads)"
    p.command(
        f"create or replace table {m}_src (id Int64, a Int64, _version UInt64) engine = MergeTree order by tuple()"
    )
    p.command(f"insert into {m}_src select number, number, 1 from numbers(100)")
    p.model(m, SHARDED.format(extra="") + f"select id, a, _version from {m}_src")
    narrow = "toInt16(toInt16(id % 13) - 6)"
    p.model(f"{m}_signed", "{{ config(materialized='vcmt_upsert', unique_key='id', "
            f"sharding_key='{narrow}') }}}}\nselect id, a, _version from {m}_src")  # fmt: skip
    p.dbt("run", "--select", m, f"{m}_signed")
    assert p.query(f"select shards from {loads}") == [("1,1",)]
    try:
        _restart_with_weights(cluster, [4, 3])
        p.command(f"insert into {m}_src select number, number * 5, 2 from numbers(100)")
        before = p.query(read)
        run = p.dbt("run", "--select", m, expect_pass=False)
        log = re.sub(r"\s+", " ", run.log)
        refused = f"the cluster `{cluster.name}` now places keys on shards weighted `4,3` (in shard order), but {m}'s"
        assert f"vcmt_upsert {m}: {refused}" in log and "placed by `1,1` (its last load, at 20" in log, log[-4000:]
        assert f"Nothing was loaded. Run `dbt run --select {m} --full-refresh`" in log, log[-4000:]
        with pytest.raises(LoadError) as external:
            p.load_rows(m, [{"id": 1, "a": 123, "_version": 9}])
        message = re.sub(r"\s+", " ", str(external.value))
        assert f"vcmt.load_stage {m}: {refused}" in message and f"dbt run --select {m} --full-refresh" in message
        assert p.query(read) == before == [(100, 4950, 1)]
        assert p.scalar(f"select count() from {loads}") == 1  # neither recorded a load

        run = p.dbt("run", "--select", m, f"{m}_signed", "--full-refresh")
        assert p.query(read) == [(100, 5 * 4950, 2)], run.log[-3000:]
        assert p.query(f"select shards from {loads}") == [("4,3",)]  # the rebuild's record: its load's placement
        # Each node holds exactly the keys the new weights send it: slots 0 to 3 of 7 are the first shard's.
        for shard, client in enumerate(_shard_clients(cluster, p)):
            owned = "cityHash64(id) % 7 < 4" if shard == 0 else "cityHash64(id) % 7 >= 4"
            rows = client.query(f"select countIf(not ({owned})), count() from {m}_local").result_rows
            negative = client.command(f"select countIf({narrow} < 0) from {m}_signed_local")
            client.close()
            assert rows[0][0] == 0 and rows[0][1] > 0, (shard, rows)
            assert negative > 0, shard  # each shard holds keys of negative sharding values
        p.command(f"insert into {m}_src select number, number * 9, 3 from numbers(100)")
        run = p.dbt("run", "--select", m, f"{m}_signed")
        assert p.query(read) == [(100, 9 * 4950, 3)], run.log[-3000:]
        assert p.query(read.replace(f" {m} ", f" {m}_signed ")) == [(100, 9 * 4950, 3)], run.log[-3000:]
        assert p.scalar(f"select sum(sign) from {m}") == 100
        assert p.query(f"select shards from {loads} order by loaded_at desc limit 1") == [("4,3",)]
    finally:
        _restart_with_weights(cluster, [1, 1])
        p.dbt("run", "--select", m, f"{m}_signed", "--full-refresh")  # placed as the module's other models again


def test_shards_listed_in_another_order_are_refused_until_a_full_refresh(on_cluster, cluster):
    """The cluster's two shards listed the other way round in `remote_servers`, weights unchanged: the placement the
    last load recorded (`1,1`) still matches, yet every stored key's next events would go to the node that does not
    hold it. A key stored on each shard is looked up where the cluster now routes it, so the run and an external load
    are refused before any write, naming both shards; a `--full-refresh` rebuilds on the new order and the model goes
    on exact. The key is composite, with quotes and a backslash in its text part (the lookup's literals)."""
    p = on_cluster
    m = "reordered"
    read = f"select count(), sum(a), max(_version) from {m} final where sign = 1"
    p.command(
        f"create or replace table {m}_src (id Int64, name String, a Int64, _version UInt64) "
        "engine = MergeTree order by tuple()"
    )
    name = "concat('it''s \\\\ ', toString(number))"
    p.command(f"insert into {m}_src select number, {name}, number, 1 from numbers(100)")
    p.model(m, "{{ config(materialized='vcmt_upsert', unique_key=['id', 'name'], sharding_key='cityHash64(id, name)') "
               f"}}}}\nselect id, name, a, _version from {m}_src")  # fmt: skip
    p.dbt("run", "--select", m)
    assert p.query(read) == [(100, 4950, 1)]
    try:
        _restart_with(cluster, lambda shards: shards[::-1])
        p.command(f"insert into {m}_src select number, {name}, number * 5, 2 from numbers(100)")
        run = p.dbt("run", "--select", m, expect_pass=False)
        log = re.sub(r"\s+", " ", run.log)
        refused = f"the cluster `{cluster.name}` no longer routes the rows stored on shard 1 ("
        assert f"vcmt_upsert {m}: {refused}" in log and "), shard 2 (" in log, log[-4000:]
        assert "the weights `1,1` did not change" in log and f"dbt run --select {m} --full-refresh" in log, log[-4000:]
        with pytest.raises(LoadError) as external:
            p.load_rows(m, [{"id": 1, "name": "it's \\ 1", "a": 123, "_version": 9}])
        assert f"vcmt.load_stage {m}: {refused}" in re.sub(r"\s+", " ", str(external.value))
        assert p.query(read) == [(100, 4950, 1)]  # nothing loaded

        run = p.dbt("run", "--select", m, "--full-refresh")
        assert p.query(read) == [(100, 5 * 4950, 2)], run.log[-3000:]
        # Node 1 is now shard 2: it holds exactly the keys of slot 1.
        for node, client in enumerate(_shard_clients(cluster, p)):
            owned = "cityHash64(id, name) % 2 = " + ("1" if node == 0 else "0")
            rows = client.query(f"select countIf(not ({owned})), count() from {m}_local").result_rows
            client.close()
            assert rows[0][0] == 0 and rows[0][1] > 0, (node, rows)
        p.command(f"insert into {m}_src select number, {name}, number * 9, 3 from numbers(100)")
        run = p.dbt("run", "--select", m)
        assert p.query(read) == [(100, 9 * 4950, 3)], run.log[-3000:]
        assert p.scalar(f"select sum(sign) from {m}") == 100
    finally:
        _restart_with(cluster, lambda shards: shards[::-1])
        p.dbt("run", "--select", m, "--full-refresh")


def test_a_model_built_without_the_cluster_is_refused_on_it_until_rebuilt(
    on_cluster, cluster, tmp_path, chdb_path, lab_dir
):
    """A model built by a profile without `cluster` lives on the node dbt reached. Run by a profile naming the
    cluster, it was loaded on that node alone while the others had none of it (vcmt's own lock now reads only the
    first shard, so nothing failed). It is refused instead, by `dbt run`, `--full-refresh` and `vcmt.load_stage`,
    naming the nodes that hold it, until its objects are dropped and it is rebuilt on every node."""
    p = on_cluster
    m = "single_node"
    plain = DbtProject(root=tmp_path / "plain", package_root=PACKAGE_ROOT, chdb_path=chdb_path, schema=p.schema,
                       lab_dir=lab_dir, engine=Engine("http", node=cluster.nodes[0]))  # fmt: skip
    model = f"{{{{ config(materialized='vcmt_upsert', unique_key='id') }}}}\nselect id, a, _version from {m}_src"
    try:
        plain.command(
            f"create or replace table {m}_src (id Int64, a Int64, _version UInt64) engine = MergeTree order by tuple()"
        )
        plain.command(f"insert into {m}_src select number, number, 1 from numbers(100)")
        plain.model(m, model)
        plain.dbt("run", "--select", m)
    finally:
        plain.close()
    p.model(m, model)
    p.command(f"insert into {m}_src select number, number * 3, 2 from numbers(100)")
    read = f"select count(), sum(a), max(_version) from {m} final where sign = 1"
    held = f"has 2 shards, but {m} is on 1 of them (shard 1 ("
    for args in [(), ("--full-refresh",)]:
        run = p.dbt("run", "--select", m, *args, expect_pass=False)
        log = re.sub(r"\s+", " ", run.log)
        assert f"vcmt_upsert {m}: the profile's cluster `{cluster.name}` {held}" in log, log[-4000:]
        assert "built without `cluster` in the profile" in log and "Nothing was changed" in log, log[-4000:]
    with pytest.raises(LoadError) as external:
        p.load_rows(m, [{"id": 1, "a": 5, "_version": 9}])
    assert f"vcmt.load_stage {m}: the profile's cluster" in re.sub(r"\s+", " ", str(external.value))
    assert p.query(read) == [(100, 4950, 1)]  # nothing loaded
    # The documented way out: the model's objects dropped, then rebuilt from its SELECT on every node.
    for (name,) in p.query(
        f"select name from system.tables where database = currentDatabase() and startsWith(name, '{m}') "
        f"and name != '{m}_src' order by engine like '%View' desc, name"
    ):
        p.command(f"drop table if exists {name} on cluster {cluster.name} sync")
    run = p.dbt("run", "--select", m)
    assert p.query(read) == [(100, 3 * 4950, 2)], run.log[-3000:]
    assert [rows[0][0] for rows in _shard_rows(cluster, p, f"exists table {m}")] == [1, 1]


GROWN = "vcmt_grown"


def test_a_shard_added_to_the_cluster_is_refused_and_the_model_rebuilt_after_a_drop(tmp_path, chdb_path, lab_dir):
    """Three nodes, the cluster first made of two: a sharded model is built there; then every node restarts with the
    third node as a third shard (an operator's change of `remote_servers`). The next run and a `--full-refresh`
    are refused before any write, naming the nodes that hold the model (the new node holds none of its tables,
    nor its lock's). As
    docs/servers.md says, the model's objects are then dropped on every node and the model run again: it is
    rebuilt from its SELECT on all three shards, exact, and its next load records the new placement."""
    ports = [(free_port(), free_port()) for _ in range(3)]  # the cluster named GROWN: two shards, then three
    layout = [Shard(((HOST, tcp),)) for tcp, _ in ports]
    nodes = [
        ServedNode(tmp_path / f"node_{n}", tcp, http, {GROWN: layout[:2]}, {"shard": str(n + 1), "replica": "r1"})
        for n, (tcp, http) in enumerate(ports)
    ]
    fan_outs: list[DdlFanOut] = []
    schema = f"t_grown_{uuid.uuid4().hex[:6]}"

    def project(members):
        fan_outs.append(DdlFanOut(members, GROWN).start())
        entry = Cluster(GROWN, members, fan_outs[-1])
        return DbtProject(root=tmp_path / "project", package_root=PACKAGE_ROOT, chdb_path=chdb_path, schema=schema,
                          lab_dir=lab_dir, engine=Engine("http", node=entry, cluster=GROWN))  # fmt: skip

    read = "select count(), sum(a), max(_version) from grown final where sign = 1"
    try:
        for node in nodes:
            node.start()
        p = project(nodes[:2])
        p.command("create table grown_src (id Int64, a Int64, _version UInt64) engine = MergeTree order by tuple()")
        p.command("insert into grown_src select number, number, 1 from numbers(100)")
        p.model("grown", SHARDED.format(extra="") + "select id, a, _version from grown_src")
        p.dbt("run", "--select", "grown")
        p.close()
        for node in nodes:
            node.stop()
        for node in nodes:
            node.clusters = {GROWN: layout}
            node.start()
        p = project(nodes)
        p.command("insert into grown_src select number, number * 5, 2 from numbers(100)")
        run = p.dbt("run", "--select", "grown", expect_pass=False)
        log = re.sub(r"\s+", " ", run.log)
        held = "has 3 shards, but grown_local is on 2 of them (shard 1 ("
        assert f"vcmt_upsert grown: the profile's cluster `{GROWN}` {held}" in log, log[-4000:]
        run = p.dbt("run", "--select", "grown", "--full-refresh", expect_pass=False)  # refused too: no split swap
        assert held in re.sub(r"\s+", " ", run.log), run.log[-4000:]
        first = nodes[0].client(schema)
        assert first.query("select count(), sum(a) from grown_local final where sign = 1").result_rows[0][0] > 0
        objects = first.query(
            "select name from system.tables where database = currentDatabase() and startsWith(name, 'grown') "
            "and name != 'grown_src' order by engine like '%View' desc, engine = 'Distributed' desc, name"
        ).result_rows
        first.close()
        for (name,) in objects:
            p.command(f"drop table if exists {name} on cluster {GROWN} sync")
        run = p.dbt("run", "--select", "grown")
        assert p.query(read) == [(100, 5 * 4950, 2)], run.log[-3000:]
        for n, node in enumerate(nodes):
            client = node.client(schema)
            owned = client.query(f"select countIf(cityHash64(id) % 3 != {n}), count() from grown_local").result_rows
            client.close()
            assert owned[0][0] == 0 and owned[0][1] > 0, (n, owned)
        p.command("insert into grown_src select number, number * 7, 3 from numbers(100)")
        run = p.dbt("run", "--select", "grown")
        assert p.query(read) == [(100, 7 * 4950, 3)], run.log[-3000:]
        loads = f"clusterAllReplicas('{GROWN}', currentDatabase(), grown__loads)"
        assert p.query(f"select shards from {loads} order by loaded_at") == [("1,1,1",), ("1,1,1",)]
        p.close()
    finally:
        for fan_out in fan_outs:
            fan_out.stop()
        for node in nodes:
            node.stop()


NEW_FILES = (
    SHARDED.format(extra="")
    + "select id, x, toUInt64(_batch_id) as _version, toInt8(1) as sign from {{ vcmt.lake_source('stg_orders', "
    "new_files=true) }}"
)


def test_new_files_on_a_sharded_model_reads_each_file_once_through_either_node(on_cluster, cluster, tmp_path):
    """Issue 40 on a cluster: a sharded mart reading `new_files=true` keeps its record of claimed files on every
    node and reads "loaded" through every replica. A late batch and a file added to a loaded batch, landed after
    a run through the first node, are read by the next run through the second node, once; a run through the first
    node then reads nothing. Both nodes read the same lake: the lab's nodes share one user_files_path, as nodes
    share an object store."""
    p = on_cluster
    admin = cluster.client()
    admin.command(f"create database if not exists `{p.schema}` on cluster {cluster.name}")  # when run alone
    admin.close()
    clients = _shard_clients(cluster, p)
    user_files = [Path(c.command("select value from system.server_settings where name = 'user_files_path'"))
                  for c in clients]  # fmt: skip
    assert user_files[0] == user_files[1], user_files
    lake = user_files[0] / f"vcmt_lake_{uuid.uuid4().hex[:8]}"
    # The folders this test creates (user_files_path itself may not exist yet), removed at the end.
    created = next(q for q in reversed([lake, *lake.parents]) if not q.exists())

    def land(batch: int, ids: range) -> None:
        """A staged file of `ids` in batch `batch`, written by the first node."""
        path = lake / f"staged/stg_orders/_batch_id={batch}/part-{ids.start}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        clients[0].command(
            f"insert into function file('{path}', 'Parquet') "
            f"select toInt32(number) as id, toInt64(10 * number) as x from numbers({ids.start}, {len(ids)})"
        )

    saved = dict(p.vars)
    entry = cluster.entry(1)
    try:
        p.vars = {**p.vars, "vcmt_lake_root": str(lake)}
        via_second = target_on_port(p, "nf_via_second_node", entry.port)
        p.model("nf", NEW_FILES)
        land(1, range(0, 4))
        first = p.dbt("run", "--select", "nf")
        assert "1 file to read (every file: a first run or a full refresh)" in first.log, first.log[-3000:]
        land(3, range(4, 6))
        land(2, range(6, 8))  # a late batch
        land(1, range(8, 9))  # a file added to a loaded batch
        second = p.dbt("run", "--select", "nf", target=via_second)
        assert "3 files to read, not loaded before" in second.log, second.log[-3000:]
        assert p.query("select id, x from nf final where sign = 1 order by id") == [(i, 10 * i) for i in range(9)]
        third = p.dbt("run", "--select", "nf")
        assert "0 files to read, not loaded before" in third.log, third.log[-3000:]
        every = f"clusterAllReplicas('{cluster.name}', currentDatabase(), 'nf__lake_files')"
        assert p.query(f"select count(), uniqExact(path) from {every} where path != ''") == [(4, 4)]
        # Each node wrote the claims of the runs that went through it, and both nodes hold the record.
        assert [rows[0][0] for rows in _shard_rows(cluster, p, "select count() from nf__lake_files where path != ''")
                ] == [1, 3]  # fmt: skip
        assert p.query(
            "select count() from (select id from nf group by id, _version having sum(sign) not in (0, 1))"
        ) == [(0,)]
        assert all(rows[0][0] > 0 for rows in _shard_rows(cluster, p, "select count() from nf_local")), (
            "a shard is empty"
        )
        # A second mart whose first run loses the second node at the record's CREATE ON CLUSTER: the record is made
        # on the first node only (the lab's DDL stand-in, unlike a DDL queue, never replays it). The next run makes
        # it on every node, so the run after it can read "loaded" through every replica.
        p.model("nf_late", NEW_FILES)
        _lose_a_node_during(p, cluster, "nf_late", "create nf_late__lake_files", 1)
        assert [rows[0][0] for rows in _shard_rows(cluster, p, "exists table nf_late__lake_files")] == [1, 0]
        first = p.dbt("run", "--select", "nf_late")
        assert "4 files to read (every file: a first run or a full refresh)" in first.log, first.log[-3000:]
        assert [rows[0][0] for rows in _shard_rows(cluster, p, "exists table nf_late__lake_files")] == [1, 1]
        again = p.dbt("run", "--select", "nf_late")
        assert "0 files to read, not loaded before" in again.log, again.log[-3000:]
        assert p.query("select id, x from nf_late final where sign = 1 order by id") == [(i, 10 * i) for i in range(9)]
    finally:
        entry.stop()
        p.vars = saved
        for client in clients:
            client.close()
        shutil.rmtree(created, ignore_errors=True)
