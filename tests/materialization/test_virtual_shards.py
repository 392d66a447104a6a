"""Virtual shards (docs/design.md#virtual-shards): a load as K concurrent stage
INSERTs, each holding the keys of one hash class. Observed on the engine: an
extra materialized view on the stage records, per insert block, the query that
wrote it, its keys, and how many stage INSERTs were running at that moment."""

from __future__ import annotations

COLUMNS = "id UInt64, tenant UInt8, a Int64, b String, _version UInt64, sign Int8"
# The fold path (one INSERT per shard) and the rounds path (`sum`: one INSERT per shard and round).
PATHS = {"fold": "", "rounds": "merge={'a': 'sum'}, "}
# Small insert blocks, so each shard's INSERT spans several blocks and their times overlap visibly.
SMALL_BLOCKS = "insert_settings={'max_block_size': 2000, 'min_insert_block_size_rows': 2000}"


def _batch(project, n: int, seed: int) -> None:
    project.command("truncate table vs_src")
    project.command(
        f"insert into vs_src select cityHash64(number, {seed}) % 15000 as id, id % 3, number, toString(number % 7), "
        f"{seed} * 1000000 + number, if(number % 11 = 0, -1, 1) from numbers({n})")


def _state(project, name: str) -> list[tuple]:
    return project.query(f"select tenant, id, a, b, _version from {name} final where sign = 1 order by tenant, id")


def test_shards_share_no_key_run_at_once_and_equal_one_stream(module_project):
    project = module_project
    project.command(f"create table vs_src ({COLUMNS}) engine = MergeTree order by tuple()")
    for path, merge in PATHS.items():
        for k in (1, 4):
            project.model(f"vs_{path}_{k}", "{{ config(materialized='vcmt_upsert', unique_key=['tenant', 'id'], "
                          f"{merge}virtual_shards={k}, {SMALL_BLOCKS}) }}}}\nselect * from vs_src")
    models = [f"vs_{p}_{k}" for p in PATHS for k in (1, 4)]
    _batch(project, 12000, 1)
    project.dbt("run", "--select", *models)
    for path in PATHS:
        name = f"vs_{path}_4"
        project.command(f"create table {name}_seen (q String, tenant UInt8, id UInt64, t DateTime64(6), running UInt64) "
                        "engine = MergeTree order by tuple()")
        project.command(
            f"create materialized view {name}_seen_mv to {name}_seen as select queryID() as q, tenant, id, now64(6) as t, "
            "(select count() from system.processes where query_kind = 'Insert' and query like '%__stage%') as running "
            f"from {name}__stage")
    _batch(project, 12000, 2)
    run = project.dbt("run", "--select", *models)

    for path in PATHS:
        one, four = f"vs_{path}_1", f"vs_{path}_4"
        assert f"{four}: " in run.log and "on 4 virtual shards" in run.log
        # The same result as one stream, over more than 10,000 live keys.
        assert _state(project, four) == _state(project, one)
        assert len(_state(project, one)) > 4000
        # Each step (the fold's INSERT, or one round) was 4 INSERT queries, running at the same time...
        queries = [q for (q,) in project.query(f"select q from {four}_seen group by q order by min(t)")]
        assert len(queries) == 4 * (1 if path == "fold" else 2), queries
        assert project.scalar(f"select max(running) from {four}_seen") >= 2
        # ... and no key went into the stage through two INSERTs of one step (steps run one after another).
        for step in (queries[i:i + 4] for i in range(0, len(queries), 4)):
            shared = project.query(f"select tenant, id, groupArray(q) from {four}_seen where q in {tuple(step)} "
                                   "group by tenant, id having count() > 1")
            assert shared == [], shared[:3]
        assert project.scalar(f"select count() from {four}_seen") > 4000


def test_default_is_one_below_the_threshold_and_one_per_core_above(module_project):
    """Unset `virtual_shards`: 1 below the threshold, the engine's max_threads (its cores) at and above it."""
    project = module_project
    project.write("macros/vs_default.sql", """
{% macro vs_default() %}
  {%- set at = vcmt._virtual_shards_min_events() -%}
  {%- set cfg = {'virtual_shards': none} -%}
  {{ log('vs_default ' ~ [vcmt._virtual_shards_for(cfg, at - 1), vcmt._virtual_shards_for(cfg, at),
                          vcmt._virtual_shards_for({'virtual_shards': 3}, 1)] | join(','), info=true) }}
{% endmacro %}
""")
    run = project.dbt("run-operation", "vs_default")
    cores = project.scalar("select toUInt64(getSetting('max_threads'))")
    assert f"vs_default 1,{cores},3" in run.log
