"""Anchors: what a ClickHouse user would pick instead of vcmt_upsert (issue 12).

An anchor gets a table with base's columns and parts (its own engine where it
needs one), the statements that apply the batch waiting in the model's input
table, and its report query as its own docs recommend reading it. Each is
sampled alongside the plain INSERT and vcmt's loader, and its report answer
after the batch must equal vcmt's (the `replace` model's, or for (D) the
`coalesce` model's) or the run fails. To add one, append it to ANCHORS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vcmt_lab.bench import sql
from vcmt_lab.bench.tables import MODEL, PARTIAL, Model, Tables


@dataclass(frozen=True)
class Anchor:
    key: str
    # Its name in ratios, e.g. "(A)".
    short: str
    label: str
    # Builds the anchor's table on a copy of its model's base; returns the DDL, for the report.
    create: Callable[[Tables], str]
    # The statement(s) that apply the batch in the model's input table, timed together.
    insert: Callable[[Tables], str | list[str]]
    # The report query on this anchor's table.
    report: Callable[[Tables], str]
    # The vcmt model it stands next to.
    model: Model = MODEL


def _create_like_base(t: Tables, name: str, engine: str, settings: str = "", model: Model = MODEL,
                      merges: bool = False) -> str:  # fmt: skip
    """`name` with base's columns and projection, partition and sort key, on another engine,
    so base's parts attach to it (Tables.restore). Merges stay stopped unless `merges`."""
    ddl = (f"create table {t.q(name)} as {t.q(model.base)} engine = {engine} partition by {sql.PARTITION} "
           f"order by id settings index_granularity = {sql.GRANULARITY}, "
           f"deduplicate_merge_projection_mode = 'rebuild'{settings}")  # fmt: skip
    t.engine.command(ddl)
    if not merges:
        t.stop_merges(name)
    return ddl


RMT, LW_UPDATE, COALESCING = "rmt", "lw_update", "coalescing"
_PATCH_PARTS = ", enable_block_number_column = 1, enable_block_offset_column = 1"


def _lw_update(t: Tables) -> list[str]:
    """Each key's newest event into a Join table, then one lightweight UPDATE guarded by version
    (the bench's batches only update existing keys and carry no deletes; `sign` is the soft-delete column)."""
    batch, name = t.q(LW_UPDATE + "_batch"), f"{t.db}.{LW_UPDATE}_batch"
    sets = ", ".join(f"{c} = joinGet('{name}', '{c}', id)" for c in (*sql.DATA_COLUMNS, "_version"))
    return [
        f"drop table if exists {batch}",
        f"create table {batch} engine = Join(ANY, LEFT, id) as select id, {', '.join(sql.DATA_COLUMNS)}, _version "
        f"from {t.q(MODEL.events)} order by _version desc limit 1 by id",
        f"update {t.q(LW_UPDATE)} set {sets} where id in (select id from {batch}) "
        f"and _version < joinGet('{name}', '_version', id)",
    ]


# (C): dbt-clickhouse's own incremental `delete+insert`, as real dbt models on
# tables created beforehand like base (so dbt takes its incremental path and
# base's parts attach). The bench captures the statements dbt ran on the batch
# from the query log (Scenario.setup) and times those, as it does vcmt's loader.
DELETE_INSERT = "dbt_delete_insert"
DELETE_INSERT_LWU = "dbt_delete_insert_lwu"
DBT_MODELS = {
    DELETE_INSERT: ("", {}),
    DELETE_INSERT_LWU: (_PATCH_PARTS, {"lightweight_delete_mode": "lightweight_update"}),
}


def dbt_model_sql(name: str) -> str:
    _, query_settings = DBT_MODELS[name]
    return (
        "{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id', "
        f"order_by='id', partition_by='{sql.PARTITION}', query_settings={query_settings!r}) }}}}\n"
        f"select id, Department, metric1, metric2, _version, sign from {{{{ source('bench', '{MODEL.events}') }}}}\n"
        "order by _version desc limit 1 by id"
    )


def _dbt_anchor(name: str, short: str, label: str) -> Anchor:
    # A DELETE on a table with a projection needs lightweight_mutation_projection_mode, and that
    # mutation needs the background executor: merges stay on.
    settings = DBT_MODELS[name][0] + ", lightweight_mutation_projection_mode = 'rebuild'"
    return Anchor(name, short, label, lambda t: _create_like_base(t, name, "MergeTree", settings, merges=True),
                  lambda t: t.captured[name], lambda t: sql.report_live(t.q(name)))  # fmt: skip


ANCHORS: tuple[Anchor, ...] = (
    Anchor(RMT, "(A)", "(A) ReplacingMergeTree(_version), read with FINAL",
           lambda t: _create_like_base(t, RMT, "ReplacingMergeTree(_version)"),
           lambda t: f"insert into {t.q(RMT)} select * from {t.q(MODEL.events)}",
           lambda t: sql.report_final(t.q(RMT))),
    Anchor(LW_UPDATE, "(B)", "(B) lightweight UPDATE with a version guard",
           lambda t: _create_like_base(t, LW_UPDATE, "MergeTree", _PATCH_PARTS),
           _lw_update, lambda t: sql.report_live(t.q(LW_UPDATE))),
    _dbt_anchor(DELETE_INSERT, "(C)", "(C) dbt-clickhouse delete+insert, lightweight DELETE"),
    _dbt_anchor(DELETE_INSERT_LWU, "(C) lightweight_update",
                "(C) dbt-clickhouse delete+insert, lightweight_delete_mode = 'lightweight_update'"),
    # (D): the engine keeps each column's last non-NULL value per key, in insert order, so the
    # events go in by version; its docs recommend reading it with FINAL.
    Anchor(COALESCING, "(D)", "(D) CoalescingMergeTree, read with FINAL (the `coalesce` policy)",
           lambda t: _create_like_base(t, COALESCING, "CoalescingMergeTree", model=PARTIAL),
           lambda t: f"insert into {t.q(COALESCING)} select * from {t.q(PARTIAL.events)} order by _version",
           lambda t: sql.report_live(t.q(COALESCING), final=True), PARTIAL),
)  # fmt: skip
