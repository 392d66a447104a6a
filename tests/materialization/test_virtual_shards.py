"""Virtual shards (docs/design.md#virtual-shards): each step of a load as one INSERT
through the load's fan-out, whose K views each pass one shard's keys on to the stage,
at the same time. Observed on the engine: an extra materialized view on the stage
records, per insert block, the query that wrote it, its keys and when it started,
then sleeps, so two blocks that started less than that sleep apart ran at once."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.engines("chdb", "http")

COLUMNS = "id UInt64, tenant UInt8, a Int64, b String, _version UInt64, sign Int8"
# The fold path (one INSERT) and the rounds path (`sum`: one INSERT per round).
PATHS = {"fold": "", "rounds": "merge={'a': 'sum'}, "}
# Seconds each stage block sleeps in the observing view: long against what a view's other work takes on a busy
# machine (run at once, blocks start well under half of it apart; one after another, a whole one).
SLEEP = 0.4
# Small insert blocks, so each shard's view passes on several blocks.
SMALL_BLOCKS = "insert_settings={'max_block_size': 2000, 'min_insert_block_size_rows': 2000}"


def _batch(project, n: int, seed: int) -> None:
    project.command("truncate table vs_src")
    project.command(
        f"insert into vs_src select cityHash64(number, {seed}) % 15000 as id, id % 3, number, toString(number % 7), "
        f"{seed} * 1000000 + number, if(number % 11 = 0, -1, 1) from numbers({n})"
    )


def _state(project, name: str) -> list[tuple]:
    return project.query(f"select tenant, id, a, b, _version from {name} final where sign = 1 order by tenant, id")


@pytest.mark.engines("chdb", "http", "native")
def test_shards_share_no_key_run_at_once_and_equal_one_stream(module_project):
    project = module_project
    project.command(f"create table vs_src ({COLUMNS}) engine = MergeTree order by tuple()")
    for path, merge in PATHS.items():
        for k in (1, 4):
            project.model(
                f"vs_{path}_{k}",
                "{{ config(materialized='vcmt_upsert', unique_key=['tenant', 'id'], "
                f"{merge}virtual_shards={k}, {SMALL_BLOCKS}) }}}}\nselect * from vs_src",
            )
    models = [f"vs_{p}_{k}" for p in PATHS for k in (1, 4)]
    _batch(project, 12000, 1)
    project.dbt("run", "--select", *models)
    for path in PATHS:
        name = f"vs_{path}_4"
        project.command(
            f"create table {name}_seen (q String, tenant UInt8, id UInt64, t DateTime64(6)) "
            "engine = MergeTree order by tuple()"
        )
        # now64() is taken once per block, before the block's sleep: one thread's blocks start SLEEP apart.
        project.command(
            f"create materialized view {name}_seen_mv to {name}_seen as select queryID() as q, tenant, id, "
            f"now64(6) as t from {name}__stage where sleep({SLEEP}) = 0"
        )
    _batch(project, 12000, 2)
    run = project.dbt("run", "--select", *models)

    for path in PATHS:
        one, four = f"vs_{path}_1", f"vs_{path}_4"
        assert f"{four}: " in run.log and "on 4 virtual shards" in run.log
        # The same result as one stream, over more than 10,000 live keys.
        assert _state(project, four) == _state(project, one)
        assert len(_state(project, one)) > 4000
        # Each step (one round: with shards, a foldable model's events are read once into its batch table
        # and folded there) was one INSERT query, on every engine...
        steps = [q for (q,) in project.query(f"select q from {four}_seen group by q order by min(t)")]
        assert len(steps) in (1, 2), steps
        # The first step's views ran at once: two blocks started less than a sleep apart (one after another,
        # each block would start a whole sleep after the last one's).
        starts = [t for (t,) in project.query(f"select distinct t from {four}_seen where q = '{steps[0]}' order by t")]
        assert len(starts) >= 4, starts
        gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
        assert min(gaps) < SLEEP / 2, gaps
        # No key went into the stage in two blocks of one step (steps run one after another).
        for step in steps:
            shared = project.query(
                f"select tenant, id, count() from {four}_seen where q = '{step}' group by tenant, id having count() > 1"
            )
            assert shared == [], shared[:3]
        assert project.scalar(f"select count() from {four}_seen") > 4000
        # The load's fan-out is gone.
        assert (
            project.query(
                f"select name from system.tables where database = currentDatabase() and name like '{four}\\_\\_fanout%'"
            )
            == []
        )


def test_shards_read_the_select_once_and_keep_the_session_settings(module_project):
    """A SELECT that reads the model itself sees the state before the load, whatever K; a setting a hook
    SET on dbt's connection holds for the load (review of issue 14: shards once re-ran the SELECT after
    other shards had written, and ran on handles without the hook's settings; since each step is one
    statement on dbt's connection, the views inherit its settings by construction)."""
    project = module_project
    project.command("create table vs_this (id UInt64, a Int64, _version UInt64) engine = MergeTree order by tuple()")
    for k in (1, 4):
        project.model(
            f"vs_this_{k}",
            f"{{{{ config(materialized='vcmt_upsert', unique_key='id', virtual_shards={k}, "
            "pre_hook=\"set session_timezone = 'Asia/Tokyo'\") }}\n"
            "select id, a, _version, toDateTime('2024-01-01 00:00:00') as ts from vs_this "
            "{% if vcmt.is_incremental() %} where a > (select max(a) from {{ this }}) {% endif %}",
        )
    for b in range(3):
        project.command(f"insert into vs_this select number, number, 1 from numbers({b * 400}, 400)")
        project.dbt("run", "--select", "vs_this_1", "vs_this_4")
        for k in (1, 4):
            assert project.scalar(f"select count() from vs_this_{k} final where sign = 1") == (b + 1) * 400, (k, b)
    assert (
        project.query("select distinct toUnixTimestamp(ts) from vs_this_4")
        == project.query("select distinct toUnixTimestamp(ts) from vs_this_1")
        == [(1704034800,)]
    )


