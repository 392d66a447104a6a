"""vcmt_staging decoding on real Spark, on lines built from the documented encodings.

Each line is a Debezium envelope written here by hand (bare, or wrapped in a
Kafka Connect `{"schema", "payload"}` with the documented logical types), so
every expectation is the encoding's definition, not the decoder's output.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from vcmt_staging import debezium as dbz
from vcmt_staging import topic
from vcmt_staging.topic import decode_lines, stage_topic

pytestmark = pytest.mark.spark


# -- building lines ----------------------------------------------------------------------------


def b64(unscaled: int) -> str:
    """Connect's Decimal bytes: the unscaled value, big-endian two's complement, minimal length."""
    length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def envelope(op: str = "c", after: dict | None = None, before: dict | None = None, **source: Any) -> dict:
    src = {"lsn": 100, "ts_ms": 1_700_000_000_000, **source}
    return {"before": before, "after": after, "source": src, "op": op, "ts_ms": 1_700_000_000_500}


def field(name: str, type_: str, logical: str | None = None, **parameters: str) -> dict:
    f: dict[str, Any] = {"field": name, "type": type_, "optional": True}
    if logical:
        f["name"] = logical
    if parameters:
        f["parameters"] = parameters
    return f


def wrap(payload: dict | None, fields: list[dict]) -> dict:
    value = {"type": "struct", "fields": fields, "optional": True, "name": "db.public.t.Value"}
    schema = {
        "type": "struct",
        "name": "db.public.t.Envelope",
        "fields": [
            {**value, "field": "before"},
            {**value, "field": "after"},
            {"type": "struct", "field": "source", "fields": []},
            {"type": "string", "field": "op"},
        ],
    }
    return {"schema": schema, "payload": payload}


def decode(
    spark, lines: list[Any], columns: dict[str, str], key=("id",), flavour="postgres", **kw: Any
) -> list[dict[str, Any]]:
    texts = [line if isinstance(line, str) or line is None else json.dumps(line) for line in lines]
    df = spark.createDataFrame([(t, "f.json", 0) for t in texts], "raw string, _source_file string, _batch_id int")
    rows = decode_lines(df, flavour, list(key), columns, **kw).collect()
    return [r.asDict() for r in rows]


# -- decimals ----------------------------------------------------------------------------------


def test_decimal_bytes_with_scale_from_schema_or_declared(spark) -> None:
    fields = [field("id", "int64"), field("amount", "bytes", dbz._DECIMAL_LOGICAL, scale="2")]
    big = -(10**37) + 7  # 16 bytes: the widest DECIMAL(38) value
    rows = decode(
        spark,
        [
            wrap(envelope(after={"id": 1, "amount": "/w=="}), fields),  # -1 at scale 2 (the documented example)
            wrap(envelope(after={"id": 2, "amount": b64(12345)}), fields),
            envelope(after={"id": 3, "amount": "/w=="}),  # no schema: the declared scale (2)
            envelope(after={"id": 4, "amount": b64(-12345)}),
            envelope(after={"id": 5, "amount": b64(0)}),
            envelope(after={"id": 6, "amount": b64(127)}),
            envelope(after={"id": 7, "amount": b64(128)}),  # needs a leading 0x00 byte
            envelope(after={"id": 8, "amount": b64(-32768)}),
        ],
        {"id": "bigint", "amount": "decimal(12,2)"},
    )
    got = {r["id"]: r["amount"] for r in rows}
    assert got == {
        1: Decimal("-0.01"),
        2: Decimal("123.45"),
        3: Decimal("-0.01"),
        4: Decimal("-123.45"),
        5: Decimal("0.00"),
        6: Decimal("1.27"),
        7: Decimal("1.28"),
        8: Decimal("-327.68"),
    }
    assert all(r["_kind"] == "change" and r["_reason"] is None for r in rows)

    rows = decode(spark, [envelope(after={"id": 1, "amount": b64(big)})], {"id": "bigint", "amount": "decimal(38,0)"})
    assert rows[0]["amount"] == Decimal(big)


def test_decimal_bytes_at_the_edges_of_decimal38(spark) -> None:
    """Negative 16-byte values next to the limit, sign padding beyond 16 bytes, and what does not fit."""
    limit = 10**38 - 1
    padded = lambda unscaled, pad: base64.b64encode(pad + unscaled.to_bytes(16, "big", signed=True)).decode()  # noqa: E731
    rows = decode(
        spark,
        [
            envelope(after={"id": 1, "a": b64(-limit + 255)}),
            envelope(after={"id": 2, "a": b64(-limit)}),
            envelope(after={"id": 3, "a": b64(limit)}),
            envelope(after={"id": 4, "a": padded(1, b"\x00")}),  # 17 bytes: sign padding, still 1
            envelope(after={"id": 5, "a": padded(-1, b"\xff\xff")}),
            envelope(after={"id": 6, "a": padded(1, b"\x01")}),  # 17 bytes that are not padding: too large
            envelope(after={"id": 7, "a": b64(limit + 1)}),
        ],
        {"id": "bigint", "a": "decimal(38,0)"},
    )
    assert [(r["a"], r["_reason"]) for r in rows] == [
        (Decimal(-limit + 255), None),
        (Decimal(-limit), None),
        (Decimal(limit), None),
        (Decimal(1), None),
        (Decimal(-1), None),
        (None, "wrong_type"),
        (None, "wrong_type"),
    ]


def test_decimal_bytes_of_every_length_read_as_two_s_complement(spark) -> None:
    """Up to 8 bytes take the 64-bit path, longer ones the 16-byte one: both read every length the
    same as Python does, at the sign and length boundaries and with redundant sign bytes."""
    values = []
    for n in range(0, 18):
        bits = 8 * n
        values += (
            [0, 1, -1]
            if n == 0
            else [(1 << (bits - 1)) - 1, -(1 << (bits - 1)), (1 << (bits - 2)) + 3, -(1 << (bits - 2)) - 5]
        )
    encodings = {
        base64.b64encode(v.to_bytes(max(1, (v + (v < 0)).bit_length() // 8 + 1), "big", signed=True)).decode(): v
        for v in values
    }
    for pad_to in (3, 8, 9, 16):  # non-minimal: sign bytes in front, up to and across the 8-byte boundary
        for v in (5, -5, 300, -300):
            encodings[base64.b64encode(v.to_bytes(pad_to, "big", signed=True)).decode()] = v
    encodings[""] = None  # no bytes at all: Connect never writes it; no number (it was read as zero)
    lines = [envelope(after={"id": i, "a": text}) for i, text in enumerate(encodings)]
    rows = decode(spark, lines, {"id": "bigint", "a": "decimal(38,0)"})
    # In the lines' order; a line that does not fit has no typed columns, its id included.
    expected = [
        (Decimal(v), None) if v is not None and abs(v) < 10**38 else (None, "wrong_type") for v in encodings.values()
    ]
    assert [(r["a"], r["_reason"]) for r in rows] == expected
    assert [r["id"] for r in rows if r["_reason"] is None] == [i for i, (_, why) in enumerate(expected) if not why]
    assert any(len(base64.b64decode(t)) == 8 for t in encodings) and any(
        len(base64.b64decode(t)) == 9 for t in encodings
    )


def test_not_finite_doubles_are_not_base64(spark) -> None:
    """A double column without a schema: "NaN" and the infinities are values, also where Spark turned a
    JSON number beyond a double into "Infinity"; `precise` decimal handling does not make them bytes."""
    rows = decode(
        spark,
        [
            envelope(after={"id": 1, "x": "NaN"}),
            envelope(after={"id": 2, "x": "Infinity"}),
            envelope(after={"id": 3, "x": "-Infinity"}),
            '{"op": "c", "after": {"id": 4, "x": 1e400}, "source": {"lsn": 1}}',
            envelope(after={"id": 5, "x": 2.5}),
        ],
        {"id": "bigint", "x": "double"},
    )
    got = [r["x"] for r in rows]
    assert got[0] != got[0] and got[1:] == [float("inf"), float("-inf"), float("inf"), 2.5]
    assert all(r["_reason"] is None for r in rows)


def test_schema_scale_wins_over_declared_scale(spark) -> None:
    """The schema says the bytes are at scale 3, whatever the declared scale (`test_staging_exact_values`: what
    would round is wrong_type)."""
    fields = [field("id", "int64"), field("amount", "bytes", dbz._DECIMAL_LOGICAL, scale="3")]
    rows = decode(
        spark,
        [wrap(envelope(after={"id": 1, "amount": b64(12345)}), fields)],
        {"id": "bigint", "amount": "decimal(12,3)"},
    )
    assert rows[0]["amount"] == Decimal("12.345")


def test_variable_scale_struct_string_and_double_modes(spark) -> None:
    declared = {"id": "bigint", "amount": "decimal(20,4)"}
    rows = decode(
        spark,
        [
            # io.debezium.data.VariableScaleDecimal (unconstrained NUMERIC): scale travels with each value.
            envelope(after={"id": 1, "amount": {"scale": 3, "value": b64(12345)}}),
            envelope(after={"id": 2, "amount": {"scale": 0, "value": b64(-7)}}),
            # decimal.handling.mode=double: a JSON number.
            envelope(after={"id": 3, "amount": 12.5}),
        ],
        declared,
    )
    assert {r["id"]: r["amount"] for r in rows} == {1: Decimal("12.345"), 2: Decimal("-7"), 3: Decimal("12.5")}

    # decimal.handling.mode=string: with a schema the field's type says so; without one, the declared mode.
    fields = [field("id", "int64"), field("amount", "string")]
    rows = decode(spark, [wrap(envelope(after={"id": 1, "amount": "-12.3400"}), fields)], declared)
    assert rows[0]["amount"] == Decimal("-12.34")
    rows = decode(spark, [envelope(after={"id": 1, "amount": "99.5"})], declared, decimal_handling="string")
    assert rows[0]["amount"] == Decimal("99.5")
    # A double column: a JSON number as it is; Decimal bytes at the schema's scale.
    rows = decode(
        spark,
        [envelope(after={"id": 1, "amount": 12.5})],
        {"id": "bigint", "amount": "double"},
        decimal_handling="double",
    )
    assert rows[0]["amount"] == 12.5
    fields = [field("id", "int64"), field("amount", "bytes", dbz._DECIMAL_LOGICAL, scale="2")]
    rows = decode(
        spark, [wrap(envelope(after={"id": 1, "amount": "/w=="}), fields)], {"id": "bigint", "amount": "double"}
    )
    assert rows[0]["amount"] == -0.01


# -- times -------------------------------------------------------------------------------------


def test_timestamps_dates_and_times_by_logical_type(spark) -> None:
    t = datetime(2026, 11, 22, 10, 15, 30, 123456, tzinfo=UTC)
    micros = int(t.timestamp()) * 1_000_000 + 123456
    fields = [
        field("id", "int64"),
        field("ms", "int64", "io.debezium.time.Timestamp"),
        field("us", "int64", "io.debezium.time.MicroTimestamp"),
        field("ns", "int64", "io.debezium.time.NanoTimestamp"),
        field("zoned", "string", "io.debezium.time.ZonedTimestamp"),
        field("day", "int32", "io.debezium.time.Date"),
        field("tod_ms", "int32", "io.debezium.time.Time"),
        field("tod_us", "int64", "io.debezium.time.MicroTime"),
    ]
    after = {
        "id": 1,
        "ms": micros // 1000,
        "us": micros,
        "ns": micros * 1000,
        "zoned": "2026-11-22T10:15:30.123456Z",
        "day": -1,
        "tod_ms": 3_723_004,
        "tod_us": 3_723_004_005,
    }
    declared = {
        "id": "bigint",
        "ms": "timestamp",
        "us": "timestamp",
        "ns": "timestamp",
        "zoned": "timestamp",
        "day": "date",
        "tod_ms": "time",
        "tod_us": "time",
    }
    (row,) = decode(spark, [wrap(envelope(after=after), fields)], declared)
    assert row["ms"] == t.replace(microsecond=123000).replace(tzinfo=None)
    assert row["us"] == row["ns"] == row["zoned"] == t.replace(tzinfo=None)
    assert row["day"] == date(1969, 12, 31)
    assert (row["tod_ms"], row["tod_us"]) == (3_723_004_000, 3_723_004_005)

    # Without a schema the declared unit decides.
    (bare,) = decode(
        spark,
        [envelope(after={k: v for k, v in after.items() if k != "zoned"})],
        {
            "id": "bigint",
            "ms": "timestamp_millis",
            "us": "timestamp_micros",
            "ns": "timestamp_nanos",
            "day": "date",
            "tod_ms": "time_millis",
            "tod_us": "time_micros",
        },
    )
    assert {k: bare[k] for k in ("ms", "us", "ns", "day", "tod_ms", "tod_us")} == {
        k: row[k] for k in ("ms", "us", "ns", "day", "tod_ms", "tod_us")
    }


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-22T10:15:30Z", datetime(2026, 11, 22, 10, 15, 30)),
        ("2026-11-22T10:15:30.1Z", datetime(2026, 11, 22, 10, 15, 30, 100000)),
        ("2026-11-22T10:15:30.123Z", datetime(2026, 11, 22, 10, 15, 30, 123000)),
        ("2026-11-22T10:15:30.123456Z", datetime(2026, 11, 22, 10, 15, 30, 123456)),
        ("2026-11-22T12:15:30.5+02:00", datetime(2026, 11, 22, 10, 15, 30, 500000)),
        ("1960-01-01T00:00:00Z", datetime(1960, 1, 1)),
    ],
)
def test_zoned_timestamp_fraction_widths_and_offsets(spark, text: str, expected: datetime) -> None:
    (row,) = decode(spark, [envelope(after={"id": 1, "ts": text})], {"id": "bigint", "ts": "timestamp"})
    assert row["ts"] == expected and row["_reason"] is None


def test_out_of_range_timestamp_is_wrong_type_not_a_failure(spark) -> None:
    rows = decode(spark, [envelope(after={"id": 1, "ts": 10**18})], {"id": "bigint", "ts": "timestamp_millis"})
    assert rows[0]["_kind"] == "malformed" and rows[0]["_reason"] == "wrong_type"


# -- other types -------------------------------------------------------------------------------


def test_booleans_uuid_json_and_bytes(spark) -> None:
    fields = [
        field("id", "int64"),
        field("ok", "boolean"),
        field("u", "string", "io.debezium.data.Uuid"),
        field("doc", "string", "io.debezium.data.Json"),
        field("blob", "bytes"),
    ]
    after = {
        "id": 1,
        "ok": True,
        "u": "4f1c2e8a-0000-4000-8000-000000000001",
        "doc": '{"a": [1, 2]}',
        "blob": base64.b64encode(b"\x00\xff").decode(),
    }
    (row,) = decode(
        spark,
        [wrap(envelope(after=after), fields)],
        {"id": "bigint", "ok": "boolean", "u": "uuid", "doc": "json", "blob": "binary"},
    )
    assert (row["ok"], row["u"], row["doc"], bytes(row["blob"])) == (True, after["u"], '{"a": [1, 2]}', b"\x00\xff")


# -- envelopes and event kinds -----------------------------------------------------------------


def test_wrapped_and_bare_envelopes_stage_the_same(spark) -> None:
    declared = {"id": "bigint", "name": "string"}
    e = envelope(after={"id": 1, "name": "a"}, lsn=42)
    rows = decode(spark, [e, wrap(e, [field("id", "int64"), field("name", "string")])], declared)
    strip = [{k: v for k, v in r.items() if k not in ("_raw",)} for r in rows]
    assert strip[0] == strip[1]
    assert (rows[0]["_version"], rows[0]["sign"], rows[0]["_op"]) == (42 * 2 + 1, 1, "c")
    assert rows[0]["_source_ts"] == datetime(2023, 11, 14, 22, 13, 20)


def test_every_kind_is_recognised(spark) -> None:
    lines = [
        envelope(after={"id": 1, "name": "a"}),
        "",  # tombstone as the S3 sink may land it
        "null",  # tombstone as JSON
        wrap(None, []),  # tombstone with schemas enabled
        {"ts_ms": 1_700_000_000_000},  # heartbeat
        wrap({"ts_ms": 1}, []) | {"schema": {"type": "struct", "name": "io.debezium.connector.common.Heartbeat"}},
        {"status": "BEGIN", "id": "571:53195829", "event_count": None, "data_collections": None, "ts_ms": 1},
        {"status": "END", "id": "571:53195829", "event_count": 2, "data_collections": [], "ts_ms": 1},
        {"source": {}, "databaseName": "db", "ddl": "ALTER TABLE t ADD c INT", "tableChanges": []},
        envelope(op="m", after=None) | {"message": {"prefix": "p", "content": "eA=="}},
        envelope(op="t", after=None),
        "{not json",
        envelope(op="x", after={"id": 1}),
        {"hello": "world", "more": 1},
    ]
    rows = decode(spark, lines, {"id": "bigint", "name": "string"})
    kinds = [(r["_kind"], r["_reason"]) for r in rows]
    assert kinds == [
        ("change", None),
        ("tombstone", None),
        ("tombstone", None),
        ("tombstone", None),
        ("heartbeat", None),
        ("heartbeat", None),
        ("transaction", None),
        ("transaction", None),
        ("schema_change", None),
        ("message", None),
        ("truncate", None),
        ("malformed", "bad_json"),
        ("malformed", "unknown_op"),
        ("malformed", "unknown_op"),
    ]
    # Raw text is kept for what needs a look (malformed, truncate), typed values only for changes.
    assert [r["_raw"] is not None for r in rows] == [False] * 10 + [True] * 4
    assert all(r["id"] is None for r in rows[1:])
    # Only a truncate keeps a position besides the change: the mart removes what is at or below it.
    assert [(r["_kind"], r["sign"]) for r in rows if r["sign"] is not None] == [("change", 1), ("truncate", 1)]
    truncate = rows[10]
    assert (
        truncate["_version"] is not None
        and truncate["_version"] == 2 * envelope(op="t", after=None)["source"]["lsn"] + 1
    )


def test_lines_that_are_not_exactly_one_json_envelope_are_bad_json(spark) -> None:
    """The whole line must be one strict JSON value: nothing after it is ignored, nothing lenient accepted."""
    one = json.dumps(envelope(after={"id": 1, "name": "a"}))
    rows = decode(
        spark,
        [
            one + one,  # two envelopes run together: neither may be staged as if the other were not there
            one + "," + one,
            one + " trailing",
            one[:-5],  # a cut line
            str(envelope(after={"id": 1, "name": "a"})),  # single quotes (a Python dict's repr)
            one.replace('"lsn": 100', '"lsn": NaN'),
            one.replace('"lsn": 100', '"lsn": 0100'),
            one,
        ],
        {"id": "bigint", "name": "string"},
    )
    assert [(r["_kind"], r["_reason"]) for r in rows] == [("malformed", "bad_json")] * 7 + [("change", None)]
    assert all(r["_raw"] for r in rows[:7]) and rows[7]["id"] == 1


def test_column_names_spark_or_parquet_cannot_hold_are_refused(spark) -> None:
    with pytest.raises(ValueError, match=r"differ only in case"):
        decode(spark, [envelope(after={"id": 1})], {"id": "bigint", "Name": "string", "name": "string"})
    for name in ("sign", "SIGN", "_Kind", "_VCMT_one"):  # Spark would take them for the staged columns
        with pytest.raises(ValueError, match=r"collide with the staged change-event columns"):
            decode(spark, [envelope(after={"id": 1})], {"id": "bigint", name: "string"})
    for name in ("a.b", "a b", "", "a`b", "x=y"):
        with pytest.raises(ValueError, match=r"a declared name must be non-empty"):
            decode(spark, [envelope(after={"id": 1})], {"id": "bigint", name: "string"})
    # Quotes and brackets are fine now: names are struct fields, not JSON paths.
    (row,) = decode(spark, [envelope(after={"id": 1, "it's[x]": "v"})], {"id": "bigint", "it's[x]": "string"})
    assert row["it's[x]"] == "v" and row["_reason"] is None


def test_quarantine_reasons_in_order(spark) -> None:
    rows = decode(
        spark,
        [
            envelope(after={"name": "no key"}),
            envelope(after=None),
            envelope(after={"id": 1}, lsn=None),
            {k: v for k, v in envelope(after={"id": 1}).items() if k != "source"},
            envelope(after={"id": "not a number"}),
            envelope(after={"id": 1, "n": "x"}),
            envelope(after={"id": 1}, lsn=-5),
        ],
        {"id": "bigint", "n": "int"},
    )
    assert [r["_reason"] for r in rows] == [
        "null_key",
        "null_key",
        "null_version",
        "null_version",
        "wrong_type",
        "wrong_type",
        "version_out_of_range",
    ]
    assert all(r["_kind"] == "malformed" and r["_raw"] for r in rows)


def test_primary_key_change(spark) -> None:
    """Debezium sends a PK change as a delete of the old key, a tombstone and a create of the new key."""
    rows = decode(
        spark,
        [
            envelope(op="d", before={"id": 1, "name": "a"}, after=None, lsn=500),
            "",
            envelope(op="c", before=None, after={"id": 2, "name": "a"}, lsn=500),
        ],
        {"id": "bigint", "name": "string"},
    )
    assert [(r["_kind"], r["id"], r["sign"]) for r in rows] == [
        ("change", 1, -1),
        ("tombstone", None, None),
        ("change", 2, 1),
    ]


# -- unavailable values (TOAST) ----------------------------------------------------------------


def test_unavailable_value_is_never_a_value(spark) -> None:
    fields = [field("id", "int64"), field("note", "string"), field("blob", "bytes")]
    rows = decode(
        spark,
        [
            envelope(op="u", after={"id": 1, "note": dbz.UNAVAILABLE, "blob": dbz.UNAVAILABLE_BASE64}),
            wrap(envelope(op="u", after={"id": 2, "note": dbz.UNAVAILABLE, "blob": None}), fields),
            envelope(op="u", after={"id": 3, "note": None, "blob": None}),
            envelope(op="u", after={"id": dbz.UNAVAILABLE}),
        ],
        {"id": "bigint", "note": "string", "blob": "binary"},
        key=("id",),
    )
    assert [(r["id"], r["note"], r["blob"], r["_unavailable"]) for r in rows[:3]] == [
        (1, None, None, ["note", "blob"]),
        (2, None, None, ["note"]),
        (3, None, None, []),
    ]
    assert all(r["_reason"] is None for r in rows[:3])
    # A key is never unavailable in Debezium; if it were, it is no key.
    assert (rows[3]["_kind"], rows[3]["_reason"]) == ("malformed", "null_key")


# -- versions ----------------------------------------------------------------------------------


def test_postgres_version_orders_snapshot_before_change_at_same_lsn(spark) -> None:
    rows = decode(
        spark,
        [
            envelope(op="r", after={"id": 1}, lsn=1000, snapshot="true"),
            envelope(op="r", after={"id": 2}, lsn=1000, snapshot="last"),
            envelope(op="u", after={"id": 1}, lsn=1000),
            envelope(op="u", after={"id": 1}, lsn=1001),
            envelope(op="u", after={"id": 1}, lsn=dbz.LSN_MAX),
        ],
        {"id": "bigint"},
    )
    versions = [r["_version"] for r in rows]
    assert versions[0] == versions[1] == 2000 and versions[2] == 2001 and versions[3] == 2003
    assert versions[4] == dbz.LSN_MAX * 2 + 1 == 2**63 - 1


def test_mysql_version_packs_file_pos_row(spark) -> None:
    def src(file: str | None, pos: int | None, row: int = 0) -> dict:
        return {"file": file, "pos": pos, "row": row, "lsn": None, "server_id": 1}

    rows = decode(
        spark,
        [
            envelope(after={"id": 1}, **src("mysql-bin.000003", 154, 2)),
            envelope(after={"id": 1}, **src("mysql-bin.000003", 154, 3)),
            envelope(after={"id": 1}, **src("mysql-bin.000003", 4_294_967_295, 4095)),
            envelope(after={"id": 1}, **src("mysql-bin.000004", 4, 0)),
            envelope(after={"id": 1}, **src("mysql-bin.524287", 4_294_967_295, 4095)),
            envelope(after={"id": 1}, **src("mysql-bin.000004", 4, 4096)),
            envelope(after={"id": 1}, **src("mysql-bin.524288", 4, 0)),
            envelope(after={"id": 1}, **src(None, 4, 0)),
        ],
        {"id": "bigint"},
        flavour="mysql",
    )
    v = [r["_version"] for r in rows]
    assert v[0] == (3 << 44) | (154 << 12) | 2
    assert v[0] < v[1] < v[2] < v[3] < v[4] == 2**63 - 1
    assert [r["_reason"] for r in rows[5:]] == ["version_out_of_range", "version_out_of_range", "null_version"]


# -- known schema prefixes ---------------------------------------------------------------------


def test_schema_prefix_is_the_text_up_to_the_payload_of_a_wrapped_line() -> None:
    fields = [field("id", "int64", doc='a "payload": {"x": 1} in a string')]
    line = json.dumps(wrap(envelope(after={"id": 1}), fields))
    prefix = dbz.schema_prefix(line)
    assert prefix == line[: line.index('"payload": {"before"') + len('"payload":')]
    compact = json.dumps(wrap(envelope(after={"id": 1}), fields), separators=(",", ":"))
    assert dbz.schema_prefix(compact) == compact[: compact.index('"payload":{"before"') + len('"payload":')]
    assert dbz.schema_prefix(" \t" + line) == " \t" + prefix  # JSON whitespace in front is part of it
    for other in (
        json.dumps(envelope(after={"id": 1})),  # bare: no schema
        json.dumps({"payload": None, "schema": {"type": "struct"}}),  # payload first
        json.dumps({"schema": {"type": "struct"}, "op": "c", "payload": None}),  # a third key between
        '{"schema": {"n": NaN}, "payload": null}',  # not JSON
        '{"schema": {"n": 1}',
        "",
        "null",
        "\u00a0" + line,  # cut; not an object; not JSON whitespace
        '{"schema": ' + "[" * 100_000,
    ):  # nested deeper than Python's reader goes
        assert dbz.schema_prefix(other) is None, other


def test_lines_with_a_known_schema_prefix_stage_exactly_as_parsed_whole(spark) -> None:
    """The payload-only parse of a known prefix's lines gives the same rows as parsing them whole, for
    good lines and for every way a line can go wrong after (or instead of) the prefix."""
    fields = [
        field("id", "int64"),
        field("amount", "bytes", dbz._DECIMAL_LOGICAL, scale="2"),
        field("at", "int64", "io.debezium.time.MicroTimestamp"),
    ]
    after = {"id": 1, "amount": b64(12345), "at": 1_700_000_000_000_000}
    good = json.dumps(wrap(envelope(after=after), fields))
    prefix = dbz.schema_prefix(good)
    rest = good[len(prefix) :]
    # A prefix Python's reader takes and Spark's refuses (a number longer than Jackson allows).
    refused = '{"schema": {"name": "n", "fields": [], "n": ' + "1" * 1200 + '}, "payload":'
    assert dbz.schema_prefix(refused + " null}") == refused
    lines = [
        good,
        json.dumps(wrap(envelope(op="d", before={"id": 2}), fields)),
        json.dumps(wrap(envelope(after=after), fields), separators=(",", ":")),  # same schema, other text
        json.dumps(
            wrap(envelope(after=after), [*fields[:1], field("amount", "bytes", dbz._DECIMAL_LOGICAL, scale="3")])
        ),  # another schema
        json.dumps(envelope(after=after)),  # bare
        prefix + " null}",  # tombstone with a schema
        prefix + rest[:-9],  # cut
        prefix + rest + ' {"op": "c"}',  # two values run together
        prefix + rest + " 7",
        prefix + rest[:-1] + ', "op": "u"}',  # an envelope field after the payload, at the top
        prefix + rest[:-1] + ', "schema": {"name": "x.Heartbeat"}}',  # the schema named again
        prefix + ' "x"}',
        prefix + " 5}",
        prefix + "}",
        prefix,
        prefix + " {}}",
        prefix + ' {"op": "t"}}',
        refused + rest,
        refused + " null}",
        "",
        "null",
        "{",
        "[]",
    ]
    columns = {"id": "bigint", "amount": "decimal(12,2)", "at": "timestamp"}
    whole = decode(spark, lines, columns)
    assert decode(spark, lines, columns, prefix=prefix) == whole
    assert decode(spark, lines, columns, prefix=refused) == whole
    assert whole[0]["amount"] == Decimal("123.45") and whole[0]["_kind"] == "change"
    assert [r["_reason"] for r in whole[-6:-4]] == ["bad_json", "bad_json"]  # Spark refuses the long number
    assert [r["_kind"] for r in whole[5:9]] == ["tombstone", "malformed", "malformed", "malformed"]
    # A prefix of more bytes than characters: the line is cut after the prefix's bytes.
    wide = dbz.schema_prefix(json.dumps(wrap(None, [*fields, field("ü", "string", doc="när 😀")]), ensure_ascii=False))
    wide_lines = [wide + rest, wide + rest.replace('"id": 1', '"id": 3'), wide + " null}", wide + rest + " 7"]
    wide_whole = decode(spark, wide_lines, columns)
    assert decode(spark, wide_lines, columns, prefix=wide) == wide_whole
    assert wide_whole[0]["amount"] == Decimal("123.45") and wide_whole[3]["_reason"] == "bad_json"
    # Bytes that are not UTF-8 after the prefix (in a field staging skips, and in a value) reach the parser as
    # they are, as in a whole parse.
    raw = [
        prefix.encode() + rest.encode().replace(b'"op"', b'"x": "caf\xe9", "op"'),
        prefix.encode() + rest.encode().replace(b"MDk=", b"MD\xe9k="),
    ]
    odd = spark.createDataFrame([(b, "f.json", 0) for b in raw], "b binary, _source_file string, _batch_id int")
    odd = odd.select(F.col("b").cast("string").alias("raw"), "_source_file", "_batch_id")
    odd_whole = [r.asDict() for r in decode_lines(odd, "postgres", ["id"], columns).collect()]
    assert [r.asDict() for r in decode_lines(odd, "postgres", ["id"], columns, prefix=prefix).collect()] == odd_whole
    assert odd_whole[0]["_kind"] == "change" and odd_whole[0]["amount"] == Decimal("123.45")
    # The known path was taken: the line's text is matched against the prefix, the schema is a constant.
    df = spark.createDataFrame([(t, "f.json", 0) for t in lines], "raw string, _source_file string, _batch_id int")
    assert uses_prefix(decode_lines(df, "postgres", ["id"], columns, prefix=prefix))
    assert not uses_prefix(decode_lines(df, "postgres", ["id"], columns, prefix=refused))  # folded away


def uses_prefix(df) -> bool:
    """The decoding matches lines against a schema prefix and parses them from the payload on."""
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    return "StartsWith(raw" in plan and f"0x{dbz.PAYLOAD_OPENING.hex().upper()}" in plan


def test_stage_topic_reads_the_first_lines_once_per_session_for_a_schema_prefix(spark, tmp_path: Path) -> None:

    fields = [field("id", "int64")]
    folder = tmp_path / "t" / "_batch_id=0"
    folder.mkdir(parents=True)
    lines = [json.dumps(wrap(envelope(after={"id": i}, lsn=i), fields)) for i in (1, 2)]
    # A line that is not UTF-8 and a tombstone come first: the prefix is the first line's that has one.
    (folder / "t+0+0.json").write_bytes(
        b'{"schema": {"doc": "caf\xe9"}, "payload": null}\nnull\n' + "\n".join(lines).encode() + b"\n"
    )
    path = str(tmp_path / "t")
    df = stage_topic(spark, path, "postgres", ["id"], {"id": "bigint"})
    assert topic._PREFIXES[path] == (spark, dbz.schema_prefix(lines[0]))
    assert uses_prefix(df)
    assert sorted(r.id for r in df.collect() if r._kind == "change") == [1, 2]
    # Known for this session: the next batches are not peeked at, whatever their first line.
    (tmp_path / "t" / "_batch_id=1").mkdir()
    (tmp_path / "t" / "_batch_id=1" / "t+0+0.json").write_text(json.dumps(envelope(after={"id": 3})) + "\n")
    again = stage_topic(spark, path, "postgres", ["id"], {"id": "bigint"}, exclude_batches=[0])
    assert topic._PREFIXES[path] == (spark, dbz.schema_prefix(lines[0]))
    assert uses_prefix(again) and [r.id for r in again.collect()] == [3]
    # Nothing new to read: nothing learnt, asked again next time; a bare first line: no prefix.
    other = str(tmp_path / "u")
    (tmp_path / "u" / "_batch_id=0").mkdir(parents=True)
    (tmp_path / "u" / "_batch_id=0" / "u+0+0.json").write_text(json.dumps(envelope(after={"id": 3})) + "\n")
    stage_topic(spark, other, "postgres", ["id"], {"id": "bigint"}, exclude_batches=[0])
    assert other not in topic._PREFIXES
    assert not uses_prefix(stage_topic(spark, other, "postgres", ["id"], {"id": "bigint"}))
    assert topic._PREFIXES[other] == (spark, None)


# -- reading a topic ---------------------------------------------------------------------------


def test_stage_topic_reads_only_new_batches(spark, tmp_path: Path, capsys) -> None:
    for batch, ids in ((0, [1, 2]), (1, [3])):
        folder = tmp_path / "orders" / f"_batch_id={batch}"
        folder.mkdir(parents=True)
        (folder / "orders+0+0.json").write_text(
            "\n".join(json.dumps(envelope(after={"id": i, "amount": b64(i * 100)}, lsn=i)) for i in ids) + "\n"
        )
    columns = {"id": "bigint", "amount": "decimal(12,2)"}
    df = stage_topic(spark, str(tmp_path / "orders"), "postgres", ["id"], columns)
    assert df.columns[-1] == "_batch_id"
    assert sorted((r.id, r.amount, r._batch_id) for r in df.collect()) == [
        (1, Decimal("1.00"), 0),
        (2, Decimal("2.00"), 0),
        (3, Decimal("3.00"), 1),
    ]
    new = stage_topic(spark, str(tmp_path / "orders"), "postgres", ["id"], columns, exclude_batches=[0])
    assert [(r.id, r._source_file) for r in new.collect()] == [(3, "orders+0+0.json")]
    # The excluded batch's folder is pruned from the scan, not filtered after reading it.
    capsys.readouterr()
    new.explain()
    plan = capsys.readouterr().out
    assert "PartitionFilters: [" in plan and "_batch_id" in plan.split("PartitionFilters: [", 1)[1].split("]", 1)[0]
    # Each line is parsed once in the executed plan, however many columns read from it.
    assert plan.count("from_json(") == 1 and "parseJson(" not in plan, plan


def test_many_landed_batches_are_listed_without_a_spark_job(spark, tmp_path: Path) -> None:
    """A topic folder gains a folder per landed batch. Under Spark's listing threshold (32), building the
    next batch's DataFrame runs a Spark job of one task per folder; on a local master the plugin raises the
    threshold (apply_local_session_defaults) unless something set it, and no job runs. The staged
    batches, gaps and all, are excluded exactly."""

    from dbt.adapters.vcmt_spark.credentials import LOCAL_SESSION_DEFAULTS
    from dbt.adapters.vcmt_spark.python_submissions import apply_local_session_defaults

    for batch in range(40):
        folder = tmp_path / "orders" / f"_batch_id={batch}"
        folder.mkdir(parents=True)
        (folder / "orders+0+0.json").write_text(json.dumps(envelope(after={"id": batch}, lsn=batch + 1)) + "\n")
    sc = spark.sparkContext

    def jobs_to_build(exclude) -> tuple[list[int], Any]:
        """The Spark jobs run while the DataFrame of the batches not in `exclude` is built, and the DataFrame."""
        group = f"build-{uuid.uuid4()}"
        sc.setJobGroup(group, group)
        try:
            df = stage_topic(
                spark, str(tmp_path / "orders"), "postgres", ["id"], {"id": "bigint"}, exclude_batches=exclude
            )
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        sc._jsc.sc().listenerBus().waitUntilEmpty()  # the job list is filled by Spark's listener bus
        return list(sc.statusTracker().getJobIdsForGroup(group)), df

    ((key, ours),) = LOCAL_SESSION_DEFAULTS.items()
    before = spark.conf.get(key, None)
    # The session's first read of the topic also reads its first lines, once (schema_prefix_of): not counted.
    stage_topic(spark, str(tmp_path / "orders"), "postgres", ["id"], {"id": "bigint"}, exclude_batches=range(39))
    try:
        # Set by the profile (the builder), spark-defaults.conf or a hook, even to Spark's own default: left alone.
        spark.conf.set(key, "32")
        listing_jobs, _ = jobs_to_build(range(39))
        apply_local_session_defaults(spark)
        assert spark.conf.get(key) == "32"
        spark.conf.unset(key)
        apply_local_session_defaults(spark)
        assert spark.conf.get(key) == ours
        no_jobs, df = jobs_to_build(range(39))
        # Staged batches with gaps between them leave exactly the gaps to read (a run is one BETWEEN, the
        # single batches one IN).
        _, gaps = jobs_to_build([*range(11), *range(12, 30), 31, *range(32, 37), 38])
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
    assert len(listing_jobs) == 1 and no_jobs == [], (listing_jobs, no_jobs)
    assert [(r.id, r._batch_id) for r in df.collect()] == [(39, 39)]
    assert sorted(r._batch_id for r in gaps.collect()) == [11, 30, 37, 39]


def test_staged_batches_are_excluded_by_a_plan_that_does_not_grow_with_them() -> None:
    """However many batches a topic has staged, the exclusion is one term per run of consecutive batches
    plus one IN, OR-ed as a balanced tree: a Spark Connect plan holds it (a chain of ORs deeper than about
    50 is refused by protobuf), built here without a server."""
    from pyspark.sql.connect import functions as CF

    from vcmt_staging.topic import staged_predicate

    batch = CF.col("_batch_id")
    assert staged_predicate(batch, []) is None
    assert str(staged_predicate(batch, range(400))) == str(batch.between(0, 399))
    assert "in(_batch_id, 5, 10)" in str(staged_predicate(batch, [0, 1, 2, 5, 7, 8, 10]))
    # 1,500 runs of two with a single batch between each: every shape at once, deep enough to break a chain.
    sparse = [b for i in range(3000) for b in ((4 * i, 4 * i + 1) if i % 2 else (4 * i,))]
    plan = staged_predicate(batch, sparse).to_plan(None)
    assert plan.ByteSize() > 0


def test_staging_code_uses_only_the_dataframe_api() -> None:
    """No Python UDFs on the hot path, and nothing that needs a local SparkContext (Spark Connect)."""
    root = Path(__file__).resolve().parents[2]
    sources = [
        *(root / "vcmt_staging").glob("*.py"),
        *(root / "dbt" / "adapters" / "vcmt_spark").glob("*.py"),
    ]
    assert len(sources) >= 6
    for path in sources:
        text = path.read_text()
        for word in ("udf", "sparkContext", ".rdd", "mapInPandas", "applyInPandas", "_jdf", "_jvm"):
            assert word not in text, f"{path.name} uses {word}"


# -- a run with nothing new, and the incremental write ---------------------------------------------

ALL_FAMILIES = {
    "id": "bigint",
    "small": "smallint",
    "n": "int",
    "f": "float",
    "d": "double",
    "amount": "decimal(12,2)",
    "ok": "boolean",
    "note": "string",
    "raw": "binary",
    "day": "date",
    "at": "timestamp",
    "at_ms": "timestamp_millis",
    "clock": "time_micros",
}


class _Dbt:
    """What `stage_new_batches` reads of dbt's object in a compiled Python model."""

    def __init__(self, this: str, is_incremental: bool) -> None:
        self.this, self.is_incremental = this, is_incremental


