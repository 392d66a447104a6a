"""Sharded clusters (`cluster` in the profile, `sharding_key` on the model;
docs/design.md#sharded-clusters), verified as far as this machine allows: no
ClickHouse server runs here, and the embedded engine has no network server,
so a Distributed table cannot be exercised end to end.

- The DDL and loader SQL for a cluster come from the package's own macros
  (the list the materialization executes), rendered through `dbt run-operation`
  against a `type: clickhouse` target, and every statement is parsed by the
  engine's parser.
- Two shards are simulated as two databases on one engine, each with the
  objects the real materialization creates, every event routed by the
  Distributed engine's rule (shard = sharding_key % total weight, weights 1).
"""

from __future__ import annotations

import random
import re

import pytest
import yaml

from tests.materialization.scenario import jinja_literal
from vcmt_lab import invariants
from vcmt_lab.fuzz.streams import MODEL_SPECS, generate_stream, python_policy, to_events
from vcmt_lab.oracle import Oracle

CLUSTER = "two_shards_two_replicas"
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
      {%- do statements.append(('fold_batch', vcmt._fold_batch_sql(cfg_fold, objs, data, vcmt._fold_aggregates(cfg_fold, columns, data)))) -%}
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
        "type": "clickhouse", "host": "127.0.0.1", "port": 1, "schema": "analytics", "threads": 1, "cluster": CLUSTER}
    (p.root / "profiles.yml").write_text(yaml.safe_dump(profiles))
    p.write("macros/render_sharded.sql", RENDER)
    return p


def _render(project) -> list[tuple[str, str]]:
    run = project.dbt("run-operation", "render_sharded_sql", "--vars", f"{{sharding_key: '{SHARDING_KEY}'}}",
                      target="cluster")
    return [(k, s.strip()) for k, s in re.findall(r"<<vcmt (\w+)>>(.*?)<</vcmt>>", run.log, flags=re.S)]


def _formatted(project, sql: str) -> str:
    """The engine's parser: formatQuery raises on anything it cannot parse."""
    return project.client.query("select formatQuerySingleLine({q:String})", parameters={"q": sql}).result_rows[0][0]


def test_cluster_ddl_and_loader_sql_parse_and_shard_by_key(project):
    statements = _render(project)
    formatted = [(kind, _formatted(project, sql)) for kind, sql in statements]
    ddl = [s for kind, s in formatted if kind == "ddl"]
    # Per config: target, 4 helpers, guard stage, 3 views (4 with unconditional deletes), stage, exchange,
    # drop guard, 2 Distributed tables.
    assert len(ddl) == 14 + 15, [d[:60] for d in ddl]
    assert all(f"ON CLUSTER {CLUSTER}" in s for s in ddl), [s for s in ddl if "ON CLUSTER" not in s]

    by_name = {re.match(r"CREATE (?:TABLE|MATERIALIZED VIEW) (\S+)", s).group(1): s for s in ddl if s.startswith("CREATE")}
    # Per shard: a Replicated VCMT target and a Null stage, under dbt-clickhouse's local suffix.
    assert "ENGINE = ReplicatedVersionedCollapsingMergeTree(sign, _version)" in by_name["analytics.orders_local"]
    # The stage is created as a guard that refuses inserts, then exchanged with the real one (a Null table).
    assert "CHECK 0) ENGINE = `Null`" in by_name["analytics.orders__stage_local"]
    assert "ENGINE = `Null`" in by_name["analytics.orders_local__vcmt_new__stage"]
    assert "EXCHANGE TABLES analytics.orders_local__vcmt_new__stage AND analytics.orders__stage_local " \
           f"ON CLUSTER {CLUSTER}" in ddl
    # The model's relations: Distributed tables over them, sharded by the same key expression.
    key = _formatted(project, f"select {SHARDING_KEY}").removeprefix("SELECT ")
    assert by_name["analytics.orders"].endswith(
        f"AS analytics.orders_local ENGINE = Distributed('{CLUSTER}', 'analytics', 'orders_local', {key})")
    assert by_name["analytics.orders__stage"].endswith(
        f"AS analytics.orders__stage_local ENGINE = Distributed('{CLUSTER}', 'analytics', 'orders__stage_local', {key})")
    # The Distributed tables come last, the stage's very last: writers reach shards whose transform is attached.
    assert [s.split(" ON CLUSTER")[0] for s in ddl[12:14]] == ["CREATE TABLE analytics.orders",
                                                                "CREATE TABLE analytics.orders__stage"]
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
    assert "FROM analytics.orders FINAL WHERE" in loader["truncate"] and f"{all_replicas}truncates')" in loader["truncate"]
    # The batch of a round load stays on the dbt node.
    assert loader["batch"].startswith("CREATE TABLE analytics.orders__batch ENGINE = MergeTree")
    assert "GLOBAL IN" in loader["fold_batch"] and f"{all_replicas}tombstones')" in loader["fold_batch"]
    assert f"{all_replicas}applied')" in loader["report"] and f"{all_replicas}loads')" in loader["report"]
    assert f"FROM {all_replicas}loads')" in loader["watermark"]


