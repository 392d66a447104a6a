"""dbt's own flags and features on a vcmt_upsert model, on the embedded engine: each works, or is refused
before any DDL with a message naming the feature and what to do (docs/reference.md, "dbt's own features on a
vcmt model")."""

from __future__ import annotations

import json
import shutil

from tests.conftest import REPO_ROOT, operations_queries
from vcmt_lab.dbt_project import DbtProject

EVENTS = [(1, 10, 1, 1), (2, 20, 1, 1)]


def _vcmt_project(project: DbtProject, model_config: str = "") -> None:
    """Source `raw.ev` (a table of change events) -> `m` (vcmt_upsert) -> `d` (a view reading it)."""
    project.command(
        "create table ev (id Int32, x Int64, _version UInt64, sign Int8, ts DateTime default now() - 60) "
        "engine = MergeTree order by id"
    )
    project.command("insert into ev (id, x, _version, sign) values " + ", ".join(str(e) for e in EVENTS))
    project.write(
        "models/_sources.yml",
        f"""
        version: 2
        sources:
          - name: raw
            schema: {project.schema}
            tables:
              - name: ev
                config:
                  event_time: ts
    """,
    )
    project.model(
        "m",
        f"""
        {{{{ config(materialized='vcmt_upsert', unique_key='id'{model_config}) }}}}
        select id, x, _version, sign from {{{{ source('raw', 'ev') }}}}
    """,
    )
    # Sign arithmetic, not FINAL: under --empty and --sample dbt reads a ref as a subquery, which FINAL cannot
    # take (README, "dbt's own features on a vcmt model").
    project.model(
        "d",
        """
        {{ config(materialized='view') }}
        select id, sum(x * sign) as x from {{ ref('m') }} group by id having sum(sign) > 0
    """,
    )
    project.model(
        "c",
        """
        {{ config(materialized='view') }}
        select id, x from {{ vcmt.current_rows(ref('m')) }}
    """,
    )


def _rows(project: DbtProject, table: str = "m") -> list[tuple]:
    return project.query(f"select id, x from {table} {'' if table in ('c', 'd') else 'final'} order by id")


def test_build_empty_loads_nothing_and_breaks_nothing(project: DbtProject) -> None:
    """`dbt build --empty` builds the model's objects and loads no event; the next run loads them all. A model
    reading its current rows with vcmt.current_rows builds too, and vcmt's generic tests pass, reading no row
    (FINAL and the projection check cannot take dbt's empty subquery); a vcmt_aggregate model is created empty,
    and built by the next run (no view can keep a subquery online)."""
    _vcmt_project(project, ", projections=[{'name': 'by_x', 'query': 'select x, sum(sign) group by x'}]")
    project.model("e", "{{ config(materialized='view') }}\nselect toInt32(1) as id, toInt64(10) as x")
    project.model(
        "a",
        "{{ config(materialized='vcmt_aggregate') }}\nselect id, sum(x * sign) as x from {{ ref('m') }} group by id",
    )
    project.write(
        "models/_tests.yml",
        """
        version: 2
        models:
          - name: m
            data_tests:
              - vcmt.sign_sum_in_range
              - vcmt.single_live_version
              - vcmt.groupby_matches_final: {arguments: {group_by: [x]}}
              - vcmt.projection_matches_base
              - vcmt.matches_expected_state: {arguments: {expected: ref('e')}}
    """,
    )
    build = project.dbt("build", "--empty")
    # The five tests above (the package's own data test, vcmt_dispatch_line, runs beside them).
    passed = [r.node.unique_id for r in build.result.result.results if str(r.status) == "pass"]
    assert len([t for t in passed if t.startswith("test.vcmt_test_project.")]) == 5, build.log[-3000:]
    assert _rows(project) == [] == project.query("select * from a")
    project.dbt("run")
    assert _rows(project) == [(1, 10), (2, 20)]
    assert _rows(project, "d") == [(1, 10), (2, 20)] == _rows(project, "c")
    assert project.query("select id, sum(x) from a group by id order by id") == [(1, 10), (2, 20)]


def _contract(project: DbtProject, x_type: str = "Int64", constraint: str = "") -> None:
    project.write(
        "models/_models.yml",
        f"""
        version: 2
        models:
          - name: m
            description: The current orders.
            config:
              contract: {{enforced: true}}
            columns:
              - {{name: id, data_type: Int32, description: The key.}}
              - {{name: x, data_type: {x_type}, description: The amount.{constraint}}}
              - {{name: _version, data_type: UInt64}}
              - {{name: sign, data_type: Int8}}
    """,
    )