def test_a_run_with_nothing_new_returns_the_staged_columns_without_decoding(spark, tmp_path: Path, monkeypatch) -> None:
    """The nothing-new result has the decoding's columns and types (a model that filters or drops columns
    after `stage_new_batches` runs on it as on staged lines), and writing it keeps every partition."""
    from dbt.adapters.vcmt_spark.python_submissions import save_model_result

    from vcmt_staging import stage_new_batches

    path = tmp_path / "orders"
    folder = path / "_batch_id=0"
    folder.mkdir(parents=True)
    (folder / "orders+0+0.json").write_text(json.dumps(envelope(after={"id": 1}, lsn=1)) + "\n")
    table = f"nothing_new_{uuid.uuid4().hex[:8]}"
    first = stage_new_batches(_Dbt(table, False), spark, str(path), "postgres", ["id"], ALL_FAMILIES)
    # The model drops a column: the table is not the decoding's shape.
    save_model_result(spark, first.drop("_raw"), table, "parquet", ["_batch_id"], str(tmp_path / "staged"))
    decoded = [(f.name, f.dataType.simpleString()) for f in first.schema]

    def not_when_nothing_is_new(*args, **kwargs):
        raise AssertionError("a run with nothing new decoded or counted lines")

    monkeypatch.setattr(topic, "decode_lines", not_when_nothing_is_new)
    monkeypatch.setattr(topic, "checked", not_when_nothing_is_new)
    empty = stage_new_batches(_Dbt(table, True), spark, str(path), "postgres", ["id"], ALL_FAMILIES)
    assert [(f.name, f.dataType.simpleString()) for f in empty.schema] == decoded
    assert empty.where("_kind = 'change'").drop("_kind", "_raw").collect() == []
    save_model_result(spark, empty.drop("_raw"), table, "parquet", ["_batch_id"], mode="overwrite_partitions")
    assert [(r.id, r._batch_id) for r in spark.table(table).collect()] == [(1, 0)]
    # The model's arguments are checked on such a run too.
    with pytest.raises(ValueError, match="flavour must be one of"):
        stage_new_batches(_Dbt(table, True), spark, str(path), "postgresql", ["id"], ALL_FAMILIES)


