"""Rows read by a batch's lookups, against the floor (issue 41; docs/design.md#measured-facts, fact 15).

    python -m vcmt_lab.bench.rows_read [--rows 1000000,10000000] [--batches 100,1000,10000]
                                       [--granularity 8192,1024] [--layouts none,mod,tenant,date]
                                       [--engine chdb|http]

Rows read do not depend on the machine's load, so this bench needs no medians. It runs on the
embedded engine (`chdb`, the default) or on a ClickHouse node it serves on 127.0.0.1, through
dbt-clickhouse over HTTP (`http`). For each
layout and size, one `vcmt_upsert` model is built by `dbt run` (so the transform is the
package's own), N live rows are written into its target, and then, per batch size B, a batch
of B existing keys (versions bumped) is inserted into the model's stage, as the loader's fold
does: one INSERT, one event per key. It prints, per batch:

- floor: the rows of the target's granules that hold a batch key (what a lookup must read);
- transform: what the transform view read in that INSERT (system.query_views_log), the
  batch's own block and the tombstones included; load: what the whole INSERT read (its
  source, the batch, and every view on the stage);
- shapes of the lookup run alone as SELECTs over the same keys: `key IN (subquery)`, with a
  partition condition added, without FINAL (`argMax ... having sum(sign) > 0`), and one SELECT
  per partition with the partition as a literal (what a load split by partition would read).

Layouts: `none` (key `id`, no partition), `mod` (`partition_by='id % 20'`, `order_by=['id']`),
`mod_sorted` (the same with `order_by=['id % 20', 'id']`, so the package looks keys up by that
prefix of the sorting key), `mod_default` (`partition_by='id % 20'` and no `order_by`: the package
sorts by `(id % 20, id)` itself), `mod_bloom` (`mod` with a bloom filter on the key), `tenant` (key
`(tenant, id)`, `partition_by='tenant'`, 20 tenants), `date` (key `id`, `partition_by=
'toYYYYMM(d)'`, ~60 months, `d` growing with `id`: not a function of the key). Batches are
random keys over the whole table (`spread`) and, for the layouts partitioned by the key,
random keys of one partition (`one partition`).
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vcmt_lab.bench.engine import Engine, bench_project
from vcmt_lab.clickhouse_server import served_node
from vcmt_lab.dbt_project import DbtProject
from vcmt_lab.paths import BENCH_ROOT

BLOOM = [{"name": "key_bf", "definition": "id TYPE bloom_filter(0.0001) GRANULARITY 1"}]
LAYOUTS = {
    # name: (unique_key, partition_by or None, partition expression over the key when it is one, extra config)
    "none": (["id"], None, None, {}),
    "mod": (["id"], "id % 20", "id % 20", {"order_by": ["id"]}),
    "mod_sorted": (["id"], "id % 20", "id % 20", {"order_by": ["id % 20", "id"]}),
    "mod_default": (["id"], "id % 20", "id % 20", {}),
    "mod_bloom": (["id"], "id % 20", "id % 20", {"order_by": ["id"], "indexes": BLOOM}),
    "hash": (["id"], "cityHash64(id) % 20", "cityHash64(id) % 20", {"order_by": ["id"]}),
    "tenant": (["tenant", "id"], "tenant", "tenant", {}),
    "date": (["id"], "toYYYYMM(d)", None, {}),
    "date_random": (["id"], "toYYYYMM(d)", None, {}),
    "date_random_bloom": (["id"], "toYYYYMM(d)", None, {"indexes": BLOOM}),
}
# d grows with id (rows created over ~5 years), except in `date_random` where it is unrelated to id.
RANDOM_DATE = "toDate('2021-01-01') + cityHash64(number) % 1826"
DATES = {"date_random": RANDOM_DATE, "date_random_bloom": RANDOM_DATE}
DATE = "toDate('2021-01-01') + intDiv(number * 1826, {n})"
# As the transform reads (settings.sql pins it there).
FINAL_SETTINGS = "settings do_not_merge_across_partitions_select_final = 1"
COLUMNS = "tenant UInt8, id UInt64, d Date, a Int64, _version UInt64, sign Int8"


@dataclass
class Row:
    layout: str
    rows: int
    granularity: int
    batch: int
    keys: str
    floor: int
    transform: int
    load: int
    shapes: dict[str, int]


def _model_name(layout: str, rows: int, granularity: int) -> str:
    return f"rr_{layout}_{rows}_{granularity}"


def build(
    engine: Engine, project: DbtProject, sizes: list[int], granularities: list[int], layouts: list[str], say=print
) -> list[tuple[str, str, int, int]]:
    db = engine.database
    engine.command(f"create database if not exists `{db}`")
    engine.command(f"create table if not exists `{db}`.rr_src ({COLUMNS}) engine = MergeTree order by tuple()")
    models = []
    for layout in layouts:
        keys, partition_by, _, config = LAYOUTS[layout]
        for n in sizes:
            for g in granularities:
                name = _model_name(layout, n, g)
                extra = f", partition_by={partition_by!r}" if partition_by else ""
                extra += "".join(f", {k}={v!r}" for k, v in config.items())
                project.model(
                    name,
                    f"{{{{ config(materialized='vcmt_upsert', unique_key={keys!r}{extra}, "
                    f"settings={{'index_granularity': {g}}}) }}}}\nselect * from rr_src",
                )
                models.append((layout, name, n, g))
    say(f"building {len(models)} models")
    project.dbt("run", "--select", *(m[1] for m in models))
    for layout, name, n, _g in models:
        # Keys are multiples of 7, so a key's neighbours are not keys.
        engine.command(
            f"insert into `{db}`.`{name}` select number % 20, number * 7, "
            f"{DATES.get(layout, DATE).format(n=n)}, number, 1, 1 from numbers({n})",
            max_partitions_per_insert_block=1000,
        )
    return models


def _batch_keys(engine: Engine, n: int, b: int, pexpr: str | None, seed: int) -> list[int]:
    """B random row numbers: over the whole table, or (with `pexpr`) of the partition row 3 is in."""
    where = f"where {pexpr} = (select {pexpr} from (select 3 % 20 as tenant, 3 * 7 as id))" if pexpr else ""
    return [
        int(r[0])
        for r in engine.rows(
            f"select number from (select number, number % 20 as tenant, number * 7 as id from numbers({n})) {where} "
            f"order by cityHash64(number, {seed}) limit {b}"
        )
    ]


def _read_rows(engine: Engine, tag: str) -> int:
    return int(
        engine._logged(
            f"select read_rows from system.query_log where type = 'QueryFinish' "
            f"and query_kind = 'Select' and log_comment = '{tag}'"
        )[0][0]
    )


def measure(
    engine: Engine, project: DbtProject, models: list[tuple[str, str, int, int]], batches: list[int], say=print
) -> list[Row]:
    db = engine.database
    out: list[Row] = []
    for layout, name, n, g in models:
        objs = project.object_names(name)
        keys, _, pexpr, _ = LAYOUTS[layout]
        key_cols = ", ".join(keys)
        kinds = [("spread", False)] + ([("one partition", True)] if pexpr else [])
        for b in batches:
            if b > n:
                continue
            for kind, one in kinds:
                numbers = _batch_keys(engine, n, b, pexpr if one else None, seed=b + n + g)
                engine.command(f"drop table if exists `{db}`.rr_keys")
                engine.command(f"create table `{db}`.rr_keys ({COLUMNS}) engine = MergeTree order by tuple()")
                engine.command(
                    f"insert into `{db}`.rr_keys select number % 20, number * 7, "
                    f"{DATES.get(layout, DATE).format(n=n)}, -number, 0, 1 "
                    f"from numbers({n}) where number in ({','.join(map(str, numbers))})"
                )
                target = f"`{db}`.`{objs['target']}`"
                kt = f"({key_cols})" if len(keys) > 1 else key_cols
                floor = int(
                    engine.scalar(
                        f"select count() from {target} where (_part, intDiv(_part_offset, {g})) in "
                        f"(select _part, intDiv(_part_offset, {g}) from {target} where {kt} in "
                        f"(select {key_cols} from `{db}`.rr_keys))"
                    )
                )
                ks = f"(select {key_cols} from `{db}`.rr_keys)"
                pf = f" and ({pexpr}) in (select {pexpr} from `{db}`.rr_keys)" if pexpr else ""
                shapes = {
                    "key IN": f"select count() from {target} final prewhere {kt} in {ks} "
                    f"where sign = 1 {FINAL_SETTINGS}",
                    "key IN + partition IN": f"select count() from {target} final prewhere {kt} in {ks}{pf} "
                    f"where sign = 1 {FINAL_SETTINGS}",
                    "argMax, no FINAL": f"select {key_cols}, argMax(a, _version) from {target} where {kt} in {ks}"
                    f"{pf} group by {key_cols} having sum(sign) > 0",
                }
                if pexpr:
                    parts = sorted({int(x[0]) for x in engine.rows(f"select distinct {pexpr} from `{db}`.rr_keys")})
                    shapes["per-partition literal"] = (
                        "select sum(c) from ("
                        + " union all ".join(
                            f"select count() as c from {target} final prewhere {pexpr} = {p} and {kt} in "
                            f"(select {key_cols} from `{db}`.rr_keys where {pexpr} = {p}) where sign = 1"
                            for p in parts
                        )
                        + f") {FINAL_SETTINGS}"
                    )
                read = {}
                for shape, sql in shapes.items():
                    tag = f"rr {name} {b} {kind} {shape}"
                    engine.timed(tag, sql, want_rows=True)
                    # the keys' table is read once per subquery: count only the target's rows
                    read[shape] = _read_rows(engine, tag) - sql.count("rr_keys") * len(numbers)
                tag = f"rr {name} {b} {kind} insert"
                engine.timed(
                    tag,
                    f"insert into `{db}`.`{objs['stage']}` (tenant, id, d, a, _version, sign) "
                    f"select tenant, id, d, a, {2 + len(out)}, 1 from `{db}`.rr_keys",
                )
                views = engine._logged(
                    "select view_name, read_rows from system.query_views_log where initial_query_id = "
                    f"(select any(query_id) from system.query_log where type = 'QueryFinish' "
                    f"and query_kind = 'Insert' and log_comment = '{tag}')"
                )
                transform = sum(int(r[1]) for r in views if str(r[0]).strip("`").endswith(objs["transform"]))
                load = int(
                    engine._logged(
                        f"select read_rows from system.query_log where type = 'QueryFinish' "
                        f"and query_kind = 'Insert' and log_comment = '{tag}'"
                    )[0][0]
                )
                row = Row(layout, n, g, len(numbers), kind, floor, transform, load, read)
                out.append(row)
                say(_line(row))
    return out


def _ratio(x: int, floor: int) -> str:
    return f"{x / floor:.2f}" if floor else "-"


SHAPES = ("key IN", "key IN + partition IN", "argMax, no FINAL", "per-partition literal")


def _line(r: Row) -> str:
    cells = " | ".join("-" if r.shapes.get(s) is None else _ratio(r.shapes[s], r.floor) for s in SHAPES)
    return (
        f"| {r.layout} | {r.rows:,} | {r.granularity} | {r.batch:,} | {r.keys} | {r.floor:,} | "
        f"{r.transform:,} | {_ratio(r.transform, r.floor)} | {_ratio(r.load, r.floor)} | {cells} |"
    )


def render(rows: list[Row]) -> str:
    head = [
        "| layout | N | granularity | B | keys | floor rows | transform read | transform / floor | load / floor "
        "| key IN | + partition IN | argMax no FINAL | per-partition literal |",
        "|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    return "\n".join(
        [
            "rows read / floor (load: the whole stage INSERT, its source and every view; shapes: the "
            "lookup alone, as a SELECT over the same keys)",
            *head,
            *map(_line, rows),
        ]
    )


# The goal (issue 41): the transform reads at most twice the floor wherever the lookup can tell a key's granules
# from the others': no partition, partitions in the key's order (`tenant`, `date`), a sorting key led by the
# partition expression (`mod_sorted`, and `mod_default`, where the package puts it first), or a bloom filter on the
# key. `mod`, `hash` (both sorted by the key alone) and `date_random` are shown, not judged: their partitions
# interleave in the key's order, so every partition's granule whose key range covers a batch key is read (fact 15).
GOAL_LAYOUTS = ("none", "tenant", "date", "mod_sorted", "mod_default", "mod_bloom", "date_random_bloom")
GOAL_RATIO = 2.0


def goal(rows: list[Row]) -> tuple[bool, str]:
    judged = [r for r in rows if r.layout in GOAL_LAYOUTS and r.floor]
    if not judged:
        return True, "goal: no judged layout in this run"
    worst = max(judged, key=lambda r: r.transform / r.floor)
    ratio = worst.transform / worst.floor
    met = ratio <= GOAL_RATIO
    return met, (
        f"goal: transform rows read <= {GOAL_RATIO:g} x floor for {', '.join(GOAL_LAYOUTS)}: "
        f"{'met' if met else 'MISSED'} (worst {ratio:.2f}: {worst.layout}, N={worst.rows:,}, "
        f"granularity {worst.granularity}, B={worst.batch:,}, {worst.keys})"
    )


def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vcmt_lab.bench.rows_read", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=_ints, default=[1_000_000], help="base rows N, comma-separated (default 1M)")
    p.add_argument("--batches", type=_ints, default=[100, 1000, 10_000], help="batch sizes B (default 100,1000,10000)")
    p.add_argument("--granularity", type=_ints, default=[8192, 1024], help="index_granularity (default 8192,1024)")
    p.add_argument("--layouts", default=",".join(LAYOUTS), help=f"of {', '.join(LAYOUTS)} (default all)")
    p.add_argument("--engine", choices=("chdb", "http"), default="chdb", help="embedded, or a served node (HTTP)")
    p.add_argument("--work", type=Path, default=BENCH_ROOT / "work" / "rows_read")
    args = p.parse_args(argv)
    layouts = [x for x in args.layouts.split(",") if x]
    unknown = [x for x in layouts if x not in LAYOUTS]
    if unknown:
        p.error(f"unknown layouts {unknown}; known: {', '.join(LAYOUTS)}")
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    if args.engine == "chdb":
        rows = _run(args, layouts, work, None)
    else:
        with served_node(work / "node", query_logs=True) as node:
            rows = _run(args, layouts, work, node)
    met, line = goal(rows)
    print(f"engine: {args.engine}", render(rows), line, sep="\n", flush=True)
    return 0 if met else 1


def _run(args: argparse.Namespace, layouts: list[str], work: Path, node) -> list[Row]:
    """Build and measure on chDB in `work`, or on the served `node`."""
    with bench_project(work, "vcmt_bench_rr", node) as (engine, project):
        models = build(engine, project, args.rows, args.granularity, layouts)
        return measure(engine, project, models, args.batches)


if __name__ == "__main__":
    raise SystemExit(main())