def test_an_enforced_contract_is_honoured(project: DbtProject) -> None:
    """`contract: {enforced: true}`: the SELECT's columns and types are checked against the contract before any
    DDL; constraints, which a vcmt model cannot enforce, are refused."""
    _vcmt_project(project)
    _contract(project, x_type="String")
    failed = project.dbt("run", "--select", "m", expect_pass=False)
    assert "enforced contract that failed" in failed.log and "String" in failed.log, failed.log[-3000:]
    assert (
        project.scalar(f"select count() from system.tables where database = '{project.schema}' and name like 'm%'") == 0
    )
    _contract(project, constraint=", constraints: [{type: check, expression: 'x > 0'}]")
    refused = project.dbt("run", "--select", "m", expect_pass=False)
    assert "vcmt_upsert" in refused.log and "constraints" in refused.log, refused.log[-3000:]
    assert (
        project.scalar(f"select count() from system.tables where database = '{project.schema}' and name like 'm%'") == 0
    )
    _contract(project)
    project.dbt("run", "--select", "m")
    assert _rows(project) == [(1, 10), (2, 20)]


def test_docs_generate_lists_the_models_columns(project: DbtProject) -> None:
    """`dbt docs generate`: catalog.json has the vcmt model with its columns and types, and nothing of its helper
    objects; the manifest its descriptions. docs/operations.md's query lists the schema without them."""
    project.write_json = True  # this test reads dbt's artifacts
    _vcmt_project(project)
    _contract(project)
    # Listed by docs/operations.md's query: a table of the user's with a double underscore in its name, another
    # vcmt model named after this one, and a VersionedCollapsingMergeTree table of the user's named like it, with a
    # table of its own.
    project.command("create table ev__archive (id Int32) engine = MergeTree order by id")
    project.model("m__daily", "{{ config(materialized='vcmt_upsert', unique_key='id') }}\nselect id, x, _version "
                  "from {{ ref('m') }} where sign = 1")  # fmt: skip
    project.command("create table m_hist (id Int32, v UInt64, sign Int8) engine = VersionedCollapsingMergeTree(sign, v) "
                    "order by id")  # fmt: skip
    project.command("create table m_hist__x (id Int32) engine = MergeTree order by id")
    project.dbt("run")
    project.dbt("docs", "generate")
    catalog = json.loads((project.root / "target" / "catalog.json").read_text())
    assert sorted(catalog["nodes"]) == [f"model.vcmt_test_project.{m}" for m in ("c", "d", "m", "m__daily")]
    assert sorted(catalog["sources"]) == ["source.vcmt_test_project.raw.ev"]
    # docs/operations.md, "What a schema lists": the ten objects a model keeps beside it, and the schema without
    # them (every model, its stage, the user's own tables).
    helpers = ["m__applied", "m__applied_writer", "m__loads", "m__lock", "m__lock_999999999999999999", "m__stage",
               "m__tombstones", "m__tombstones_writer", "m__transform", "m__truncates"]  # fmt: skip
    assert [r[0] for r in project.query("select name from system.tables where database = currentDatabase() "
                                        "and startsWith(name, 'm__') and not startsWith(name, 'm__daily') order by name")] == helpers  # fmt: skip
    page = (REPO_ROOT / "docs" / "operations.md").read_text().split("## What a schema lists", 1)[1]
    assert all(f"`{h}`" in page for h in helpers) and "keeps ten objects of its own" in page
    (listing,) = [q for q in operations_queries() if "without vcmt objects" in q]
    vcmt = "VersionedCollapsingMergeTree"
    assert project.query(listing.replace("analytics", project.schema)) == [
        ("c", "View"), ("d", "View"), ("ev", "MergeTree"), ("ev__archive", "MergeTree"), ("m", vcmt),
        ("m__daily", vcmt), ("m__daily__stage", "Null"), ("m__stage", "Null"), ("m_hist", vcmt),
        ("m_hist__x", "MergeTree"),
    ]  # fmt: skip
    node = catalog["nodes"]["model.vcmt_test_project.m"]
    assert {name: c["type"] for name, c in node["columns"].items()} == {
        "id": "Int32",
        "x": "Int64",
        "_version": "UInt64",
        "sign": "Int8",
    }
    manifest = json.loads((project.root / "target" / "manifest.json").read_text())
    model = manifest["nodes"]["model.vcmt_test_project.m"]
    assert model["description"] == "The current orders."
    assert model["columns"]["x"]["description"] == "The amount."