def test_a_topic_without_a_batch_folder_stages_nothing_and_says_so(spark, tmp_path: Path, capsys) -> None:
    """No `_batch_id=<N>` folder under the topic (no batch landed yet, or the raw batches were pruned): every
    run failed with Spark's unresolved `_batch_id` column. A first and an incremental run stage nothing and
    say so; the first batch to land is staged by the next run."""
    from dbt.adapters.vcmt_spark.python_submissions import save_model_result

    from vcmt_staging import stage_new_batches

    path = tmp_path / "orders"
    path.mkdir()
    table = f"no_batch_{uuid.uuid4().hex[:8]}"
    for incremental in (False, True):
        capsys.readouterr()
        empty = stage_new_batches(_Dbt(table, incremental), spark, str(path), "postgres", ["id"], ALL_FAMILIES)
        assert empty.collect() == []
        assert capsys.readouterr().out == f"{table}: nothing new to stage\n"
        save_model_result(
            spark,
            empty,
            table,
            "parquet",
            ["_batch_id"],
            str(tmp_path / "staged"),
            mode="overwrite_partitions" if incremental else "create",
        )
    (path / "_batch_id=0").mkdir()
    (path / "_batch_id=0" / "orders+0+0.json").write_text(json.dumps(envelope(after={"id": 1}, lsn=1)) + "\n")
    staged = stage_new_batches(_Dbt(table, True), spark, str(path), "postgres", ["id"], ALL_FAMILIES)
    save_model_result(spark, staged, table, "parquet", ["_batch_id"], mode="overwrite_partitions")
    assert [(r.id, r._batch_id) for r in spark.table(table).collect()] == [(1, 0)]


