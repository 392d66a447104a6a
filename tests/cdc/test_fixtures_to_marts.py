"""Every captured Debezium fixture through Spark staging and vcmt_upsert marts, against the source's dump.

The files `make capture-fixtures` captured from real PostgreSQL and MariaDB
connectors are landed as batches (one file per batch), staged on Spark from
declared columns (`stage_topic`'s read and decoding, all variants of a topic
in one job), and applied by one `vcmt_upsert` mart
per variant and table on chDB, with `truncate_when` (the captured TRUNCATE)
and `unavailable_column` (the unchanged TOASTed body). The marts' final state
must equal the database's final state (the dump), column by column.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.cdc.test_debezium_fixtures import DECLARED, FULL_VARIANTS, ROOT, TABLES, close, dumped, topic_of
from vcmt_staging.topic import decode_lines, read_lines

pytestmark = pytest.mark.spark

# The declared staging type of each kind of column of the captured tables.
STAGED = {
    "int": "int",
    "str": "string",
    "bool": "boolean",
    "decimal(2)": "decimal(12,2)",
    "decimal": "decimal(38,20)",
    "ts(3)": "timestamp_millis",
    "ts(6)": "timestamp_micros",
    "tstz": "timestamp",
    "date": "date",
    "json": "json",
}


# Each variant's batches are numbered from its own base, so one Spark job stages every variant of a topic.
BATCHES_PER_VARIANT = 1000


def _land(lake: Path, flavour: str, table: str) -> dict[str, int]:
    """Every full variant's files of one topic as the lake's batches: `_batch_id=<base + n>/` per sink
    file, in offset order. Returns each variant's base."""
    bases = {}
    for i, variant in enumerate(v for v in FULL_VARIANTS if v.startswith(flavour + "/")):
        bases[variant] = base = i * BATCHES_PER_VARIANT
        part = ROOT / variant / "topics" / topic_of(flavour, table) / "partition=0"
        files = sorted(p for p in part.iterdir() if not p.name.endswith(".keys.json"))
        assert 0 < len(files) < BATCHES_PER_VARIANT
        for n, f in enumerate(files):
            batch = lake / "raw" / flavour / table / f"_batch_id={base + n}"
            batch.mkdir(parents=True)
            shutil.copy(f, batch / f.name)
    return bases


@pytest.fixture(scope="module")
def staged(spark, tmp_path_factory) -> tuple[Path, dict[str, int]]:
    """Stage every variant: one Parquet dataset per flavour and table, in one Spark job each."""
    from pyspark.sql import functions as F

    lake = tmp_path_factory.mktemp("fixture_lake")
    bases: dict[str, int] = {}
    for flavour in ("postgres", "mysql"):
        for table in TABLES:
            bases.update(_land(lake, flavour, table))
            columns = {c: STAGED[k] for c, k in DECLARED[flavour][table].items()}
            # Lines without a schema follow their connector's decimal.handling.mode (the variant's name).
            mode = F.lit("precise")
            for variant, base in bases.items():
                if variant.startswith(flavour + "/"):
                    in_variant = F.col("_batch_id").between(base, base + BATCHES_PER_VARIANT - 1)
                    mode = F.when(in_variant, F.lit(variant.split("-")[1])).otherwise(mode)
            lines = read_lines(spark, str(lake / "raw" / flavour / table))
            staged = decode_lines(lines, flavour, ["id"], columns, decimal_handling=mode)
            staged.write.parquet(str(lake / "staged" / flavour / table))
    return lake, bases


def _mart_sql(flavour: str, table: str, base: int) -> str:
    data = [c for c in DECLARED[flavour][table] if c != "id"]
    return (
        "{{ config(materialized='vcmt_upsert', unique_key='id', truncate_when=\"_op = 't'\", "
        "unavailable_column='_unavailable') }}\n"
        f"select assumeNotNull(id) as id, {', '.join(data)}, _unavailable, _op,\n"
        "  assumeNotNull(_version) as _version, toInt8(assumeNotNull(sign)) as sign\n"
        f"from {{{{ vcmt.lake_source('{flavour}/{table}') }}}}\n"
        f"where _kind in ('change', 'truncate') and intDiv(_batch_id, {BATCHES_PER_VARIANT}) = {base // BATCHES_PER_VARIANT}\n"
    )


def _normal(kind: str, value):
    """A value as the dump's reader gives it: naive UTC timestamps, parsed JSON."""
    if value is None:
        return None
    if isinstance(value, datetime) and value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    if kind == "json":
        return json.loads(value)
    return value


def test_every_fixture_lands_in_the_marts_equal_to_the_source(project, staged):
    lake, bases = staged
    project.vars = {"vcmt_lake_root": str(lake)}
    marts = {}
    for variant in FULL_VARIANTS:
        flavour = variant.split("/")[0]
        for table in TABLES:
            name = f"{variant.replace('/', '_').replace('-', '_')}__{table}"
            project.model(name, _mart_sql(flavour, table, bases[variant]))
            marts[(variant, table)] = name
    project.dbt("run")

    differences = []
    for (variant, table), name in marts.items():
        kinds = DECLARED[variant.split("/")[0]][table]
        want = dumped(variant, table)
        rows = project.query(f"select {', '.join(kinds)} from `{name}` final where sign = 1 order by id")
        got = {r[0]: dict(zip(kinds, r, strict=True)) for r in rows}
        if sorted(got) != sorted(want):
            differences.append((variant, table, "keys", sorted(got), sorted(want)))
            continue
        mode = variant.split("-")[1]
        for id_, row in want.items():
            for col, value in row.items():
                g = got[id_][col]
                if kinds[col] in ("ts(3)", "ts(6)", "tstz"):
                    value = _normal(kinds[col], value)
                g = _normal(kinds[col], g)
                # An unconstrained numeric in double mode is exact only to a double's precision.
                ok = close(g, value) if mode == "double" and kinds[col] == "decimal" else g == value
                if not ok:
                    differences.append((variant, table, id_, col, g, value))
    assert differences == []

    # The capture's TRUNCATE went through the marts (the rows it removed are gone, checked above).
    for variant in FULL_VARIANTS:
        done = f"select count() from `{marts[(variant, 'audit')]}__truncates` where rows_deleted is not null"
        assert project.scalar(done) == 1, variant
    # The TOASTed body that an update did not change kept its stored value (and was marked unsent).
    pg = marts[("postgres/schemas-precise", "items")]
    assert project.query(f"select length(body), _unavailable from `{pg}` final where sign = 1 and id = 3") == [
        (9000, ["body"])
    ]