def test_unit_tests_on_a_vcmt_model_and_on_a_model_reading_it(project: DbtProject) -> None:
    """`unit_tests:` on the vcmt model (its SELECT, given the source's rows) and on models reading it: with sign
    arithmetic, given the vcmt model's rows, a cancel row among them; through vcmt.current_rows, given its current
    rows (a fixture is read as given: FINAL cannot read the fixture's CTE)."""
    _vcmt_project(project)
    project.write(
        "models/_unit_tests.yml",
        """
        unit_tests:
          - name: m_selects_the_events
            model: m
            given:
              - input: source('raw', 'ev')
                rows:
                  - {id: 1, x: 5, _version: 1, sign: 1}
            expect:
              rows:
                - {id: 1, x: 5, _version: 1, sign: 1}
          - name: d_reads_the_current_rows
            model: d
            given:
              - input: ref('m')
                rows:
                  - {id: 1, x: 5, _version: 1, sign: 1}
                  - {id: 1, x: 5, _version: 1, sign: -1}
                  - {id: 2, x: 7, _version: 1, sign: 1}
            expect:
              rows:
                - {id: 2, x: 7}
          - name: c_reads_the_fixture_as_its_current_rows
            model: c
            given:
              - input: ref('m')
                rows:
                  - {id: 1, x: 5, _version: 1, sign: 1}
                  - {id: 2, x: 7, _version: 3, sign: 1}
            expect:
              rows:
                - {id: 1, x: 5}
                - {id: 2, x: 7}
    """,
    )
    project.dbt("run")
    run = project.dbt("test", "--select", "test_type:unit")
    passed = sorted(r.node.name for r in run.result.result.results if str(r.status) == "pass")
    assert passed == ["c_reads_the_fixture_as_its_current_rows", "d_reads_the_current_rows", "m_selects_the_events"], (
        run.log[-3000:]
    )


def test_retry_after_a_failed_run(project: DbtProject) -> None:
    """`dbt retry` after a failed vcmt run runs the failed model and the ones it skipped."""
    project.write_json = True  # this test reads dbt's artifacts
    _vcmt_project(project)
    project.command("rename table ev to ev_later")
    project.dbt("run", expect_pass=False)
    project.command("rename table ev_later to ev")
    project.dbt("retry")
    assert _rows(project) == [(1, 10), (2, 20)]
    assert _rows(project, "d") == [(1, 10), (2, 20)]