def test_an_incremental_write_refuses_columns_that_are_not_the_tables(spark, tmp_path: Path) -> None:
    """Spark's insertInto goes by position: a renamed, added or moved column, or a narrower type, is refused
    before anything is written; a wider integer or decimal is written."""
    from dbt.adapters.vcmt_spark.python_submissions import save_model_result
    from dbt_common.exceptions import DbtRuntimeError

    table = f"by_position_{uuid.uuid4().hex[:8]}"
    base = spark.sql(
        "select cast(1 as bigint) as id, cast('a' as string) as note, "
        "cast(1.25 as decimal(12,2)) as amount, cast(0 as bigint) as _batch_id"
    )
    save_model_result(spark, base, table, "parquet", ["_batch_id"], str(tmp_path / "t"))
    refused = {
        "renamed": "select cast(2 as bigint) as id, 'b' as memo, cast(2 as decimal(12,2)) as amount, "
        "cast(1 as bigint) as _batch_id",
        "added": "select cast(2 as bigint) as id, 'b' as note, 'x' as extra, cast(2 as decimal(12,2)) as amount, "
        "cast(1 as bigint) as _batch_id",
        "moved": "select 'b' as note, cast(2 as bigint) as id, cast(2 as decimal(12,2)) as amount, "
        "cast(1 as bigint) as _batch_id",
        "narrower scale": "select cast(2 as bigint) as id, 'b' as note, cast(2.125 as decimal(12,3)) as amount, "
        "cast(1 as bigint) as _batch_id",
    }
    for why, sql in refused.items():
        with pytest.raises(DbtRuntimeError, match="is not in the table's columns") as raised:
            save_model_result(spark, spark.sql(sql), table, "parquet", ["_batch_id"], mode="overwrite_partitions")
        assert "id bigint, note string, amount decimal(12,2), _batch_id bigint" in str(raised.value), why
        assert "--full-refresh" in str(raised.value)
    assert [(r.id, r.note) for r in spark.table(table).collect()] == [(1, "a")], "nothing was written"
    wider = spark.sql(
        "select cast(2 as int) as id, 'b' as note, cast(2.5 as decimal(5,2)) as amount, cast(1 as bigint) as _batch_id"
    )
    save_model_result(spark, wider, table, "parquet", ["_batch_id"], mode="overwrite_partitions")
    assert sorted((r.id, r.note, r.amount) for r in spark.table(table).collect()) == [
        (1, "a", Decimal("1.25")),
        (2, "b", Decimal("2.50")),
    ]


