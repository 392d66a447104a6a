"""Decoding Debezium change events with PySpark Column expressions (docs/staging.md).

Everything here builds Column expressions: no Python UDF, no RDD, no
SparkContext. Each raw line is parsed once into a VARIANT (Spark 4); every
field after that is a `try_variant_get` on it, so a bad value becomes NULL
plus a reason instead of failing the batch.

Types and units come from the Kafka Connect schema when the line carries one
(`{"schema", "payload"}`); without one, the declared target type decides, and
the value's shape (string, object, number) picks the decoder.

Encodings handled, per the Debezium and Kafka Connect documentation:

- decimals: `org.apache.kafka.connect.data.Decimal`, base64 of the big-endian
  two's-complement unscaled integer, scale from the schema's `scale`
  parameter or the declared type (`"/w=="` at scale 2 is -0.01);
  `io.debezium.data.VariableScaleDecimal`, `{"scale": n, "value": base64}`;
  `decimal.handling.mode` `double` (a JSON number) and `string` ("12.34");
- times: `io.debezium.time.Timestamp` (epoch ms), `MicroTimestamp` (µs),
  `NanoTimestamp` (ns), `ZonedTimestamp` (ISO-8601 text, any fraction width,
  `Z` or an offset), Kafka Connect `Timestamp` (ms); `Date` (days since the
  epoch, negative before 1970); `Time` (ms of day), `MicroTime` (µs),
  `NanoTime` (ns);
- booleans, integers, floating point; `io.debezium.data.Uuid` and
  `io.debezium.data.Json` as strings; bytes (base64) as binary;
- `__debezium_unavailable_value` (PostgreSQL TOAST, and Oracle/MySQL
  equivalents) as text or as base64 bytes: never a value. The column is NULL
  and its name is listed in `_unavailable`.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

UNAVAILABLE = "__debezium_unavailable_value"
# The same placeholder in a bytes column: its UTF-8 bytes, base64-encoded like every Connect bytes value.
UNAVAILABLE_BASE64 = base64.b64encode(UNAVAILABLE.encode()).decode()

# What a line is. Only `change` lines are events for a mart; the others are counted and kept out.
KINDS = ("change", "truncate", "tombstone", "heartbeat", "transaction", "message", "schema_change", "malformed")
# Why a line cannot be staged, checked in this order (the first that applies wins).
REASONS = ("bad_json", "unknown_op", "null_key", "null_version", "version_out_of_range", "wrong_type")
FLAVOURS = ("postgres", "mysql", "mariadb")
DECIMAL_HANDLING = ("precise", "string", "double")

# Spark's TIMESTAMP and DATE range (0001-01-01 .. 9999-12-31): beyond it the conversion functions
# overflow, and one bad line must not fail the batch.
_MIN_MICROS, _MAX_MICROS = -62135596800000000, 253402300799999999
_MIN_DAYS, _MAX_DAYS = -719162, 2932896

_DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"
_TS_UNITS = {
    "io.debezium.time.Timestamp": "millis",
    "org.apache.kafka.connect.data.Timestamp": "millis",
    "io.debezium.time.MicroTimestamp": "micros",
    "io.debezium.time.NanoTimestamp": "nanos",
}
_TIME_UNITS = {
    "io.debezium.time.Time": "millis",
    "org.apache.kafka.connect.data.Time": "millis",
    "io.debezium.time.MicroTime": "micros",
    "io.debezium.time.NanoTime": "nanos",
}
_INTEGERS = {"tinyint": "tinyint", "byte": "tinyint", "smallint": "smallint", "short": "smallint",
             "int": "int", "integer": "int", "bigint": "bigint", "long": "bigint"}
_NAME = re.compile(r"^[^'\\\]\[]+$")


# -- declared types ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Declared:
    """A declared column type: the Spark type staged, and how a number without a schema is read."""

    spark_type: str  # the staged column's Spark SQL type
    family: str  # integer, float, decimal, boolean, string, binary, date, timestamp, time
    unit: str | None = None  # millis/micros/nanos for numeric timestamps and times without a schema
    scale: int | None = None  # a decimal's declared scale

    @staticmethod
    def parse(text: str) -> Declared:
        t = text.strip().lower()
        if t in _INTEGERS:
            return Declared(_INTEGERS[t], "integer")
        if t in ("float", "real", "double"):
            return Declared("float" if t in ("float", "real") else "double", "float")
        if m := re.fullmatch(r"(?:decimal|numeric)\(\s*(\d+)\s*,\s*(\d+)\s*\)", t):
            p, s = int(m[1]), int(m[2])
            if not (1 <= p <= 38 and s <= p):
                raise ValueError(f"declared type {text!r}: Spark decimals have precision 1..38 and scale <= precision")
            return Declared(f"decimal({p},{s})", "decimal", scale=s)
        if t in ("boolean", "bool"):
            return Declared("boolean", "boolean")
        if t in ("string", "uuid", "json"):
            return Declared("string", "string")
        if t in ("binary", "bytes"):
            return Declared("binary", "binary")
        if t == "date":
            return Declared("date", "date")
        if m := re.fullmatch(r"timestamp(?:_(millis|micros|nanos))?", t):
            return Declared("timestamp", "timestamp", unit=m[1])
        if m := re.fullmatch(r"time(?:_(millis|micros|nanos))?", t):
            # Spark has no TIME type here: a time of day is staged as microseconds since midnight.
            return Declared("bigint", "time", unit=m[1])
        raise ValueError(
            f"declared type {text!r} is not supported: use an integer type, float, double, decimal(p,s), boolean, "
            "string (uuid, json), binary, date, timestamp[_millis|_micros|_nanos] or time[_millis|_micros|_nanos]"
        )


# -- small helpers -------------------------------------------------------------------------------

def _get(v: Column, path: str, type_: str = "variant") -> Column:
    return F.try_variant_get(v, path, type_)


def _path(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"column name {name!r}: quotes, backslashes and brackets are not supported")
    return f"$['{name}']"


def _present(v: Column) -> Column:
    """True when the value exists and is not JSON null."""
    return v.isNotNull() & ~F.is_variant_null(v)


def _shape(v: Column) -> Column:
    """STRING, BIGINT, DECIMAL(p,s), DOUBLE, BOOLEAN, OBJECT<...>, ARRAY<...>: what the JSON value is."""
    return F.schema_of_variant(v)


@dataclass(frozen=True)
class Parts:
    """A field's VARIANT value and what the decoders ask of it: its shape, as text, as a number.

    Staging computes these once per column in their own projection and
    passes the resulting column references, so each decoder branch refers to
    them instead of repeating the VARIANT extraction (which made the plan,
    and Spark's generated code, grow with every use).
    """

    raw: Column
    shape: Column
    text: Column
    number: Column

    @staticmethod
    def of(x: Column) -> Parts:
        return Parts(x, _shape(x), _get(x, "$", "string"), _get(x, "$", "bigint"))

    @property
    def is_string(self) -> Column:
        return self.shape == F.lit("STRING")

    @property
    def is_object(self) -> Column:
        return self.shape.startswith("OBJECT")


def _in_range(x: Column, low: int, high: int) -> Column:
    return x.between(F.lit(low), F.lit(high))


# -- envelope ------------------------------------------------------------------------------------

def document(raw: Column) -> Column:
    """The line parsed once, as VARIANT; NULL when it is not JSON."""
    return F.try_parse_json(raw)


def is_wrapped(doc: Column) -> Column:
    """Kafka Connect's JsonConverter with schemas enabled writes `{"schema": ..., "payload": ...}`."""
    return _get(doc, "$.schema").isNotNull() & _get(doc, "$.payload").isNotNull()


def envelope(doc: Column) -> Column:
    """The Debezium envelope: the payload of a wrapped line, else the line itself."""
    return F.when(is_wrapped(doc), _get(doc, "$.payload")).otherwise(doc)


def connect_schema(doc: Column) -> Column:
    """The Kafka Connect schema of a wrapped line, else NULL."""
    return F.when(is_wrapped(doc), _get(doc, "$.schema"))


def op(env: Column) -> Column:
    return _get(env, "$.op", "string")


_FIELD = "struct<field:string,type:string,name:string,parameters:map<string,string>>"


def image_fields(schema: Column) -> Column:
    """The Connect schema of the row image (`after`, or `before`: same struct), as an array of field structs."""
    fields = _get(schema, "$.fields", f"array<struct<field:string,fields:array<{_FIELD}>>>")
    after = F.filter(fields, lambda f: f["field"] == F.lit("after"))
    before = F.filter(fields, lambda f: f["field"] == F.lit("before"))
    return F.coalesce(F.element_at(after, 1)["fields"], F.element_at(before, 1)["fields"])


def field_schema(fields: Column, name: str) -> Column:
    """One column's field struct (field, type, name, parameters), or NULL without a schema."""
    return F.element_at(F.filter(fields, lambda f: f["field"] == F.lit(name)), 1)


def kind(raw: Column, doc: Column, env: Column, schema: Column) -> Column:
    """What a line is (KINDS). Tombstones are empty lines, `null`, or a wrapped null payload."""
    o = op(env)
    keys = F.map_keys(_get(env, "$", "map<string,variant>"))
    has = lambda path: _get(env, path).isNotNull()  # noqa: E731
    schema_name = _get(schema, "$.name", "string")
    return (
        F.when(raw.isNull() | (F.trim(raw) == ""), F.lit("tombstone"))
        .when(doc.isNull(), F.lit("malformed"))
        .when(F.is_variant_null(env), F.lit("tombstone"))
        .when(o.isin("c", "u", "d", "r"), F.lit("change"))
        .when(o == "t", F.lit("truncate"))
        .when(o == "m", F.lit("message"))
        .when(o.isNotNull(), F.lit("malformed"))
        # Transaction metadata topic: BEGIN/END markers with the transaction id.
        .when(has("$.status") & has("$.id"), F.lit("transaction"))
        # Schema change topic: DDL and the table structure after it.
        .when(has("$.ddl") | has("$.tableChanges"), F.lit("schema_change"))
        # Heartbeat topic: `{"ts_ms": ...}` alone (schema io.debezium.connector.common.Heartbeat).
        .when(
            (schema_name.endswith("Heartbeat")) | ((F.size(keys) == 1) & F.array_contains(keys, "ts_ms")),
            F.lit("heartbeat"),
        )
        .otherwise(F.lit("malformed"))
    )


def image(env: Column) -> Column:
    """The row image: `before` for a delete (its key), `after` otherwise."""
    return F.when(op(env) == "d", _get(env, "$.before")).otherwise(_get(env, "$.after"))


# -- values --------------------------------------------------------------------------------------

def is_unavailable(x: Column, parts: Parts | None = None) -> Column:
    """The value is Debezium's placeholder for a value it did not receive (unchanged TOAST and the like)."""
    p = parts or Parts.of(x)
    return F.coalesce(p.is_string & p.text.isin(UNAVAILABLE, UNAVAILABLE_BASE64), F.lit(False))


def unscaled_from_bytes(b: Column) -> Column:
    """A big-endian two's-complement integer (binary, up to 16 bytes) as DECIMAL(38,0).

    Horner's rule over the bytes, the first one signed: the running value
    never exceeds the final one in magnitude, so 16-byte values (DECIMAL(38)'s
    range) do not overflow on the way; longer ones overflow to NULL (Spark
    without ANSI mode), which staging reports as wrong_type. `b` appears once
    in the expression, so the plan stays small whatever computes it.
    """
    pairs = F.regexp_extract_all(F.hex(b), F.lit("(..)"), 1)
    octets = F.transform(
        pairs,
        lambda h, i: F.when((i == 0) & (F.conv(h, 16, 10).cast("int") >= 128), F.conv(h, 16, 10).cast("int") - 256)
        .otherwise(F.conv(h, 16, 10).cast("int")),
    )
    return F.aggregate(
        octets,
        F.lit(0).cast("decimal(38,0)"),
        lambda acc, o: (acc * F.lit(256) + o).cast("decimal(38,0)"),
    )


def scaled_text(unscaled: Column, scale: Column) -> Column:
    """`unscaled * 10^-scale` as exact decimal text in scientific notation ("-1E-2" for -1 at scale 2).

    Spark casts such text to DECIMAL exactly (and to DOUBLE), whatever the
    scale of each row, with `unscaled` evaluated once.
    """
    return F.concat(unscaled.cast("string"), F.lit("E"), (-scale).cast("string"))


def decimal_from_base64(text: Column, scale: Column) -> Column:
    """Connect's Decimal: base64 of the unscaled two's-complement bytes, at `scale`, as exact decimal text."""
    return scaled_text(unscaled_from_bytes(F.unbase64(text)), scale)


def _numeric_text(p: Parts, sem: Column, stype: Column, sscale: Column, d: Declared, mode: Column,
                  has_schema: Column) -> Column:
    """A number's exact text, whatever the encoding; cast to the declared type by the caller."""
    declared_scale = F.lit(d.scale if d.scale is not None else 0)
    x, text = p.raw, p.text
    bytes_encoded = F.when(
        has_schema,
        # With a schema: a Decimal logical type is bytes; type string is decimal.handling.mode=string.
        (sem == _DECIMAL_LOGICAL) | (stype == "bytes"),
    ).otherwise(mode == F.lit("precise"))
    # The bytes and scale are chosen first, so the byte decoding appears once in the plan.
    octets = (
        F.when(p.is_object, F.unbase64(_get(x, "$.value", "string")))  # io.debezium.data.VariableScaleDecimal
        .when(p.is_string & bytes_encoded, F.unbase64(text))
    )
    scale = F.when(p.is_object, _get(x, "$.scale", "int")).otherwise(F.coalesce(sscale.cast("int"), declared_scale))
    return (
        F.when(octets.isNotNull(), scaled_text(unscaled_from_bytes(octets), scale))
        .otherwise(text)  # a JSON number, or decimal.handling.mode=string
    )


def _micros_from(n: Column, unit: Column) -> Column:
    """Epoch (or time-of-day) count in `unit` as microseconds, NULL outside Spark's timestamp range."""
    millis_ok = _in_range(n, _MIN_MICROS // 1000, _MAX_MICROS // 1000)
    # Exact floor division of nanoseconds (a double would lose the last digits of a 19-digit count).
    nanos_to_micros = ((n - F.pmod(n, F.lit(1000))).cast("decimal(20,0)") / F.lit(1000)).cast("bigint")
    return (
        F.when((unit == "millis") & millis_ok, n * 1000)
        .when(unit == "micros", n)
        .when(unit == "nanos", nanos_to_micros)
    )


def decimal_handling_column(mode: str | Column) -> Column:
    """The connector's `decimal.handling.mode` as a Column: a name checked here, or a Column
    giving it per line (lines of several connectors staged in one job)."""
    if isinstance(mode, Column):
        return mode
    if mode not in DECIMAL_HANDLING:
        raise ValueError(f"decimal_handling must be one of {DECIMAL_HANDLING}, got {mode!r}")
    return F.lit(mode)


def decode_value(x: Column, field: Column, d: Declared, decimal_handling: str | Column = "precise",
                 has_schema: Column | None = None, parts: Parts | None = None) -> Column:
    """One image field (VARIANT) as the declared type; NULL when absent, JSON null or not decodable.

    `field` is the column's Connect field schema (`field_schema`), NULL
    without one: its logical name and parameters decide units and scale.
    The placeholder for an unavailable value is handled by the caller.
    `parts`: `x`'s shape, text and number, when the caller computed them.
    """
    decimal_handling = decimal_handling_column(decimal_handling)
    sem, stype = field["name"], field["type"]
    sscale = field["parameters"]["scale"]
    if has_schema is None:
        has_schema = field.isNotNull()
    has_schema = F.coalesce(has_schema, F.lit(False))
    p = parts or Parts.of(x)
    text = p.text

    if d.family in ("integer", "boolean"):
        value = _get(x, "$", d.spark_type)
    elif d.family in ("float", "decimal"):
        value = _numeric_text(p, sem, stype, sscale, d, decimal_handling, has_schema).cast(d.spark_type)
        # Casting text to a narrower decimal rounds; to a decimal it cannot hold gives NULL (wrong_type).
    elif d.family == "string":
        # A string as it is; anything else (a JSON column sent as an object) as JSON text.
        value = text
    elif d.family == "binary":
        value = F.when(p.is_string, F.unbase64(text))
    elif d.family == "date":
        days = p.number
        value = (
            F.when(p.is_string, text.cast("date"))
            .when(_in_range(days, _MIN_DAYS, _MAX_DAYS), F.date_from_unix_date(days.cast("int")))
        )
    elif d.family == "timestamp":
        unit = _unit(sem, _TS_UNITS, d.unit)
        micros = _micros_from(p.number, unit)
        value = (
            # ZonedTimestamp: ISO-8601 with `Z` or an offset, any fraction width.
            F.when(p.is_string, text.cast("timestamp"))
            .when(_in_range(micros, _MIN_MICROS, _MAX_MICROS), F.timestamp_micros(micros))
        )
    elif d.family == "time":
        unit = _unit(sem, _TIME_UNITS, d.unit)
        micros = _micros_from(p.number, unit)
        value = F.when(_in_range(micros, 0, 86_400_000_000), micros)
    else:  # pragma: no cover - Declared.parse refuses anything else
        raise ValueError(d.family)
    return F.when(_present(x), value).cast(d.spark_type)


def _unit(sem: Column, units: dict[str, str], declared: str | None) -> Column:
    """The unit from the schema's logical name when there is one, else the declared unit."""
    from_schema = F.lit(None).cast("string")
    for name, unit in units.items():
        from_schema = F.when(sem == name, F.lit(unit)).otherwise(from_schema)
    return F.coalesce(from_schema, F.lit(declared))


# -- versions ------------------------------------------------------------------------------------

# MySQL/MariaDB version layout, most significant first; 19 + 32 + 12 = 63 bits of a positive BIGINT.
BINLOG_FILE_BITS, BINLOG_POS_BITS, BINLOG_ROW_BITS = 19, 32, 12
# PostgreSQL: the LSN shifted left by one; the low bit is 0 for a snapshot read and 1 for a streamed change.
LSN_MAX = (1 << 62) - 1


def version(env: Column, flavour: str) -> tuple[Column, Column]:
    """(`_version`, present): the source position as a BIGINT that orders a key's changes.

    `present` is False when the fields the version is made of are missing
    (null_version); `_version` is NULL but present when they are out of the
    documented range (version_out_of_range).

    postgres: `source.lsn * 2 + (op != 'r')`. Snapshot reads share the
    snapshot's LSN; a streamed change at that very LSN happened after the
    snapshot's consistent point, so it wins the tie. LSN < 2^62.

    mysql, mariadb: binlog file number (the digits after the last dot of
    `source.file`), `source.pos` and `source.row` packed as
    file << 44 | pos << 12 | row: file number < 2^19 (524,288 binlog files),
    pos < 2^32 (4 GiB binlog files), row < 2^12 (4,096 rows per binlog event).
    """
    o = op(env)
    if flavour == "postgres":
        lsn = _get(env, "$.source.lsn", "bigint")
        present = _present(_get(env, "$.source.lsn"))
        packed = lsn * 2 + F.when(o == "r", F.lit(0)).otherwise(F.lit(1))
        return F.when(_in_range(lsn, 0, LSN_MAX), packed), present
    if flavour in ("mysql", "mariadb"):
        file_text = _get(env, "$.source.file", "string")
        file_no = F.regexp_extract(file_text, r"\.(\d+)$", 1).cast("bigint")
        pos = _get(env, "$.source.pos", "bigint")
        row = F.coalesce(_get(env, "$.source.row", "bigint"), F.lit(0))
        present = _present(_get(env, "$.source.file")) & _present(_get(env, "$.source.pos"))
        fits = (
            _in_range(file_no, 0, (1 << BINLOG_FILE_BITS) - 1)
            & _in_range(pos, 0, (1 << BINLOG_POS_BITS) - 1)
            & _in_range(row, 0, (1 << BINLOG_ROW_BITS) - 1)
        )
        packed = (
            F.shiftleft(file_no, BINLOG_POS_BITS + BINLOG_ROW_BITS)
            .bitwiseOR(F.shiftleft(pos, BINLOG_ROW_BITS))
            .bitwiseOR(row)
        )
        return F.when(fits, packed), present
    raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")


def source_ts(env: Column) -> tuple[Column, Column]:
    """(`_source_ts`, present): commit time at the source, from `source.ts_us` when sent, else `source.ts_ms`."""
    us = _get(env, "$.source.ts_us", "bigint")
    ms = _get(env, "$.source.ts_ms", "bigint")
    micros = F.coalesce(us, F.when(_in_range(ms, _MIN_MICROS // 1000, _MAX_MICROS // 1000), ms * 1000))
    present = _present(_get(env, "$.source.ts_us")) | _present(_get(env, "$.source.ts_ms"))
    return F.when(_in_range(micros, _MIN_MICROS, _MAX_MICROS), F.timestamp_micros(micros)), present
