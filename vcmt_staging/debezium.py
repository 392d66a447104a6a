"""Decoding Debezium change events with PySpark Column expressions (docs/staging.md).

Everything here builds Column expressions: no Python UDF, no RDD, no
SparkContext. Each raw line is parsed once, by `from_json`, into the fields
staging reads (`parse`); every value is then cast from its text, so a bad value becomes NULL
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
import dataclasses
import json
import re
from dataclasses import dataclass
from decimal import Decimal

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from vcmt_staging.contract import KINDS, REASONS  # noqa: F401 (part of this module's API)

UNAVAILABLE = "__debezium_unavailable_value"
# The same placeholder in a bytes column: its UTF-8 bytes, base64-encoded like every Connect bytes value.
UNAVAILABLE_BASE64 = base64.b64encode(UNAVAILABLE.encode()).decode()

FLAVOURS = ("postgres", "mysql", "mariadb")
DECIMAL_HANDLING = ("precise", "string", "double")

# Spark's TIMESTAMP and DATE range (0001-01-01 .. 9999-12-31): beyond it the conversion functions
# overflow, and one bad line must not fail the batch.
_MIN_MICROS, _MAX_MICROS = -62135596800000000, 253402300799999999
_MIN_DAYS, _MAX_DAYS = -719162, 2932896

_DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"
_NOT_FINITE = ("NaN", "Infinity", "-Infinity")
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
_INTEGERS = {
    "tinyint": "tinyint",
    "byte": "tinyint",
    "smallint": "smallint",
    "short": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
}


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


# -- the line's shape ----------------------------------------------------------------------------
#
# Each line is parsed once by `from_json` into the fields staging reads, and nothing else: Spark's
# JSON reader skips every other field without building it. Envelope fields and source positions are
# kept as their JSON text (a string as it is, anything else as JSON), and cast where they are used;
# a declared column whose decoder must know whether the value was a JSON string, number or object
# is kept as a VARIANT of that value alone. No field is extracted through a VARIANT cast, which
# builds expression objects per value (docs/staging.md, "Where staging time goes").

_S = T.StringType()
# A field of the row image: its name, Connect type, logical name and (for decimals) scale parameter.
_FIELD = T.StructType(
    [T.StructField(n, _S) for n in ("field", "type", "name")]
    + [T.StructField("parameters", T.StructType([T.StructField("scale", _S)]))]
)
_SCHEMA = T.StructType(
    [
        T.StructField("name", _S),
        T.StructField(
            "fields",
            T.ArrayType(T.StructType([T.StructField("field", _S), T.StructField("fields", T.ArrayType(_FIELD))])),
        ),
    ]
)
_SOURCE = T.StructType([T.StructField(n, _S) for n in ("lsn", "file", "pos", "row", "ts_ms", "ts_us")])
# Top-level fields of the other kinds of lines: transaction markers, schema changes, heartbeats.
_MARKERS = ("ts_ms", "status", "id", "ddl", "tableChanges")
# Every envelope field staging reads, in a wrapped line's payload or at the top of a bare one.
ENVELOPE_FIELDS = ("op", "before", "after", "source", *_MARKERS)


def _leaf_type(d: Declared) -> T.DataType:
    """Text for decoders that need only the text; a VARIANT where the JSON type of the value decides
    (a number of days against an ISO date, a base64 string against a JSON number)."""
    return _S if d.family in ("string", "integer", "boolean") else T.VariantType()


def line_type(declared: dict[str, Declared]) -> T.DataType:
    """What `parse` reads of a line: the Connect schema, the envelope (wrapped or bare) and the declared columns."""
    image = T.StructType([T.StructField(name, _leaf_type(d)) for name, d in declared.items()])
    envelope = [
        T.StructField("before", image),
        T.StructField("after", image),
        T.StructField("source", _SOURCE),
        T.StructField("op", _S),
        *[T.StructField(m, _S) for m in _MARKERS],
    ]
    return T.ArrayType(
        T.StructType([T.StructField("schema", _SCHEMA), T.StructField("payload", T.StructType(envelope)), *envelope])
    )


# JSON as RFC 8259 writes it: Spark's reader also takes single quotes and NaN unless told not to.
# Jackson refuses a string value longer than 20,000,000 characters by default (StreamReadConstraints), which
# made a long text value `bad_json`: a line's string can be as long as the line (docs/staging.md, "Declared
# columns").
_STRICT_JSON = {
    "allowSingleQuotes": "false",
    "allowNonNumericNumbers": "false",
    "allowComments": "false",
    "allowUnquotedFieldNames": "false",
    "allowNumericLeadingZeros": "false",
    "allowBackslashEscapingAnyCharacter": "false",
    "allowUnquotedControlChars": "false",
    "maxStringLen": str(2**31 - 1),
}


def schema_prefix(line: str) -> str | None:
    """The text of `line` up to its payload's value, when the line starts as Kafka Connect's JsonConverter
    wraps a value, `{"schema": <schema>, "payload":`, those two keys first and in that order; else None.

    Lines of one table carry the same schema text, most of a line's bytes:
    staging parses it once per topic and session (`parse`) instead of once
    per line (docs/staging.md, "Known Connect schemas").
    """
    head = _PREFIX_HEAD.match(line)
    if head is None:
        return None
    try:
        _, end = _PREFIX_DECODER.raw_decode(line, head.end())
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python reads (Spark refuses it too)
        return None
    tail = _PREFIX_TAIL.match(line, end)
    return line[: tail.end()] if tail else None


# What a known line is parsed as, before its text after the prefix (`parse`).
PAYLOAD_OPENING = b'[{"payload":'


def _refuse_constant(name: str) -> None:
    raise ValueError(name)


# JSON whitespace only (RFC 8259): space, tab, line feed, carriage return.
_PREFIX_HEAD = re.compile(r'[ \t\n\r]*\{[ \t\n\r]*"schema"[ \t\n\r]*:[ \t\n\r]*')
_PREFIX_TAIL = re.compile(r'[ \t\n\r]*,[ \t\n\r]*"payload"[ \t\n\r]*:')
_PREFIX_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _prefix_schema(prefix: str, declared: dict[str, Declared]) -> Column:
    """The Connect schema of lines that start with `prefix`, parsed by the same reader as a whole line.

    A constant: Spark's optimizer parses it once, while planning. NULL when that reader refuses the prefix.
    """
    return F.get(F.from_json(F.lit(f"[{prefix}null}}]"), line_type(declared), _STRICT_JSON), 0)["schema"]


def _known(raw: Column, prefix: str, declared: dict[str, Declared]) -> Column:
    """The line starts with `prefix` (`schema_prefix`), and Spark's reader takes that prefix: one it refuses
    is never used, so its lines go the whole way through the parse and fail there, as they would without it."""
    return raw.startswith(prefix) & _prefix_schema(prefix, declared).isNotNull()


def parse(raw: Column, declared: dict[str, Declared], prefix: str | None = None) -> Column:
    """The line parsed once, as an array: one element for one JSON value, NULL when the line is not JSON.

    The brackets make the parser read the whole line: text after the first
    value (two envelopes run together, a cut line) fails it, or shows as a
    second element, instead of being ignored.

    A line that starts with `prefix` (the topic's `schema_prefix`) is parsed
    from its payload on, as `{"payload": ...`: the reader is in the same
    state there as after the prefix, so the rest of the line parses (or
    fails) as it would whole. `line_schema` gives its schema.
    """
    text = F.concat(F.lit("["), raw, F.lit("]"))
    if prefix is not None:
        # Cut as bytes: a string's substring counts characters from the start of the line, a walk over the
        # whole line per line (Spark evaluates the parse's input without generated code).
        rest = F.substring(raw.cast("binary"), len(prefix.encode()) + 1, 2**31 - 1)
        payload = F.concat(F.lit(bytearray(PAYLOAD_OPENING)), rest, F.lit(bytearray(b"]"))).cast("string")
        text = F.when(_known(raw, prefix, declared), payload).otherwise(text)
    return F.from_json(text, line_type(declared), _STRICT_JSON)


def line_schema(line: Column, raw: Column, declared: dict[str, Declared], prefix: str | None = None) -> Column:
    """The Connect schema of the parsed `line` (`parse` of `raw`): its own, or the constant of `prefix`.

    A line with the prefix that names `schema` again after its payload keeps the later one, as a whole
    parse would (a JSON null there is not told apart from none: the prefix's schema stays).
    """
    if prefix is None:
        return line["schema"]
    return F.when(
        _known(raw, prefix, declared), F.coalesce(line["schema"], _prefix_schema(prefix, declared))
    ).otherwise(line["schema"])


def one_value(parsed: Column) -> Column:
    """The line is exactly one JSON value."""
    return F.coalesce(F.size(parsed) == 1, F.lit(False))


def is_wrapped(line: Column, schema: Column) -> Column:
    """Kafka Connect's JsonConverter with schemas enabled writes `{"schema": ..., "payload": ...}`;
    `schema` is the line's (`line_schema`)."""
    return schema.isNotNull() | line["payload"].isNotNull()


def envelope_field(line: Column, name: str, schema: Column) -> Column:
    """A field of the Debezium envelope: in the payload of a wrapped line, else at the top."""
    return F.when(is_wrapped(line, schema), line["payload"][name]).otherwise(line[name])


def _at(array: Column, position: Column) -> Column:
    """The element at a 1-based position from array_position (0: not found), else NULL."""
    return F.get(array, (position - 1).cast("int"))


def image_fields(schema: Column) -> Column:
    """The Connect schema of the row image (`after`, or `before`: same struct), as an array of field structs."""
    fields = schema["fields"]
    after = _at(fields, F.array_position(fields["field"], "after"))["fields"]
    before = _at(fields, F.array_position(fields["field"], "before"))["fields"]
    return F.coalesce(after, before)


def field_schema(fields: Column, name: str) -> Column:
    """One column's field struct (field, type, name, parameters), or NULL without a schema."""
    return _at(fields, F.array_position(fields["field"], name))


def _null_payload(raw: Column, line: Column) -> Column:
    """A wrapped line whose payload is JSON null (a tombstone with schemas enabled: `"payload": null`).

    A struct field is NULL whether the key is JSON null or missing, so the
    text decides, and only for a line without any envelope field (the regex
    runs on those few lines alone).
    """
    bare = [line[n] for n in ENVELOPE_FIELDS]
    return (
        line["payload"].isNull()
        & ~F.greatest(*[x.isNotNull() for x in bare])
        & raw.rlike(r'"schema"\s*:')
        & raw.rlike(r'"payload"\s*:\s*null')
    )


def kind(raw: Column, one: Column, line: Column, e: dict[str, Column], schema_name: Column) -> Column:
    """What a line is (KINDS). Tombstones are empty lines, `null`, or a wrapped null payload.

    `one`: the line is one JSON value (`one_value`); `e`: the envelope fields (`envelope_field`) by name.
    """
    o = e["op"]
    others = [e[n] for n in ENVELOPE_FIELDS if n not in ("op", "ts_ms")]
    return (
        F.when(raw.isNull() | (F.trim(raw) == ""), F.lit("tombstone"))
        .when(~one, F.lit("malformed"))
        .when(line.isNull() | _null_payload(raw, line), F.lit("tombstone"))
        .when(o.isin("c", "u", "d", "r"), F.lit("change"))
        .when(o == "t", F.lit("truncate"))
        .when(o == "m", F.lit("message"))
        .when(o.isNotNull(), F.lit("malformed"))
        # Transaction metadata topic: BEGIN/END markers with the transaction id.
        .when(e["status"].isNotNull() & e["id"].isNotNull(), F.lit("transaction"))
        # Schema change topic: DDL and the table structure after it.
        .when(e["ddl"].isNotNull() | e["tableChanges"].isNotNull(), F.lit("schema_change"))
        # Heartbeat topic: `{"ts_ms": ...}` alone (schema io.debezium.connector.common.Heartbeat).
        .when(
            schema_name.endswith("Heartbeat")
            | (e["ts_ms"].isNotNull() & ~F.greatest(*[x.isNotNull() for x in others])),
            F.lit("heartbeat"),
        )
        .otherwise(F.lit("malformed"))
    )


def image(e: dict[str, Column]) -> Column:
    """The row image: `before` for a delete (its key), `after` otherwise."""
    return F.when(e["op"] == "d", e["before"]).otherwise(e["after"])


# -- values --------------------------------------------------------------------------------------


def is_text(d: Declared) -> bool:
    """Whether a declared column is parsed as its text (else as a VARIANT: the decoder needs the JSON type)."""
    return isinstance(_leaf_type(d), T.StringType)


@dataclass(frozen=True)
class Parts:
    """A field's value as the decoders ask of it: whether it is there, its text, its JSON type, as a number,
    and for decimals the bytes and scale of an encoded value.

    Staging computes these in projections of their own (`Parts.columns`,
    then `numeric_parts`) and passes the resulting column references, so
    each decoder branch refers to them instead of repeating the extraction
    (which made the plan, and Spark's generated code, grow with every use).
    """

    raw: Column  # the value as parsed: its text, or a VARIANT (_leaf_type)
    present: Column  # there and not JSON null
    text: Column  # a string's content; a number, boolean or object as JSON text
    is_string: Column
    is_object: Column
    number: Column  # the text as a BIGINT
    octets: Column | None = None  # decimals: the encoded unscaled bytes, NULL for a plain number
    scale: Column | None = None  # decimals: the scale of those bytes
    digits: Column | None = None  # decimals: the number as decimal text (`number_text`)

    @staticmethod
    def named(prefix: str, encoded: bool, digits: bool = False) -> Parts:
        """The parts computed earlier as columns `<prefix>__<part>` (`octets`, `scale` only when `encoded`,
        `digits` when asked)."""
        names = [
            f.name
            for f in dataclasses.fields(Parts)
            if (encoded or f.name not in ("octets", "scale")) and (digits or f.name != "digits")
        ]
        return Parts(*[F.col(f"{prefix}__{n}") for n in names])

    @staticmethod
    def columns(x: Column, json: Column | None, d: Declared, line: Column) -> dict[str, Column]:
        """The parts of a parsed value `x` of declared type `d`, by name; `json` is `to_json(x)` for a VARIANT;
        `line` is the raw line."""
        if json is None:
            # The parser reads a line that is not UTF-8 with each invalid byte as U+FFFD: a text value holding
            # one there is not the value that was sent, and is not decoded (wrong_type; it was staged so).
            text = F.when(~x.contains("\ufffd") | F.is_valid_utf8(line), x)
            present, is_string, is_object = x.isNotNull(), F.lit(True), F.lit(False)
        else:
            present = x.isNotNull() & ~F.is_variant_null(x)
            is_string, is_object = json.startswith('"'), json.startswith("{")
            # Strings the decoders read (base64, numbers, ISO times) have no escapes.
            text = F.when(is_string, json.substr(F.lit(2), F.length(json) - 2)).when(present, json)
        return {
            "present": present,
            "text": text,
            "is_string": is_string,
            "is_object": is_object,
            "number": exact_integer(text, "bigint"),
        }


def exact_integer(text: Column, spark_type: str) -> Column:
    """Integer text as `spark_type`; NULL for anything else (a fraction, an exponent, a value out of range).

    Spark's plain cast reads "2.75" as 2 (without ANSI mode, which dbt-spark turns off); `try_cast` is the
    ANSI cast, exact whatever the session's mode (docs/staging.md, "Declared columns").
    """
    return text.try_cast(spark_type)


def _in_range(x: Column, low: int, high: int) -> Column:
    return x.between(F.lit(low), F.lit(high))


def is_unavailable(p: Parts) -> Column:
    """The value is Debezium's placeholder for a value it did not receive (unchanged TOAST and the like)."""
    return F.coalesce(p.is_string & p.text.isin(UNAVAILABLE, UNAVAILABLE_BASE64), F.lit(False))


def _powers_256() -> Column:
    """256^n for n = 0..8 as exact DECIMAL(38,0) values (a double power would round 2^64)."""
    return F.array(*[F.lit(Decimal(256**n)).cast("decimal(38,0)") for n in range(9)])


def unscaled_from_bytes(b: Column) -> Column:
    """A big-endian two's-complement integer (binary) as DECIMAL(38,0); NULL when it does not fit.

    Bytes beyond the last 16 must be sign padding (00 before a positive
    value, FF before a negative one). The last 8 bytes and the ones before
    them are read as unsigned numbers (`conv` of their hex) and the leading
    part is made signed by its first bit: high * 2^64 + low, each step an
    exact DECIMAL(38,0) (for a negative value, (high + 1) * 2^64 - (2^64 -
    low), so no step goes below the result). Values outside DECIMAL(38)
    overflow to NULL (Spark without ANSI mode), which staging reports as
    wrong_type.
    """
    whole, whole_n = F.hex(b), F.length(b)
    h = F.substring(whole, -32, 32)  # the last 16 bytes
    n = F.least(whole_n, F.lit(16))
    high_n = F.greatest(n - 8, F.lit(0))  # the bytes before the last 8

    def unsigned(hex_text: Column) -> Column:
        return F.coalesce(F.conv(hex_text, 16, 10), F.lit("0")).cast("decimal(38,0)")

    low, high = unsigned(F.substring(h, -16, 16)), unsigned(h.substr(F.lit(1), high_n * 2))
    negative = F.substring(h, 1, 1).isin(*"89ABCDEF")
    padding = whole.substr(F.lit(1), (whole_n - n) * 2)
    padded_right = (padding == "") | F.when(negative, padding.rlike("^(FF)+$")).otherwise(padding.rlike("^(00)+$"))
    # The leading part carries the sign: the high bytes, or the whole value when it has 8 bytes or fewer.
    lead_n, lead = F.when(high_n > 0, high_n).otherwise(n), F.when(high_n > 0, high).otherwise(low)
    signed = (lead - F.when(negative, F.get(_powers_256(), lead_n.cast("int"))).otherwise(F.lit(0))).cast(
        "decimal(38,0)"
    )
    two_64 = F.lit(Decimal(2**64)).cast("decimal(38,0)")
    value = (
        F.when(high_n == 0, signed)
        .when(negative, (signed + 1) * two_64 + (low - two_64))
        .otherwise(signed * two_64 + low)
    )
    return F.when(padded_right, value.cast("decimal(38,0)"))


def unscaled_text(b: Column) -> Column:
    """`unscaled_from_bytes(b)` as decimal text. Up to 8 bytes (every DECIMAL(18) value, the usual
    column) are sign-extended to 8 and read as one signed 64-bit number, with no decimal arithmetic:
    the 16-byte path costs about a third of a decimal column's decoding (docs/staging.md)."""
    digits = F.hex(b)
    negative = F.substring(digits, 1, 1).isin(*"89ABCDEF")
    extended = F.lpad(digits, 16, F.when(negative, F.lit("F")).otherwise(F.lit("0")))
    return F.when(F.length(b) <= 8, F.conv(extended, 16, -10)).otherwise(unscaled_from_bytes(b).cast("string"))


def scaled_text(unscaled: Column, scale: Column) -> Column:
    """`unscaled * 10^-scale` as exact decimal text in scientific notation ("-1E-2" for -1 at scale 2);
    `unscaled` is integer text (`unscaled_text`).

    Spark casts such text to DECIMAL exactly (and to DOUBLE), whatever the
    scale of each row, with `unscaled` evaluated once.
    """
    return F.concat(unscaled, F.lit("E"), (-scale).cast("string"))


def numeric_parts(p: Parts, field: Column, d: Declared, mode: str | Column, has_schema: Column) -> dict[str, Column]:
    """A decimal's encoded bytes and their scale (`octets`, `scale`); `octets` is NULL for a plain number.

    Chosen once per value, so the byte decoding reads a column instead of repeating this choice.
    """
    bytes_encoded = F.when(
        F.coalesce(has_schema, F.lit(False)),
        # With a schema: a Decimal logical type is bytes; type string is decimal.handling.mode=string.
        (field["name"] == _DECIMAL_LOGICAL) | (field["type"] == "bytes"),
    ).otherwise(is_precise(mode))
    # io.debezium.data.VariableScaleDecimal: {"scale": n, "value": base64}, read only for such values.
    variable = F.when(p.is_object, p.raw)
    # NaN and infinities are a double's, never base64 (Spark also makes a JSON number beyond a double
    # the string "Infinity").
    bytes_text = p.is_string & bytes_encoded & (~p.text.isin(*_NOT_FINITE) if d.family == "float" else F.lit(True))
    octets = F.when(p.is_object, from_base64(F.try_variant_get(variable, "$.value", "string"))).when(
        bytes_text, from_base64(p.text)
    )
    declared_scale = F.lit(d.scale if d.scale is not None else 0)
    if d.scale is None:
        # A float column declares no scale: its bytes are decoded at the schema's, or not at all (wrong_type);
        # read at scale 0, 1234.50 was staged as 123450.0.
        declared_scale = F.when(~bytes_text, declared_scale)
    scale = (
        # No bytes at all are no number either (they were read as 0).
        F.when(F.length(octets) == 0, F.lit(None).cast("int"))
        .when(p.is_object, exact_integer(F.try_variant_get(variable, "$.scale", "string"), "int"))
        # Text that should be bytes and is not base64 has no scale: the value is not decoded (wrong_type).
        .when(bytes_text & from_base64(p.text).isNull(), F.lit(None).cast("int"))
        .otherwise(F.coalesce(exact_integer(field["parameters"]["scale"], "int"), declared_scale))
    )
    return {"octets": octets, "scale": scale}


def number_text(p: Parts) -> Column:
    """A number's value as text: a JSON number, or decimal.handling.mode=string, as it is; encoded bytes at
    their scale. Its own projection (`digits`): the decimal decoder reads it several times."""
    return F.when(p.octets.isNotNull(), scaled_text(unscaled_text(p.octets), p.scale)).when(p.scale.isNotNull(), p.text)


def from_base64(text: Column) -> Column:
    """Base64 text as bytes; NULL when it is not base64. Spark's `unbase64` skips characters outside the
    alphabet: the text "12.34" became the bytes of "1234", a wrong decimal."""
    return F.try_to_binary(text, F.lit("base64"))


def _micros_from(n: Column, unit: Column) -> Column:
    """Epoch (or time-of-day) count in `unit` as microseconds, NULL outside Spark's timestamp range."""
    millis_ok = _in_range(n, _MIN_MICROS // 1000, _MAX_MICROS // 1000)
    # Exact division of nanoseconds (a double would lose the last digits of a 19-digit count).
    nanos_to_micros = (n.cast("decimal(20,0)") / F.lit(1000)).cast("bigint")
    return (
        F.when((unit == "millis") & millis_ok, n * 1000)
        .when(unit == "micros", n)
        # Spark's timestamps hold microseconds: nanoseconds left over would be dropped (wrong_type instead).
        .when((unit == "nanos") & (F.pmod(n, F.lit(1000)) == 0), nanos_to_micros)
    )


def is_precise(mode: str | Column) -> Column:
    """The connector's `decimal.handling.mode` is `precise` (a string without a schema is base64 bytes):
    `mode` is a name, checked here, or a Column giving it per line (lines of several connectors staged in
    one job). A name is decided here: as a literal comparison, Spark warned of a trivially true predicate."""
    if isinstance(mode, Column):
        return mode == F.lit("precise")
    if mode not in DECIMAL_HANDLING:
        raise ValueError(f"decimal_handling must be one of {DECIMAL_HANDLING}, got {mode!r}")
    return F.lit(mode == "precise")


def decode_value(p: Parts, field: Column, d: Declared) -> Column:
    """One image field as the declared type; NULL when absent, JSON null or not decodable.

    `field` is the column's Connect field schema (`field_schema`), NULL
    without one: its logical name decides units (`numeric_parts` the bytes and scale of decimals).
    The placeholder for an unavailable value is handled by the caller.
    """
    sem = field["name"]
    text = p.text

    # Every decoder is exact or NULL (wrong_type): nothing is rounded, truncated or wrapped
    # (docs/staging.md, "Declared columns").
    if d.family == "integer":
        value = exact_integer(text, d.spark_type)
    elif d.family == "boolean":
        # JSON booleans and MySQL's TINYINT(1) 0/1 only: Spark's cast also reads "yes", "t" and " n ".
        value = F.when(text.isin("true", "false", "0", "1"), text.cast("boolean"))
    elif d.family == "string":
        value = text
    elif d.family in ("float", "decimal"):
        number_text = p.digits
        value = number_text.cast(d.spark_type)
        if d.family == "decimal":
            # The cast rounds digits beyond the declared scale; one it cannot hold is NULL already.
            fits = F.coalesce(p.octets.isNotNull() & (p.scale <= F.lit(d.scale)), F.lit(False))
            value = F.when(fits | _fits_scale(number_text, d.scale), value)
        else:
            # A finite number beyond a float's range would become an infinity.
            value = F.when(~F.abs(value).eqNullSafe(float("inf")) | number_text.isin(*_NOT_FINITE), value)
    elif d.family == "binary":
        value = F.when(p.is_string, from_base64(text))
    elif d.family == "date":
        days = p.number
        value = (
            # ISO dates only: Spark's cast also reads "2024" and drops the time of "2024-01-01T12:00".
            F.when(p.is_string, F.when(text.rlike(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"), text.cast("date"))).when(
                _in_range(days, _MIN_DAYS, _MAX_DAYS), F.date_from_unix_date(days.cast("int"))
            )
        )
    elif d.family == "timestamp":
        unit = _unit(sem, _TS_UNITS, d.unit)
        micros = _micros_from(p.number, unit)
        # ZonedTimestamp: an instant, ISO-8601 with `Z` or an offset, any fraction width, in Spark's range
        # (years 1 to 9999); digits beyond microseconds must be zeros (Spark's cast drops them). Spark's cast
        # also read "2024" and a time without an offset (in the session's time zone), and years past 9999.
        zoned = F.when(text.rlike(_INSTANT) & ~text.rlike(r"\.[0-9]{6}0*[1-9]"), text.cast("timestamp"))
        value = F.when(p.is_string, F.when(_in_range(F.unix_micros(zoned), _MIN_MICROS, _MAX_MICROS), zoned)).when(
            _in_range(micros, _MIN_MICROS, _MAX_MICROS), F.timestamp_micros(micros)
        )
    elif d.family == "time":
        unit = _unit(sem, _TIME_UNITS, d.unit)
        micros = _micros_from(p.number, unit)
        value = F.when(_in_range(micros, 0, 86_400_000_000), micros)
    else:  # pragma: no cover - Declared.parse refuses anything else
        raise ValueError(d.family)
    return F.when(p.present, value).cast(d.spark_type)


# An instant as ISO-8601 text (Java's ISO_OFFSET_DATE_TIME, as Debezium's ZonedTimestamp writes it).
_INSTANT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:[0-9]{2}(:[0-9]{2})?)$"
# A decimal number as text: sign, integer digits, fraction digits, exponent (`_fits_scale`).
_NUMBER = r"^[+-]?([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?$"


def _fits_scale(number: Column, scale: int) -> Column:
    """The decimal text `number` has no nonzero digit beyond `scale` fraction digits (casting it to that
    scale would not round it). "1.230" fits scale 2, "1.235" does not, "12E-1" fits 1."""
    whole, fraction, exponent = (F.regexp_extract(number, _NUMBER, i) for i in (1, 2, 3))
    digits = F.concat(whole, fraction)
    significant = F.regexp_replace(digits, "0+$", "")
    places = (
        F.length(fraction)
        - F.when(exponent == "", F.lit(0)).otherwise(exponent.try_cast("int"))
        - (F.length(digits) - F.length(significant))
    )
    zero = significant.rlike("^0*$")
    return F.coalesce(number.rlike(_NUMBER) & (zero | (places <= F.lit(scale))), F.lit(False))


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


def version(e: dict[str, Column], flavour: str) -> tuple[Column, Column]:
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
    source = e["source"]
    if flavour == "postgres":
        lsn = exact_integer(source["lsn"], "bigint")
        packed = lsn * 2 + F.when(e["op"] == "r", F.lit(0)).otherwise(F.lit(1))
        return F.when(_in_range(lsn, 0, LSN_MAX), packed), source["lsn"].isNotNull()
    if flavour in ("mysql", "mariadb"):
        file_no = exact_integer(F.regexp_extract(source["file"], r"\.(\d+)$", 1), "bigint")
        pos = exact_integer(source["pos"], "bigint")
        row = F.coalesce(exact_integer(source["row"], "bigint"), F.lit(0))
        present = source["file"].isNotNull() & source["pos"].isNotNull()
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


def source_ts(e: dict[str, Column]) -> tuple[Column, Column]:
    """(`_source_ts`, present): commit time at the source, from `source.ts_us` when sent, else `source.ts_ms`."""
    source = e["source"]
    us, ms = exact_integer(source["ts_us"], "bigint"), exact_integer(source["ts_ms"], "bigint")
    # A `ts_us` that is sent decides, read or not: one that is not a count is not replaced by `ts_ms`.
    micros = F.when(source["ts_us"].isNotNull(), us).when(
        _in_range(ms, _MIN_MICROS // 1000, _MAX_MICROS // 1000), ms * 1000
    )
    present = source["ts_us"].isNotNull() | source["ts_ms"].isNotNull()
    return F.when(_in_range(micros, _MIN_MICROS, _MAX_MICROS), F.timestamp_micros(micros)), present