def test_a_partition_overwrite_checks_the_table_each_time_not_a_per_process_memory(spark, tmp_path: Path) -> None:
    """This process's incremental write set the table's dynamic overwrite option and remembered it; another
    client rebuilt the table (`--full-refresh` on the same server: a table without the option), and this
    process's next incremental write, still believing the option set, replaced every partition."""
    from dbt.adapters.vcmt_spark.python_submissions import save_model_result

    table = f"rebuilt_{uuid.uuid4().hex[:8]}"

    def batches(*ids: int):
        return spark.createDataFrame([(i, i) for i in ids], "id bigint, _batch_id bigint")

    save_model_result(spark, batches(0, 1), table, "parquet", ["_batch_id"], str(tmp_path / "t"))
    save_model_result(spark, batches(2), table, "parquet", ["_batch_id"], mode="overwrite_partitions")
    assert sorted(r.id for r in spark.table(table).collect()) == [0, 1, 2]
    # Another client's full refresh: what its save_model_result writes, with its own writer.
    batches(0, 1).write.mode("overwrite").format("parquet").partitionBy("_batch_id").option(
        "path", str(tmp_path / "t")
    ).saveAsTable(table)
    save_model_result(spark, batches(3), table, "parquet", ["_batch_id"], mode="overwrite_partitions")
    assert sorted(r.id for r in spark.table(table).collect()) == [0, 1, 3]