def test_sample_reads_a_sample_of_the_input(project: DbtProject) -> None:
    """`dbt run --sample`: dbt (dbt-clickhouse renders the filter) reads the events of the sample's time
    window only, as for any model; a later run without --sample applies the rest. (The events' `ts` is a
    minute ago: dbt's sample window ends now, exclusive, to the second.)"""
    _vcmt_project(project)
    project.command("insert into ev values (3, 30, 1, 1, now() - interval 10 day)")
    project.dbt("run", "--select", "m", "--sample", "1 day")
    assert _rows(project) == [(1, 10), (2, 20)]
    project.dbt("run", "--select", "m")
    assert _rows(project) == [(1, 10), (2, 20), (3, 30)]

    # A model reading the vcmt model's current rows takes the sample window of the vcmt model's event_time.
    project.model(
        "m",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id', event_time='ts') }}
        select id, x, _version, sign, ts from {{ source('raw', 'ev') }}
    """,
    )
    project.dbt("run", "--select", "m", "--full-refresh")
    project.dbt("run", "--select", "c", "--sample", "1 day")
    assert _rows(project, "c") == [(1, 10), (2, 20)]


def test_clone_copies_the_table_and_the_next_run_asks_for_a_full_refresh(project: DbtProject) -> None:
    """`dbt clone` of a vcmt model into another schema copies its table (dbt-clickhouse's `CLONE AS`), readable
    at once; not its stage, transform and helpers, so the next run there is refused before any DDL, naming
    clone and --full-refresh, which rebuilds the model from its SELECT."""
    project.write_json = True  # this test reads dbt's artifacts
    import yaml

    _vcmt_project(project)
    project.dbt("run")
    state = project.root / "prod_state"
    shutil.copytree(project.root / "target", state)
    profiles = yaml.safe_load((project.root / "profiles.yml").read_text())
    outputs = profiles["vcmt_test"]["outputs"]
    dev = f"{project.schema}_dev"
    outputs["dev"] = {**outputs[project.ch_target], "schema": dev}
    (project.root / "profiles.yml").write_text(yaml.safe_dump(profiles, sort_keys=False))
    project.dbt("clone", "--state", str(state), target="dev")
    assert _rows(project, f"{dev}.m") == [(1, 10), (2, 20)]
    tables = project.query(f"select name from system.tables where database = '{dev}' order by name")
    project.command("insert into ev (id, x, _version, sign) values (3, 30, 1, 1)")
    refused = project.dbt("run", "--select", "m", target="dev", expect_pass=False)
    assert "`dbt clone` copies a vcmt model's table only" in refused.log and "--full-refresh" in refused.log
    assert project.query(f"select name from system.tables where database = '{dev}' order by name") == tables
    project.dbt("run", "--select", "m", "--full-refresh", target="dev")
    assert _rows(project, f"{dev}.m") == [(1, 10), (2, 20), (3, 30)]


def _lake_batch(project: DbtProject, tmp_path, select: str) -> None:
    """A staged lake under `tmp_path` whose dataset `stg_orders` holds one batch, a Parquet file of `select`'s rows,
    and the project's var `vcmt_lake_root` pointing to it."""
    lake = tmp_path / "lake"
    folder = lake / "staged" / "stg_orders" / "_batch_id=1"
    folder.mkdir(parents=True)
    project.command(f"insert into function file('{folder / 'part-0.parquet'}', 'Parquet') {select}")
    project.vars = {"vcmt_lake_root": str(lake)}


def test_source_freshness_over_the_staged_lake(project: DbtProject, tmp_path) -> None:
    """`dbt source freshness` on a source over the staged lake: its `loaded_at_query` reads the dataset with
    vcmt.lake_source (the source names no table: a lake dataset is files)."""
    _lake_batch(project, tmp_path, "select toUInt64(1) as id, now64(3) - interval 2 hour as _source_ts")
    project.write(
        "models/_lake.yml",
        """
        version: 2
        sources:
          - name: lake
            tables:
              - name: stg_orders
                config:
                  loaded_at_query: "select max(_source_ts) from {{ vcmt.lake_source('stg_orders') }}"
                  freshness:
                    warn_after: {count: 1, period: hour}
                    error_after: {count: 1, period: day}
    """,
    )
    run = project.dbt("source", "freshness")
    (result,) = [r for r in run.result.result.results if r.node.name == "stg_orders"]
    assert str(result.status) == "warn" and 7000 < result.age < 7300, (result.status, result.age, run.log[-3000:])


def test_build_empty_reads_no_lake_row_and_records_no_file(project: DbtProject, tmp_path) -> None:
    """`dbt build --empty` on marts over the staged lake (vcmt.lake_source, with new_files=true and with a
    `_batch_id` watermark) loads no row and claims or records no file: the next run loads the whole lake."""
    _lake_batch(project, tmp_path, "select toInt64(number) as id, toUInt64(1) as _version from numbers(3)")
    project.model(
        "by_file",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id') }}
        select assumeNotNull(id) as id, assumeNotNull(_version) as _version
        from {{ vcmt.lake_source('stg_orders', new_files=true) }}
    """,
    )
    project.model(
        "by_batch",
        """
        {{ config(materialized='vcmt_upsert', unique_key='id', watermark='_batch_id') }}
        select assumeNotNull(id) as id, assumeNotNull(_version) as _version, _batch_id
        from {{ vcmt.lake_source('stg_orders') }}
    """,
    )
    project.dbt("build", "--empty")
    records = (
        f"select count() from system.tables where database = '{project.schema}' "
        "and name in ('by_file__lake_files', 'by_batch__lake_batches')"
    )
    assert project.scalar(records) == 0
    assert project.scalar("select count() from by_file") == project.scalar("select count() from by_batch") == 0
    project.dbt("run")
    assert project.query("select id from by_file final order by id") == [(0,), (1,), (2,)]
    assert project.query("select id from by_batch final order by id") == [(0,), (1,), (2,)]
