"""Staging is exact or quarantines: no value is rounded, truncated or wrapped, no truncate loses its position
(issue 31, findings 2, 5 and 11).

Every line is a real captured line (integration_tests/fixtures/debezium). Where the point is a hostile
value, one value of the captured line is replaced, and the test says which; everything else in the line is
as the connector wrote it.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from tests.cdc.test_debezium_fixtures import ROOT, topic_of
from vcmt_staging.topic import decode_lines

pytestmark = pytest.mark.spark

ITEMS = {
    "id": "bigint",
    "name": "string",
    "qty": "int",
    "active": "boolean",
    "price": "decimal(12,2)",
    "created_ms": "timestamp_millis",
    "created_us": "timestamp_micros",
    "birth": "date",
}
_SLOT = "__vcmt_test_slot__"


def captured(variant: str, table: str, op: str, id_: int | None = None) -> str:
    """The first captured line of `op` (for the row `id_`), as its text."""
    flavour = variant.split("/")[0]
    folder = ROOT / variant / "topics" / topic_of(flavour, table) / "partition=0"
    for path in sorted(p for p in folder.iterdir() if not p.name.endswith(".keys.json")):
        for text in path.read_text(encoding="utf-8").splitlines():
            doc = json.loads(text) if text else None
            payload = doc.get("payload", doc) if isinstance(doc, dict) else None
            if not payload or payload.get("op") != op:
                continue
            image = payload.get("after") or payload.get("before")
            if id_ is None or (image and image["id"] == id_):
                return text
    raise AssertionError(f"{variant} {table}: no {op} line for id {id_}")


def edited(text: str, path: tuple[str, ...], value_json: str | None) -> str:
    """The captured line with one value replaced by the JSON text `value_json` (None: the field removed)."""
    doc = json.loads(text)
    node = doc.get("payload", doc) if "schema" in doc else doc
    for name in path[:-1]:
        node = node[name]
    if value_json is None:
        del node[path[-1]]
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    node[path[-1]] = _SLOT
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).replace(json.dumps(_SLOT), value_json)


def staged(
    spark, lines: list[str], columns: dict[str, str], flavour: str = "postgres", **kw: Any
) -> list[dict[str, Any]]:
    df = spark.createDataFrame([(t, "f.json", 0) for t in lines], "raw string, _source_file string, _batch_id int")
    return [r.asDict() for r in decode_lines(df, flavour, ["id"], columns, **kw).collect()]


def verdicts(rows: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(r["_kind"], r["_reason"]) for r in rows]


PG = "postgres/noschemas-precise"


def test_the_captured_line_itself_stages(spark) -> None:
    """The control: the captured snapshot row of id 1 is a change with its values."""
    (row,) = staged(spark, [captured(PG, "items", "r", 1)], ITEMS)
    assert (row["_kind"], row["id"], row["qty"], row["active"], row["price"], row["birth"]) == (
        "change",
        1,
        3,
        True,
        Decimal("1234.50"),
        date(2024, 1, 2),
    )


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("id", "1.9"),  # a bigint key with a fraction: was staged as key 1, overwriting that row
        ("qty", "2.75"),  # was 2
        ("qty", '"3.99"'),  # text: was 3
        ("qty", "3.0e0"),  # an exponent
        ("qty", "2147483648"),  # beyond an int
        ("active", '"yes"'),  # was true
        ("active", "2"),  # a TINYINT(1) holding 2 is not a boolean
        ("birth", "19724.5"),  # a date's days with a fraction: was 2024-01-02
        ("birth", '"2024-01-02T12:00:00"'),  # a date with a time: the time was dropped
        ("created_ms", "1704164645123.9"),  # a millisecond count with a fraction: was truncated
        ("price", '"1234.567"'),  # with decimal_handling="string" below: was rounded to 1234.57
    ],
)
def test_a_value_the_declared_type_cannot_hold_exactly_is_wrong_type(spark, column: str, value: str) -> None:
    """Hostile values, one per line: the captured id 1 snapshot row with `column` replaced by `value`."""
    line = edited(captured(PG, "items", "r", 1), ("after", column), value)
    mode = "string" if column == "price" else "precise"
    (row,) = staged(spark, [line], ITEMS, decimal_handling=mode)
    assert (row["_kind"], row["_reason"], row["id"]) == ("malformed", "wrong_type", None), line


def test_decimals_with_more_digits_than_declared_are_wrong_type_not_rounded(spark) -> None:
    """Captured lines as the connector wrote them, declared with a smaller scale than the source's.

    PostgreSQL numeric(12,2) declared decimal(12,1): 1234.50 fits, -0.01 would round (Connect Decimal bytes,
    scale 2 from the schema). The unconstrained numeric 3.14159265358979323846 (VariableScaleDecimal) declared
    decimal(38,10) would round.
    """
    lines = [captured("postgres/schemas-precise", "items", "r", i) for i in (1, 2)]
    rows = staged(spark, lines, {"id": "bigint", "price": "decimal(12,1)"})
    assert [(r["id"], r["price"], r["_reason"]) for r in rows] == [
        (1, Decimal("1234.5"), None),
        (None, None, "wrong_type"),
    ]
    rows = staged(spark, [captured(PG, "items", "r", 1)], {"id": "bigint", "ratio": "decimal(38,10)"})
    assert verdicts(rows) == [("malformed", "wrong_type")]
    rows = staged(spark, [captured(PG, "items", "r", 1)], {"id": "bigint", "ratio": "decimal(38,20)"})
    assert rows[0]["ratio"] == Decimal("3.14159265358979323846")


def test_float_overflow_and_sub_microsecond_times_are_wrong_type(spark) -> None:
    """A double beyond a float's range was staged as infinity (hostile value: price 1e39 in a captured
    `double` mode line); a microsecond count read as nanoseconds has digits below a microsecond, which
    Spark's timestamp would drop (the captured created_us declared timestamp_nanos); a ZonedTimestamp with
    a seventh fraction digit (hostile value)."""
    double = captured("postgres/noschemas-double", "items", "r", 1)
    rows = staged(spark, [double, edited(double, ("after", "price"), "1e39")], {"id": "bigint", "price": "float"})
    assert [(r["price"], r["_reason"]) for r in rows] == [(1234.5, None), (None, "wrong_type")]
    rows = staged(spark, [captured(PG, "items", "r", 1)], {"id": "bigint", "created_us": "timestamp_nanos"})
    assert verdicts(rows) == [("malformed", "wrong_type")]
    zoned = edited(captured(PG, "items", "r", 1), ("after", "created_tz"), '"2024-01-02T03:04:05.1000001Z"')
    rows = staged(spark, [zoned], {"id": "bigint", "created_tz": "timestamp"})
    assert verdicts(rows) == [("malformed", "wrong_type")]


def test_positions_and_source_times_are_read_exactly(spark) -> None:
    """Hostile values in captured lines: an LSN with a fraction was read as the LSN before it; a
    `source.ts_us` with a fraction was truncated."""
    line = captured(PG, "items", "r", 1)
    rows = staged(spark, [edited(line, ("source", "lsn"), "39547616.5")], ITEMS)
    assert verdicts(rows) == [("malformed", "version_out_of_range")]
    rows = staged(spark, [edited(line, ("source", "ts_us"), "1795381774847178.5")], ITEMS)
    assert verdicts(rows) == [("malformed", "wrong_type")]
    mysql = captured("mysql/noschemas-precise", "items", "r", 1)
    rows = staged(spark, [edited(mysql, ("source", "pos"), "5765.5")], ITEMS, flavour="mysql")
    assert verdicts(rows) == [("malformed", "version_out_of_range")]


@pytest.mark.parametrize(
    ("variant", "flavour", "field"),
    [
        ("postgres/noschemas-precise", "postgres", "lsn"),
        ("postgres/schemas-precise", "postgres", "lsn"),
        ("mysql/noschemas-precise", "mysql", "pos"),
        ("mysql/noschemas-precise", "mysql", "file"),
    ],
)
def test_a_truncate_without_a_position_is_quarantined(spark, variant: str, flavour: str, field: str) -> None:
    """The captured truncate stages with its position; with the position's field removed (hostile), it
    was staged as a truncate with a NULL `_version`, which a mart applied at 0."""
    line = captured(variant, "audit", "t")
    rows = staged(
        spark, [line, edited(line, ("source", field), None)], {"id": "int", "note": "string"}, flavour=flavour
    )
    assert verdicts(rows) == [("truncate", None), ("malformed", "null_version")]
    assert rows[0]["_version"] is not None and rows[1]["_version"] is None and rows[1]["sign"] is None
    assert rows[1]["_raw"] == edited(line, ("source", field), None)


def test_a_text_value_longer_than_jacksons_default_limit_stages(spark) -> None:
    """Jackson refuses strings over 20,000,000 characters by default: a 25,000,000-character body (hostile
    value in the captured line) was quarantined as bad_json."""
    body = "x" * 25_000_000
    line = edited(captured(PG, "items", "r", 1), ("after", "body"), json.dumps(body))
    df = staged(spark, [line], {"id": "bigint", "body": "string"})
    assert (df[0]["_kind"], df[0]["_reason"], len(df[0]["body"] or "")) == ("change", None, len(body))


def test_text_that_is_not_base64_is_not_decoded_as_bytes(spark) -> None:
    """Spark's unbase64 skips characters outside the alphabet. A precise-mode decimal sent as the text
    "12.34" (hostile value in the captured line) was staged as the bytes of "1234" (-26588.24 at scale 2);
    the captured `name` declared binary was staged as bytes of its letters."""
    line = captured(PG, "items", "r", 1)
    rows = staged(
        spark, [line, edited(line, ("after", "price"), '"12.34"')], {"id": "bigint", "price": "decimal(12,2)"}
    )
    assert [(r["price"], r["_reason"]) for r in rows] == [(Decimal("1234.50"), None), (None, "wrong_type")]
    rows = staged(spark, [line], {"id": "bigint", "name": "binary"})
    assert verdicts(rows) == [("malformed", "wrong_type")]


def test_decimal_bytes_in_a_float_column_without_a_schema_are_wrong_type(spark) -> None:
    """The captured `precise` price (Connect Decimal bytes, 1234.50 at the source's scale 2) declared `double`
    on a topic without schemas: no scale is known, and it was read at scale 0, as 123450.0. With the schema
    the line carries the scale, and the value stages."""
    rows = staged(spark, [captured(PG, "items", "r", 1)], {"id": "bigint", "price": "double"})
    assert [(r["price"], r["_reason"]) for r in rows] == [(None, "wrong_type")]
    rows = staged(spark, [captured("postgres/schemas-precise", "items", "r", 1)], {"id": "bigint", "price": "double"})
    assert [(r["price"], r["_reason"]) for r in rows] == [(1234.5, None)]


@pytest.mark.parametrize(
    "value",
    [
        '"+10000-01-01T00:00:00Z"',  # past year 9999: was staged
        '"0000-06-01T00:00:00Z"',  # before year 1
        '"2024"',  # not an instant: was 2024-01-01
        '"2024-01-02T03:04:05"',  # no offset: was read in the session's time zone
        '"2024-01-02"',
    ],
)
def test_timestamp_text_that_is_not_an_instant_in_range_is_wrong_type(spark, value: str) -> None:
    """The captured ZonedTimestamp `created_tz` replaced by `value` (hostile); the captured one stages."""
    line = captured(PG, "items", "r", 1)
    rows = staged(
        spark, [line, edited(line, ("after", "created_tz"), value)], {"id": "bigint", "created_tz": "timestamp"}
    )
    assert verdicts(rows) == [("change", None), ("malformed", "wrong_type")]


def test_an_empty_byte_string_is_no_decimal(spark) -> None:
    """A `precise` decimal sent as "" (no bytes, hostile value in the captured line) was staged as 0.00."""
    line = captured(PG, "items", "r", 1)
    rows = staged(spark, [edited(line, ("after", "price"), '""')], {"id": "bigint", "price": "decimal(12,2)"})
    assert [(r["price"], r["_reason"]) for r in rows] == [(None, "wrong_type")]
    ratio = edited(line, ("after", "ratio"), '{"scale":20,"value":""}')
    rows = staged(spark, [ratio], {"id": "bigint", "ratio": "decimal(38,20)"})
    assert [(r["ratio"], r["_reason"]) for r in rows] == [(None, "wrong_type")]


def test_text_that_is_not_utf8_is_wrong_type_not_replacement_characters(spark, tmp_path) -> None:
    """The captured line with a Latin-1 byte in its `name` (hostile), landed as a file: Spark's reader decoded
    it with a replacement character, and `name` was staged as "caf\ufffd". It is wrong_type; the same byte in
    a field staging does not read leaves the line's values as they are, and a replacement character the line
    itself holds (valid UTF-8) is a character like any other."""
    from vcmt_staging.topic import stage_topic

    line = captured(PG, "items", "r", 1)
    broken = edited(line, ("after", "name"), '"__latin1__"').encode().replace(b"__latin1__", b"caf\xe9")
    elsewhere = edited(line, ("after", "body"), '"__latin1__"').encode().replace(b"__latin1__", b"caf\xe9")
    sent = edited(line, ("after", "name"), '"caf\ufffd"').encode()
    folder = tmp_path / "_batch_id=0"
    folder.mkdir()
    (folder / "items.json").write_bytes(b"\n".join([line.encode(), broken, elsewhere, sent]) + b"\n")
    rows = stage_topic(spark, str(tmp_path), "postgres", ["id"], {"id": "bigint", "name": "string"}).collect()
    name = 'alpha ✓ Zoë "q", comma'
    assert [(r["_kind"], r["_reason"], r["name"]) for r in rows] == [
        ("change", None, name),
        ("malformed", "wrong_type", None),
        ("change", None, name),
        ("change", None, "caf\ufffd"),
    ]