def test_unset_is_auto_and_strings_are_refused_by_name(module_project):
    """Unset `virtual_shards` is `'auto'` (each load chooses); a string other than `'auto'` is refused saying it is
    a string."""
    project = module_project
    project.write(
        "macros/vs_default.sql",
        """
{% macro vs_default() %}
  {%- set read = [vcmt._read_config({'unique_key': 'id'}), vcmt._read_config({'unique_key': 'id', 'virtual_shards': 3})] -%}
  {{ log('vs_default ' ~ read | map(attribute='virtual_shards') | join(','), info=true) }}
{% endmacro %}
""",
    )
    assert "vs_default auto,3" in project.dbt("run-operation", "vs_default").log
    project.model(
        "vs_string",
        "{{ config(materialized='vcmt_upsert', unique_key='id', virtual_shards='2') }}\n"
        "select toUInt64(1) as id, toUInt64(1) as _version",
    )
    run = project.dbt("run", "--select", "vs_string", expect_pass=False)
    assert "`virtual_shards` must be a number or 'auto', not the string `'2'`" in run.log
    assert "virtual_shards='auto' to let each load choose" in run.log


def test_auto_chooses_per_load_and_equals_one_stream(module_project):
    """`virtual_shards='auto'` (also unset, its default): a folded load that feeds 100,000 events or more to the
    stage runs on 2 virtual shards, a smaller one on 1, a load in rounds on 1, and a first run on 1
    (virtual_shards.sql `_auto_virtual_shards`); each ends equal to a model loading the same events on one
    stream. The choice is recorded per load."""
    project = module_project
    project.command(f"create table vs_auto_src ({COLUMNS}) engine = MergeTree order by tuple()")
    # `'auto'` written out, and unset (the default is `'auto'`); a first run of its own at 100,000 keys.
    for path, merge in PATHS.items():
        for k in ("1", "'auto'", None):
            name = f"vs_auto_{path}_{ {'1': 1, None: 'unset'}.get(k, 'auto') }"
            shards = f"virtual_shards={k}" if k else "lock_timeout=600"
            project.model(
                name,
                f"{{{{ config(materialized='vcmt_upsert', unique_key=['tenant', 'id'], {merge}{shards}) }}}}"
                "\nselect * from vs_auto_src",
            )
    project.model("vs_auto_rebuild", "{{ config(materialized='vcmt_upsert', unique_key=['tenant', 'id']) }}\n"
                  "select * from vs_auto_src")  # fmt: skip
    # A load capped to one thread by the model's own insert_settings: one stream (the views would run in turn).
    project.model("vs_auto_one_thread", "{{ config(materialized='vcmt_upsert', unique_key=['tenant', 'id'], "
                  "insert_settings={'max_threads': 1}) }}\nselect * from vs_auto_src")  # fmt: skip
    models = [f"vs_auto_{p}_{k}" for p in PATHS for k in (1, "auto", "unset")]
    project.dbt("run", "--select", *models, "vs_auto_one_thread")  # built on no event: no load below is a first run
    # Never more shards than the engine's `max_threads` (a machine with one core gets one stream).
    two = min(2, int(project.scalar("select getSetting('max_threads')")))
    # Distinct keys, so both paths feed every event: 100,000 (the least that takes 2 shards), then 99,999.
    for n, version, fold_shards in ((100_000, 1, two), (99_999, 2, 1)):
        project.command("truncate table vs_auto_src")
        project.command(
            f"insert into vs_auto_src select number, number % 3, number * {version}, toString(number % 7), {version}, "
            f"if(number % 11 = 0 and {version} = 2, -1, 1) from numbers({n})"
        )
        run = project.dbt(
            "run", "--select", *models, *(["vs_auto_rebuild", "vs_auto_one_thread"] if version == 1 else [])
        )
        if version == 1:
            recorded = project.query("select fed, virtual_shards from vs_auto_one_thread__loads where fed > 0")
            assert recorded == [(n, 1)], recorded
            assert _state(project, "vs_auto_one_thread") == _state(project, "vs_auto_fold_1")
        assert ("vs_auto_fold_auto: " in run.log) and (("on 2 virtual shards" in run.log) == (fold_shards == 2))
        for path, shards in (("fold", fold_shards), ("rounds", 1)):
            one = f"vs_auto_{path}_1"
            for auto in (f"vs_auto_{path}_auto", f"vs_auto_{path}_unset"):
                recorded = project.query(
                    f"select fed, virtual_shards from {auto}__loads order by loaded_at desc limit 1"
                )
                assert recorded == [(n, shards)], (auto, n, recorded)
                assert _state(project, auto) == _state(project, one)
        assert len(_state(project, "vs_auto_fold_1")) > 90_000
    # A first run (as a full refresh) loads into an empty table: one stream, whatever its size (not measured).
    assert project.query("select fed, virtual_shards from vs_auto_rebuild__loads") == [(100_000, 1)]
    assert _state(project, "vs_auto_rebuild") != []