REFUSED = {
    "sk_other": ("cityHash64(id, qty)", ["`sharding_key` (cityHash64(id, qty)) must be a function of `unique_key` "
                                         "['id'] only, but it reads ['qty']", "sharding_key='cityHash64(id)'"]),
    "sk_rand": ("id + rand()", ["but rand can return another value for the same `unique_key` ['id']"]),
    # A SQL function is never marked deterministic by the engine (review of issue 14: this one wraps rand()).
    "sk_udf": ("vcmt_sk_jitter(id)", ["but vcmt_sk_jitter can return another value for the same `unique_key`"]),
    "sk_float": ("id / 2", ["must return an integer", "it returns Float64"]),
    "sk_cluster": ("cityHash64(id)", ["`sharding_key` needs dbt-clickhouse's `cluster` in the profile",
                                      "Set `cluster: <name>`"]),
}


def test_sharding_key_must_be_a_function_of_the_key_on_a_cluster(project):
    project.command("create function if not exists vcmt_sk_jitter as (x) -> x + rand()")
    for name, (key, _) in REFUSED.items():
        project.model(name, f"{{{{ config(materialized='vcmt_upsert', unique_key='id', sharding_key={key!r}) }}}}\n"
                            "select toInt64(1) as id, toInt64(2) as qty, toUInt64(1) as _version")
    run = project.dbt("run", "--select", *REFUSED, expect_pass=False)
    log = re.sub(r"\s+", " ", run.log)
    for name, (_, messages) in REFUSED.items():
        for message in messages:
            assert message in log, (name, message)
        assert not project.query(f"select name from system.tables where database = currentDatabase() "
                                 f"and startsWith(name, '{name}')"), name
    for name in REFUSED:
        project.remove(f"models/{name}.sql")


SHARDS = 2


def _routed(key_sql: str, shard: int) -> str:
    """The Distributed engine's rule with equal weights: shard number = key % total weight."""
    return f"({key_sql}) % {SHARDS} = {shard}"


SPECS = ("fz_replace", "fz_folded")  # the fold loader, and the round loader with hot-key folding


def test_simulated_shards_equal_the_oracle_and_never_share_a_key(project):
    specs = [next(s for s in MODEL_SPECS if s.name == name) for name in SPECS]
    streams = [generate_stream(seed=11 + i, spec=spec, events=300) for i, spec in enumerate(specs)]
    oracles = [Oracle(spec.columns, {c: python_policy(p) for c, p in spec.merge.items()}, spec.delete_mode)
               for spec in specs]
    for spec in specs:
        columns = spec.all_columns
        project.command(f"create table `{spec.name}_src` ({', '.join(f'`{c}` {t}' for c, t in columns.items())}) "
                        "engine = MergeTree order by tuple()")
        for shard in range(SHARDS):
            config = {"unique_key": list(spec.keys), "merge": spec.merge, "delete_mode": spec.delete_mode,
                      "schema": f"shard_{shard}", "alias": spec.name}
            args = ", ".join(f"{k}={jinja_literal(v)}" for k, v in config.items())
            project.model(f"{spec.name}_s{shard}", f"{{{{ config(materialized='vcmt_upsert', {args}) }}}}\n"
                                                  f"select * from `{spec.name}_src` where {_routed(_key_sql(spec), shard)}")
    # Three loads per stream: the generator's batches, regrouped in order (the first run, which creates
    # the four shard models, costs most).
    loads = 3
    rng = random.Random(5)
    for load in range(loads):
        for spec, stream, oracle in zip(specs, streams, oracles, strict=True):
            step = -(-len(stream.batches) // loads)
            rows = sum(stream.batches[load * step:(load + 1) * step], [])
            rng.shuffle(rows)
            project.command(f"truncate table `{spec.name}_src`")
            if rows:
                project.client.insert(f"{spec.name}_src", [[r[c] for c in spec.all_columns] for r in rows],
                                      column_names=list(spec.all_columns), database=project.schema)
            oracle.apply_batch(to_events(rows, spec))
        project.dbt("run", "--select", *(f"{spec.name}_s{shard}" for spec in specs for shard in range(SHARDS)))
    for spec, oracle in zip(specs, oracles, strict=True):
        _check_shards(project, spec, oracle)


def _key_sql(spec) -> str:
    return "cityHash64(" + ", ".join(f"`{k}`" for k in spec.keys) + ")"


def _check_shards(project, spec, oracle) -> None:
    shards = [f"`{project.schema}_shard_{s}`.`{spec.name}" for s in range(SHARDS)]
    keys = ", ".join(f"`{k}`" for k in spec.keys)
    data = list(spec.columns)
    cols = ", ".join(f"`{c}`" for c in [*spec.keys, *data, "_version"])
    live = []
    for shard, table in enumerate(shards):
        rows = project.query(f"select {cols} from {table}` final where sign = 1")
        assert rows, f"{spec.name}: shard {shard} holds no live row: the stream does not exercise it"
        live += rows
        # Every row and tombstone of a shard belongs to it by the routing rule.
        for t in (f"{table}`", f"{table}__tombstones`"):
            assert project.scalar(f"select countIf(not {_routed(_key_sql(spec), shard)}) from {t}") == 0, t
        for finding in invariants.check(project.query, invariants.Target(f"{table}`", spec.keys), data):
            assert finding.ok, (spec.name, shard, finding)
    # No key on two shards, in rows and in tombstones.
    for suffix in ("", "__tombstones"):
        both = project.query(f"select {keys} from {shards[0]}{suffix}` intersect distinct "
                             f"select {keys} from {shards[1]}{suffix}`")
        assert not both, (spec.name, suffix, both)
    # The union of the shards is the oracle's state.
    expected = sorted(
        (*key, *(row[c] for c in data), version) for key, (version, row) in oracle.live_rows().items())
    assert sorted(live) == expected, spec.name
