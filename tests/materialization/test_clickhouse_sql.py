"""The same macros render valid SQL for `type: clickhouse` (a server or a cluster), not only for chdb."""

from __future__ import annotations

import re

import yaml

RENDER = """
{% macro render_vcmt_sql() %}
  {%- set cfg = vcmt._read_config({
      'unique_key': ['tenant_id', 'order id'], 'merge': {'amount': 'sum', 'note': '{old} || {new}'},
      'delete_mode': 'unconditional', 'partition_by': 'toYYYYMM(created_at)',
      'projections': [{'name': 'by_status', 'query': 'select status, sum(sign), sum(amount * sign) group by status'}],
      'settings': {'index_granularity': 4096}, 'ttl': "toDateTime(created_at) + interval 5 year to volume 'cold'"}) -%}
  {%- set target = api.Relation.create(schema='analytics', identifier='orders', type='table',
                                       can_on_cluster=adapter.get_clickhouse_cluster_name() is not none) -%}
  {%- set objs = vcmt.objects(target) -%}
  {%- set columns = [{'name': 'tenant_id', 'data_type': 'Int32'}, {'name': 'order id', 'data_type': 'Int64'},
                     {'name': 'status', 'data_type': 'String'}, {'name': 'amount', 'data_type': 'Decimal(18, 2)'},
                     {'name': 'note', 'data_type': 'Nullable(String)'}, {'name': 'created_at', 'data_type': 'DateTime'},
                     {'name': '_version', 'data_type': 'UInt64'}, {'name': 'sign', 'data_type': 'Int8'}] -%}
  {#- Every object of the model: the statements the materialization runs to create it (no exchange here). -#}
  {%- for name, s in vcmt._create_statements(cfg, objs, columns, false) -%}{{ print('<<vcmt>>' ~ s ~ '<</vcmt>>') }}{%- endfor -%}
{% endmacro %}
"""


def _render(project, cluster: str | None) -> list[str]:
    profiles = yaml.safe_load((project.root / "profiles.yml").read_text())
    # A server that is not there: rendering must not need a connection.
    output = {"type": "clickhouse", "host": "127.0.0.1", "port": 1, "schema": "analytics", "threads": 1}
    if cluster:
        output["cluster"] = cluster
    profiles["vcmt_test"]["outputs"]["server"] = output
    (project.root / "profiles.yml").write_text(yaml.safe_dump(profiles))
    project.write("macros/render.sql", RENDER)
    run = project.dbt("run-operation", "render_vcmt_sql", target="server")
    return [s.strip() for s in re.findall(r"<<vcmt>>(.*?)<</vcmt>>", run.log, flags=re.S)]


def test_macros_render_parseable_sql_for_a_clickhouse_server(project):
    """Every DDL statement rendered for type: clickhouse parses in ClickHouse's own parser."""
    statements = _render(project, cluster=None)
    # target, stage, 4 helper tables, 4 views (unconditional deletes add the cancels writer)
    assert len(statements) == 10
    for sql in statements:
        formatted = project.client.query("select formatQuery({q:String})", parameters={"q": sql}).result_rows[0][0]
        assert formatted.split()[0] == "CREATE", formatted
    assert "VersionedCollapsingMergeTree(`sign`, `_version`)" in statements[0].replace('"', "`")


def test_cluster_profile_renders_on_cluster_and_replicated_engine(project):
    """With a cluster in the profile, DDL says ON CLUSTER and the target is replicated."""
    statements = _render(project, cluster="prod")
    assert all("ON CLUSTER" in s.upper() for s in statements)
    assert "ReplicatedVersionedCollapsingMergeTree" in statements[0]
