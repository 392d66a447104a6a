"""`stage_topic`: a Debezium topic's landed lines as typed change events, from declared columns.

One call reads the topic's new batches once, parses each line once, and
returns one DataFrame holding every line: change events typed for a
`vcmt_upsert` mart (`_kind = 'change'`), and, in the same rows' shape, the
lines that are not events (malformed lines with their reason and raw text,
truncates, tombstones, heartbeats, ...). One model writes both, so the
quarantine needs no second read of the raw lines and no cache (issue 15):
marts read `_kind = 'change'`, the quarantine is `_kind = 'malformed'` of
the same staged table. See docs/staging.md.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from vcmt_staging import contract
from vcmt_staging import debezium as dbz

# Characters a declared column name may not contain (see _decode_steps).
_NAME_REFUSED = (" ", ",", ";", "{", "}", "(", ")", "\n", "\t", "=", ".", "`")
# The staged columns after the declared ones, in order, with their Spark types (`_judge_stage` casts to them).
STAGED_COLUMNS = {
    "_unavailable": "array<string>",
    "_version": "bigint",
    "sign": "tinyint",
    "_op": "string",
    "_source_ts": "timestamp",
    "_kind": "string",
    "_reason": "string",
    "_raw": "string",
    "_source_file": "string",
    "_batch_id": "bigint",
}
RESERVED = tuple(STAGED_COLUMNS)

# The run summaries of the model this thread runs under dbt's `vcmt_spark` adapter, which puts them in dbt's
# record (dbt.log, the model's status line, run_results.json); None elsewhere, where they are printed.
_summaries: ContextVar[list[str] | None] = ContextVar("vcmt_staging_summaries", default=None)


@contextmanager
def collecting_summaries() -> Iterator[list[str]]:
    """Collect the run summaries reported in this thread (instead of printing them) while the block runs."""
    found: list[str] = []
    token = _summaries.set(found)
    try:
        yield found
    finally:
        _summaries.reset(token)


def report(text: str) -> None:
    """A run summary: to the collector of `collecting_summaries` when one is open, else to stdout."""
    found = _summaries.get()
    if found is None:
        print(text, flush=True)
    else:
        found.append(text)


def read_lines(
    session, topic_path: str, exclude_batches: Iterable[int] = (), only_batches: Iterable[int] | None = None
) -> DataFrame:
    """The raw lines under `<topic_path>/_batch_id=<N>/`, as text, with `source_file` and `_batch_id`; no line
    when the topic has no batch folder yet (`landed_batches`, which checks every folder's name first).

    The batch filters are on the partition column, so Spark prunes the
    folders of excluded batches before reading any file: staged batches are
    never read again.
    """
    lines, landed = landed_batches(session, topic_path)
    if not landed:
        return session.createDataFrame([], "raw string, _source_file string, _batch_id bigint")
    # The filters go on the partition column as Spark discovered it, before the checked batch id is derived
    # from it: a filter on the derived column is not a partition filter, and every batch would be read again.
    # Spark typed that column from the folder names, which `landed_batches` has checked are whole numbers.
    staged = staged_predicate(F.col("_batch_id"), exclude_batches)
    if staged is not None:
        lines = lines.where(~staged)
    if only_batches is not None:
        lines = lines.where(F.col("_batch_id").isin(sorted({int(b) for b in only_batches})))
    return lines.select(
        F.col("value").alias("raw"),
        F.col("_metadata.file_name").alias("_source_file"),
        batch_id(F.col("_batch_id"), F.col("_metadata.file_path")).alias("_batch_id"),
    )


# A landed batch folder's name; N is a whole number of 64 bits, digits only (docs/staging.md, "Batch ids").
BATCH_FOLDER = "_batch_id=<N>, N a whole number that fits 64 bits (0 to 9223372036854775807)"
_DIGITS = "[0-9]+"
_MAX_BATCH = 2**63 - 1
_FOLDER_OF = re.compile(r"/_batch_id=([^/]*)/[^/]*$")


def landed_batches(session, topic_path: str) -> tuple[DataFrame, list[int]]:
    """The topic's text as Spark reads it, and the batch ids of its `_batch_id=<N>` folders (those holding a
    file; none when the topic has none yet), each folder name parsed here: one that is not a whole number of
    64 bits fails the run naming the folder, before anything is read or written (ValueError).

    Spark's own partition type inference made one `_batch_id=1.5` folder turn every batch id into a double,
    truncated back to the staged batch 1 (which it replaced); `1e3` became batch 1000, and a date-shaped name
    failed with Spark's cast error. Once every name here is a whole number that fits 64 bits, Spark types
    the column as an integer, exactly. The listing is the read's own (`inputFiles`): no Spark job, no second
    listing of the topic.
    """
    lines = session.read.format("text").load(topic_path)
    return lines, sorted({landed_batch(path) for path in lines.inputFiles()})


def landed_batch(path: str) -> int:
    """The batch id of a landed file's `_batch_id=<N>` folder; a file elsewhere, or in a folder that is not a
    whole number of 64 bits, fails the run naming it (ValueError)."""
    match = _FOLDER_OF.search(path)
    if match is None:
        raise ValueError(
            f"a landed file must be in a batch folder of its topic, named {BATCH_FOLDER}; move "
            f"{path} into one. Nothing was staged."
        )
    name = unquote(match[1])
    if re.fullmatch(_DIGITS, name) is None or int(name) > _MAX_BATCH:
        raise ValueError(
            f"a landed batch folder must be named {BATCH_FOLDER}; rename the folder "
            f"{unquote(path.rsplit('/', 1)[0])}. Nothing was staged."
        )
    return int(name)


def batch_id(folder: Column, path: Column) -> Column:
    """The batch id of a `_batch_id=<N>` folder as a BIGINT, or the run fails naming the file.

    Batch ids are 64-bit end to end: a timestamp-shaped `20270101000000` or a number past 2^32, cast to
    32 bits, wrapped (negative, or a small number already staged) and was skipped or read out of order.
    A folder that is not a 64-bit integer is refused, never staged as a NULL, truncated or wrapped batch
    (docs/staging.md, "Batch ids"): `landed_batches` refuses it before the read; this refuses one that landed
    since (a folder typed as a double by Spark reads `1.0`, not digits).
    """
    digits = folder.cast("string")
    return F.coalesce(
        F.when(digits.rlike(f"^{_DIGITS}$"), digits.try_cast("bigint")),
        F.raise_error(
            F.concat(F.lit(f"a landed batch folder must be named {BATCH_FOLDER}; rename the folder holding "), path)
        ),
    )


def staged_predicate(batch: Column, batches: Iterable[int]) -> Column | None:
    """`batch` is one of `batches` (None for none): each run of two or more consecutive numbers as one
    BETWEEN, the single numbers in one IN, OR-ed as a balanced tree.

    With a literal per staged batch, every run's plan grew with the batches ever staged, and its analysis
    with it; a run is one term whatever its length (docs/staging.md, "One read and one parse per batch").
    The tree is balanced because a Spark Connect plan is a protobuf message, refused past a nesting depth
    that a chain of about 50 ORs reaches (a quiet topic's batches have gaps: batch numbers are shared by
    all topics and a batch without lines lands nothing).
    """
    runs: list[list[int]] = []
    for b in sorted({int(b) for b in batches}):
        if runs and b == runs[-1][1] + 1:
            runs[-1][1] = b
        else:
            runs.append([b, b])
    terms = [batch.between(lo, hi) for lo, hi in runs if hi > lo]
    single = [lo for lo, hi in runs if hi == lo]
    if single:
        terms.append(batch.isin(single))
    while len(terms) > 1:
        odd = [terms[-1]] if len(terms) % 2 else []
        terms = [a | b for a, b in zip(terms[::2], terms[1::2], strict=False)] + odd
    return terms[0] if terms else None


class _Steps:
    """Stands for the lines while the decoding is built: records each projection's columns.

    The decoding only ever projects (`select`), and its Column expressions refer to columns by name,
    so the same expressions apply to any batch's lines. Building them costs thousands of calls
    into the JVM (seconds per model); recorded once per session and topic shape, each later batch
    only replays the projections (docs/staging.md, "One read and one parse per batch").
    """

    def __init__(self, steps: tuple = ()) -> None:
        self.steps = steps

    def select(self, *cols) -> _Steps:
        return _Steps((*self.steps, cols))


_RECORDED: dict[tuple, tuple[object, tuple]] = {}


def decode_lines(
    lines: DataFrame,
    flavour: str,
    key: Sequence[str],
    columns: Mapping[str, str],
    decimal_handling: str | Column = "precise",
    prefix: str | None = None,
) -> DataFrame:
    """Every line of `lines` (columns raw, _source_file, _batch_id) decoded; see `stage_topic`. `prefix`:
    the topic's Connect schema prefix (`schema_prefix_of`), None to parse every line whole."""
    session = lines.sparkSession
    if not isinstance(decimal_handling, str):
        # A Column decimal mode is an expression of the caller's: built afresh, not recorded.
        steps = _decode_steps(_Steps(), flavour, key, columns, decimal_handling, prefix).steps
    else:
        shape = (flavour, tuple(key), tuple(columns.items()), decimal_handling, prefix)
        recorded = _RECORDED.get(shape)
        if recorded is None or recorded[0] is not session:
            recorded = (session, _decode_steps(_Steps(), flavour, key, columns, decimal_handling, prefix).steps)
            _RECORDED[shape] = recorded
        steps = recorded[1]
    for cols in steps:
        lines = lines.select(*cols)
    return lines


def _decode_steps(
    lines: _Steps,
    flavour: str,
    key: Sequence[str],
    columns: Mapping[str, str],
    decimal_handling: str | Column = "precise",
    prefix: str | None = None,
) -> _Steps:
    """The decoding's projections, recorded on `lines`: one stage each (docs/staging.md, "Output")."""
    declared = _declared_columns(flavour, key, columns)
    opened = _parse_stage(lines, declared, prefix)
    typed = _envelope_stage(opened, declared, flavour)
    values = _value_stage(typed, declared, decimal_handling)
    return _judge_stage(values, declared, key)


def _declared_columns(flavour: str, key: Sequence[str], columns: Mapping[str, str]) -> dict[str, dbz.Declared]:
    """The declared columns, parsed, after every check of the model's arguments (ValueError naming the fix)."""
    if flavour not in dbz.FLAVOURS:
        raise ValueError(f"flavour must be one of {dbz.FLAVOURS}, got {flavour!r}")
    if not key:
        raise ValueError("key: at least one column")
    missing = [k for k in key if k not in columns]
    if missing:
        raise ValueError(f"key columns {missing} must be declared in columns {list(columns)}")
    # Spark resolves column names without regard to case: `SIGN` is `sign`.
    clash = [c for c in columns if c.lower() in RESERVED or c.lower().startswith("_vcmt_")]
    if clash:
        raise ValueError(
            f"columns {clash} collide with the staged change-event columns {RESERVED} (in any case) "
            "or the decoding's own `_vcmt_` columns; rename them in the model's `columns`"
        )
    declared = {name: dbz.Declared.parse(t) for name, t in columns.items()}
    # A name is a column of the staged Parquet table and a Spark column reference: Parquet refuses these
    # characters, and a dot or backtick would be read as a path.
    odd = [name for name in declared if not name or any(c in name for c in _NAME_REFUSED)]
    if odd:
        raise ValueError(
            f"columns {odd}: a declared name must be non-empty, without any of "
            f"{' '.join(repr(c) for c in _NAME_REFUSED)}; rename it in the model's `columns`"
        )
    # Spark resolves struct fields without regard to case: two such names would be one field.
    folded: dict[str, list[str]] = {}
    for name in declared:
        folded.setdefault(name.lower(), []).append(name)
    same = [names for names in folded.values() if len(names) > 1]
    if same:
        raise ValueError(f"columns {same} differ only in case; Spark cannot tell them apart: declare one of each")
    return declared


def _parse_stage(lines: _Steps, declared: Mapping[str, dbz.Declared], prefix: str | None) -> _Steps:
    """Stages 1-2: the one parse of each line, into the fields staging reads (a line with the topic's schema
    prefix from its payload on); then the line's value, its Connect schema and its envelope fields."""
    parsed = lines.select(
        "raw", "_source_file", "_batch_id", dbz.parse(F.col("raw"), declared, prefix).alias("_vcmt_parsed")
    )
    line = F.get(F.col("_vcmt_parsed"), 0)
    opened = parsed.select(
        # Only the line's value travels on: the parse's wide type would make every later projection costly
        # to analyse.
        "raw",
        "_source_file",
        "_batch_id",
        dbz.one_value(F.col("_vcmt_parsed")).alias("_vcmt_one"),
        line.alias("_vcmt_line"),
        dbz.line_schema(line, F.col("raw"), declared, prefix).alias("_vcmt_schema"),
    )
    line, schema = F.col("_vcmt_line"), F.col("_vcmt_schema")
    return opened.select("*", *[dbz.envelope_field(line, n, schema).alias(f"_vcmt_e_{n}") for n in dbz.ENVELOPE_FIELDS])


def _envelope_stage(opened: _Steps, declared: Mapping[str, dbz.Declared], flavour: str) -> _Steps:
    """Stage 3: the line's kind, op, image, version and source time; then each declared column's parsed
    value and Connect field schema."""
    line, schema = F.col("_vcmt_line"), F.col("_vcmt_schema")
    e = {n: F.col(f"_vcmt_e_{n}") for n in dbz.ENVELOPE_FIELDS}
    version, version_present = dbz.version(e, flavour)
    ts, ts_present = dbz.source_ts(e)
    typed = opened.select(
        "raw",
        "_source_file",
        "_batch_id",
        "_vcmt_one",
        dbz.kind(F.col("raw"), F.col("_vcmt_one"), line, e, schema["name"]).alias("_kind"),
        e["op"].alias("_op"),
        dbz.image(e).alias("img"),
        schema.isNotNull().alias("has_schema"),
        dbz.image_fields(schema).alias("fields"),
        version.alias("_version"),
        version_present.alias("version_present"),
        ts.alias("_source_ts"),
        ts_present.alias("ts_present"),
    )
    # Each stage below is its own projection, so an expression used several times (a column's raw
    # value, the reason) is computed once and referenced, and the generated code stays small.
    img, flds = F.col("img"), F.col("fields")
    return typed.select(
        "*",
        *[
            col
            for name in declared
            for col in (img[name].alias(f"{name}__raw"), dbz.field_schema(flds, name).alias(f"{name}__field"))
        ],
    )


def _value_stage(located: _Steps, declared: Mapping[str, dbz.Declared], decimal_handling: str | Column) -> _Steps:
    """Stages 4-5: the JSON text of values whose JSON type matters, then what the decoders ask of each value
    (present, text, JSON type, number), a decimal's encoded bytes and scale, then its text, each computed once; then
    whether a value is the unavailable placeholder, and its decoded value."""
    variants = [name for name, d in declared.items() if not dbz.is_text(d)]
    with_json = located.select("*", *[F.to_json(F.col(f"{name}__raw")).alias(f"{name}__json") for name in variants])
    parted = with_json.select(
        "*",
        *[
            col.alias(f"{name}__{part}")
            for name, d in declared.items()
            for part, col in dbz.Parts.columns(
                F.col(f"{name}__raw"), F.col(f"{name}__json") if name in variants else None, d, F.col("raw")
            ).items()
        ],
    )
    numeric = [name for name, d in declared.items() if d.family in ("float", "decimal")]

    def parts(name: str, encoded: bool = True, digits: bool = True) -> dbz.Parts:
        """The column references of a value's parts (with a decimal's bytes and scale once `encoded`, and its
        text once `digits`)."""
        return dbz.Parts.named(name, encoded and name in numeric, digits and encoded and name in numeric)

    encoded = parted.select(
        "*",
        *[
            col.alias(f"{name}__{part}")
            for name in numeric
            for part, col in dbz.numeric_parts(
                parts(name, encoded=False),
                F.col(f"{name}__field"),
                declared[name],
                decimal_handling,
                F.col("has_schema"),
            ).items()
        ],
    )
    numbers = encoded.select(
        "*", *[dbz.number_text(parts(name, digits=False)).alias(f"{name}__digits") for name in numeric]
    )
    return numbers.select(
        "*",
        *[
            col
            for name, d in declared.items()
            for col in (
                dbz.is_unavailable(parts(name)).alias(f"{name}__unavailable"),
                dbz.decode_value(parts(name), F.col(f"{name}__field"), d).alias(f"{name}__value"),
            )
        ],
    )


def _judge_stage(values: _Steps, declared: Mapping[str, dbz.Declared], key: Sequence[str]) -> _Steps:
    """Stage 6: the quarantine reason (contract.REASONS, first that applies) and whether the line is a valid
    change; then the staged row (`stage_topic`'s output)."""

    def bad_value(name: str) -> Column:
        return F.col(f"{name}__present") & ~F.col(f"{name}__unavailable") & F.col(f"{name}__value").isNull()

    null_key = F.col("img").isNull()
    for k in key:
        # A placeholder is not a key value either.
        null_key = null_key | ~F.col(f"{k}__present") | F.col(f"{k}__unavailable")
    # A source time that is sent but not a time is a wrong type; a missing one is not a reason.
    wrong_type = F.col("ts_present") & F.col("_source_ts").isNull()
    for name in declared:
        wrong_type = wrong_type | bad_value(name)
    kind = F.col("_kind")
    # A change line's reasons, in the contract's order (the first two are told by the parse).
    position = {"null_version": ~F.col("version_present"), "version_out_of_range": F.col("_version").isNull()}
    rules = {"null_key": null_key, **position, "wrong_type": wrong_type}
    assert ("bad_json", "unknown_op", *rules) == contract.REASONS, "the reasons' order is the contract's"
    # A truncate needs its position only: without one, the mart would delete up to an unknown point.
    truncate_reason = F.lit(None).cast("string")
    for name, broken in reversed(position.items()):
        truncate_reason = F.when(broken, F.lit(name)).otherwise(truncate_reason)
    reason = (
        F.when(kind == "malformed", F.when(F.col("_vcmt_one"), F.lit("unknown_op")).otherwise(F.lit("bad_json")))
        .when(kind == "truncate", truncate_reason)
        .when(kind != "change", F.lit(None).cast("string"))
    )
    for name, broken in rules.items():
        reason = reason.when(broken, F.lit(name))
    judged = values.select("*", reason.alias("_reason")).select(
        "*", ((F.col("_kind") == "change") & F.col("_reason").isNull()).alias("_valid")
    )
    valid = F.col("_valid")
    # A change or truncate line that cannot be staged is malformed: only valid ones keep their kind.
    out_kind = F.when(
        F.col("_kind").isin("change", "truncate") & F.col("_reason").isNotNull(), F.lit("malformed")
    ).otherwise(F.col("_kind"))
    unavailable = F.filter(
        F.array(*[F.when(F.col(f"{n}__unavailable"), F.lit(n)) for n in declared]), lambda c: c.isNotNull()
    )
    # A truncate keeps its position: the mart removes every row at or below it (`truncate_when`).
    positioned = valid | (out_kind == "truncate")
    staged = {
        "_unavailable": F.when(valid, unavailable),
        "_version": F.when(positioned, F.col("_version")),
        "sign": F.when(positioned, F.when(F.col("_op") == "d", F.lit(-1)).otherwise(F.lit(1))),
        "_op": F.col("_op"),
        "_source_ts": F.col("_source_ts"),
        "_kind": out_kind,
        "_reason": F.col("_reason"),
        # The raw text of lines that need a look: malformed ones, and truncates (the mart must be re-snapshotted).
        "_raw": F.when(out_kind.isin("malformed", "truncate"), F.col("raw")),
        "_source_file": F.col("_source_file"),
        # Last: Spark's insert overwrite takes partition columns at the end.
        "_batch_id": F.col("_batch_id"),
    }
    return judged.select(
        *[F.when(valid & ~F.col(f"{n}__unavailable"), F.col(f"{n}__value")).alias(n) for n in declared],
        *[staged[name].cast(t).alias(name) for name, t in STAGED_COLUMNS.items()],
    )


def nothing_staged(session, declared: Mapping[str, dbz.Declared]) -> DataFrame:
    """No row, in the columns and types of `stage_topic`'s output, built without the decoding and without
    reading the topic (a local relation: no Spark job, no listing)."""
    types = {**{n: d.spark_type for n, d in declared.items()}, **STAGED_COLUMNS}
    return session.createDataFrame([], ", ".join(f"`{n}` {t}" for n, t in types.items()))


def stage_topic(
    session,
    topic_path: str,
    flavour: str,
    key: Sequence[str],
    columns: Mapping[str, str],
    *,
    exclude_batches: Iterable[int] = (),
    only_batches: Iterable[int] | None = None,
    decimal_handling: str | Column = "precise",
) -> DataFrame:
    """Every line of a topic's new batches, typed from declared columns, ready for a `vcmt_upsert` mart.

    `topic_path`: the folder holding `_batch_id=<N>/` folders of JSON lines.
    `flavour`: `postgres`, `mysql` or `mariadb` (how `_version` is made).
    `key`: the key columns. `columns`: name -> declared type (Declared.parse).
    `exclude_batches`: batches already staged (see `staged_batches`); they
    are not read. `decimal_handling`: the connector's
    `decimal.handling.mode`, used for lines without a schema (a Column
    for a mode per line, computed from `_batch_id` or `_source_file`).

    Output, one row per line: the declared columns, `_unavailable` (names of
    columns whose value Debezium did not have, e.g. unchanged TOAST; the
    column is NULL), `_version`, `sign` (-1 delete, +1 otherwise), `_op`,
    `_source_ts`, `_kind` (dbz.KINDS), `_reason` (dbz.REASONS, for
    malformed lines), `_raw`, `_source_file`, `_batch_id`. Typed columns
    are NULL unless `_kind = 'change'`; `_version` and `sign` are set on
    changes and on truncates (a `vcmt_upsert` mart with `truncate_when`
    removes every row at or below a truncate's `_version`).
    """
    lines = read_lines(session, topic_path, exclude_batches, only_batches)
    return _staged_lines(session, topic_path, lines, flavour, key, columns, decimal_handling)


def _staged_lines(
    session,
    topic_path: str,
    lines: DataFrame,
    flavour: str,
    key: Sequence[str],
    columns: Mapping[str, str],
    decimal_handling: str | Column,
) -> DataFrame:
    """`stage_topic` of lines read already (`read_lines`)."""
    prefix = schema_prefix_of(session, topic_path, lines, columns)
    return decode_lines(lines, flavour, key, columns, decimal_handling, prefix)


# How many of a topic's first new lines are looked at for a schema prefix (a tombstone or a heartbeat
# may come first).
PEEK_LINES = 16
# topic path -> (the session that read it, its schema prefix or None): read once per session and topic.
_PREFIXES: dict[str, tuple[object, str | None]] = {}


def schema_prefix_of(
    session, topic_path: str, lines: DataFrame, columns: Mapping[str, str] | None = None
) -> str | None:
    """The Connect schema prefix (`dbz.schema_prefix`) staging parses once for `topic_path`: the first
    among the first new `lines`, read once per session and topic (one small Spark job); None when none
    carries a schema. Those lines also check the declared `columns` (`refuse_unknown_units`).

    Lines with another schema (after a DDL change, say) are parsed whole, with the same result, until a
    new session reads the topic again (docs/staging.md, "Known Connect schemas").
    """
    known = _PREFIXES.get(topic_path)
    if known is not None and known[0] is session:
        return known[1]
    # As bytes: a line that is not UTF-8 reaches Python as text only through a lossy (classic) or failing
    # (Spark Connect) conversion; such a line has no prefix.
    first = lines.select(F.col("raw").cast("binary").alias("raw")).limit(PEEK_LINES).collect()
    if not first:  # nothing new to read: ask again next time
        return None
    texts = []
    for row in first:
        try:
            texts.append(bytes(row["raw"] or b"").decode("utf-8"))
        except UnicodeDecodeError:
            continue
    prefix = next((p for p in map(dbz.schema_prefix, texts) if p), None)
    if columns is not None and prefix is None:  # a topic without Connect schemas
        refuse_unknown_units(texts, columns)
    _PREFIXES[topic_path] = (session, prefix)
    return prefix


def unitless(columns: Mapping[str, str]) -> list[str]:
    """The declared columns whose numbers have no unit without a Connect schema: plain `timestamp`, `time`."""
    return [
        name
        for name, t in columns.items()
        if (d := dbz.Declared.parse(t)).family in ("timestamp", "time") and d.unit is None
    ]


def unit_fix(name: str, declared: str) -> str:
    """What to declare for a `unitless` column."""
    return (
        f"declare `{name}` as `{declared}_micros` or `{declared}_millis`, the unit of the connector's numbers "
        "(time.precision.mode adaptive: microseconds for PostgreSQL timestamp/time and MySQL DATETIME(4..6), "
        "milliseconds for precision 0..3; connect: milliseconds)"
    )


def refuse_unknown_units(texts: Sequence[str], columns: Mapping[str, str]) -> None:
    """Refuse a column declared without a unit (`unitless`) whose value is a JSON number in a line without a
    Connect schema: its unit cannot be known, so every change line would be quarantined as wrong_type
    (docs/staging.md, "Declared columns"). A ZonedTimestamp (ISO text) needs no unit."""
    names = unitless(columns)
    if not names:
        return
    for text in texts:
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if not isinstance(doc, dict) or doc.get("schema") is not None:
            continue
        envelope = doc["payload"] if isinstance(doc.get("payload"), dict) else doc
        for image in (envelope.get("after"), envelope.get("before")):
            for name in names:
                value = image.get(name) if isinstance(image, dict) else None
                if isinstance(value, int | float) and not isinstance(value, bool):
                    raise ValueError(
                        f"column `{name}` is declared `{columns[name]}`, but the topic's lines carry no Kafka Connect "
                        f"schema and its value is a number ({value}) whose unit is unknown: every change line would be "
                        f"quarantined as wrong_type. {unit_fix(name, columns[name].strip().lower())}."
                    )


def staged_batches(session, table: str) -> list[int]:
    """The `_batch_id` partitions `table` holds already ([] when it does not exist).

    From the metastore (`show partitions`): no Spark job, and no file of the
    staged data is read.
    """
    if not session.catalog.tableExists(table):
        return []
    return _partition_batches(session, table)


def _partition_batches(session, table: str) -> list[int]:
    """The `_batch_id` partitions of `table`, which exists: one metastore call (`show partitions`)."""
    batches = []
    for row in session.sql(f"show partitions {table}").collect():
        for part in row[0].split("/"):
            name, _, value = part.partition("=")
            if name == "_batch_id":
                batches.append(int(value))
    return sorted(set(batches))


def stage_new_batches(
    dbt,
    session,
    topic_path: str,
    flavour: str,
    key: Sequence[str],
    columns: Mapping[str, str],
    *,
    decimal_handling: str | Column = "precise",
    max_malformed_share: float = 0.5,
) -> DataFrame:
    """The body of a Python staging model: the topic at `topic_path` through `stage_topic`, without the
    batches the model's table holds already (`staged_batches`), counted and checked (`checked`): a batch
    with more than `max_malformed_share` of its lines malformed fails the run before anything is written.

    Pass `topic_path=dbt.config.meta_get("topic_path")` from the model itself: dbt gives a Python model
    only the config keys its own file reads, and `dbt.config(...)` must be in that file as well.
    """
    if not topic_path:
        raise ValueError(
            f"{dbt.this}: `topic_path` is empty; set `meta: {{topic_path: ...}}` in the model's yml "
            "config to the topic's folder of `_batch_id=<N>/` batches, e.g. "
            '"{{ var(\'vcmt_lake_root\') }}/raw/<topic>", and pass dbt.config.meta_get("topic_path")'
        )
    model = str(dbt.this)
    # The arguments are checked on every run, one with nothing new included.
    _check_share(model, max_malformed_share)
    declared = _declared_columns(flavour, key, columns)
    if isinstance(decimal_handling, str):
        dbz.is_precise(decimal_handling)
    # An incremental run's table exists (dbt found it): no `tableExists` round trip before the partitions.
    done = _partition_batches(session, model) if dbt.is_incremental else []
    # The raw files are fingerprinted before the read lists them: a file landing or changing in between is
    # read but not recorded, so the next run stages its batch again (never the other way round).
    restaged, pending, listing = _compare_with_record(session, model, topic_path, done, dbt.is_incremental)
    skipped = set(done) - set(restaged)
    if dbt.is_incremental and not listing.has_lines(skipped):
        # Nothing new, known from the fingerprints' listing: the topic is not read again, no decoding is built,
        # nothing is counted, and the result (no row) is not written (`unwritten`; docs/staging.md, "Keeping
        # Spark warm"). The listing's files get the refusals a read makes.
        for path in listing.paths:
            landed_batch(path)
        _refuse_unreplaceable(model, topic_path, restaged, [])
        _PENDING.pop(model, None)
        _UNWRITTEN.add(model)
        report(summary(model, []))
        return nothing_staged(session, declared)
    _UNWRITTEN.discard(model)
    lines = read_lines(session, topic_path, exclude_batches=sorted(skipped))
    _PENDING[model] = pending
    staged = _staged_lines(session, topic_path, lines, flavour, key, columns, decimal_handling)
    return checked(staged, model, columns, max_malformed_share, restaged=restaged, topic_path=topic_path)


# The record of the raw files each staged batch was built from: a side table `<model>__raw_files` in the
# Spark catalog, appended to after each write of the model's table (docs/staging.md, "Late and amended
# batches"). Per batch, the rows of its latest `run` are the files its staged partition holds the lines of.
RECORD_SUFFIX = "__raw_files"
RECORD_SCHEMA = "_batch_id bigint, file string, size bigint, modified bigint, run bigint"
_FILE_OF = re.compile(r"/_batch_id=([^/]*)/([^/]*)$")
# model table -> (record table, rows to write once the model's table is written, restaged batches, whether the
# rows replace the record).
_PENDING: dict[str, tuple[str, list[tuple], dict[int, str], bool]] = {}
# Model tables whose last `stage_new_batches` result has no row because nothing was new: not written.
_UNWRITTEN: set[str] = set()
# A record appended to by this many runs is rewritten whole, with each batch's latest rows only, by the next
# run that stages something (each append is a file: the record's scan would grow with every run).
RECORD_COMPACT_RUNS = 64


def raw_files_table(model: str) -> str:
    """The record of `model`'s staged raw files."""
    return f"{model}{RECORD_SUFFIX}"


@dataclass(frozen=True)
class Landed:
    """The topic's files as one listing saw them: every path, and the batch folders' files, batch -> file name
    -> (size, modification time in ms)."""

    paths: tuple[str, ...]
    batches: Mapping[int, Mapping[str, tuple[int, int | None]]]

    def has_lines(self, skipped: Iterable[int]) -> bool:
        """Whether a batch outside `skipped` holds a line: a file of one byte or more."""
        skip = set(skipped)
        return any(size > 0 for b, files in self.batches.items() if b not in skip for size, _ in files.values())


def _fingerprints(session, topic_path: str, record: str | None) -> tuple[Landed, dict, dict[int, int], int]:
    """The topic's landed files (`Landed`), and, from `record` (None: none read), the files each recorded batch
    was staged from in its latest run, that run, and how many runs appended to the record.

    One Spark job: a listing of the topic (Spark's binaryFile source, which opens no file when its content
    is not asked for) and a scan of the record, as one union. An empty file has no row in a scan: it is known
    from the listing's paths (`inputFiles`, no job), with size 0 and no modification time."""
    files = session.read.format("binaryFile").option("recursiveFileLookup", "true").load(topic_path)
    listing = files.select(
        F.lit(None).cast("bigint").alias("_batch_id"),
        F.col("path").alias("file"),
        F.col("length").alias("size"),
        F.unix_millis("modificationTime").alias("modified"),
        F.lit(None).cast("bigint").alias("run"),
    )
    if record is not None:
        listing = listing.unionByName(session.table(record).select("_batch_id", "file", "size", "modified", "run"))
    landed: dict[int, dict[str, tuple[int, int | None]]] = {}

    def land(path: str, fingerprint: tuple[int, int | None]) -> None:
        match = _FILE_OF.search(path)
        name = unquote(match[1]) if match else ""
        if re.fullmatch(_DIGITS, name) is None or int(name) > _MAX_BATCH:
            return  # not a batch folder's file: `landed_batches` refuses it, naming the folder
        landed.setdefault(int(name), {})[unquote(match[2])] = fingerprint

    paths = tuple(files.inputFiles())
    for path in paths:
        land(path, (0, None))
    rows: list = []
    for r in listing.collect():
        if r["run"] is not None:
            rows.append(r)
        else:
            land(r["file"], (r["size"], r["modified"]))
    latest: dict[int, int] = {}
    for r in rows:
        latest[r["_batch_id"]] = max(latest.get(r["_batch_id"], -1), r["run"])
    recorded: dict[int, dict[str, tuple[int, int]]] = {}
    for r in rows:
        if r["run"] == latest[r["_batch_id"]]:
            recorded.setdefault(r["_batch_id"], {})[r["file"]] = (r["size"], r["modified"])
    return Landed(paths, landed), recorded, latest, len({r["run"] for r in rows})


def _create_record(session, record: str) -> None:
    session.sql(f"create table if not exists {record} ({RECORD_SCHEMA}) using parquet")


def _append_record(session, record: str, rows: list[tuple], overwrite: bool = False) -> None:
    """Append `rows` to the record, or replace it with them (one write; the record's files appear whole or, on
    an object store, one by one, and a replaced record is empty for a moment: a batch whose rows are missing,
    in part or whole, differs from its files, and is staged again)."""
    session.createDataFrame(rows, RECORD_SCHEMA).write.insertInto(record, overwrite=overwrite)


def _difference(landed: Mapping[str, tuple], recorded: Mapping[str, tuple] | None) -> str | None:
    """Why a staged batch must be staged again (None: its files are the recorded ones)."""
    if recorded is None:
        return "not recorded"
    added = len(landed.keys() - recorded.keys())
    removed = len(recorded.keys() - landed.keys())
    changed = sum(1 for f in landed.keys() & recorded.keys() if landed[f] != recorded[f])
    parts = [
        _plural(n, f"file {what}", f"files {what}")
        for n, what in ((added, "added"), (changed, "changed"), (removed, "removed"))
        if n
    ]
    return ", ".join(parts) or None


def _compare_with_record(
    session, model: str, topic_path: str, done: Sequence[int], incremental: bool
) -> tuple[dict[int, str], tuple[str, list[tuple], dict[int, str], bool], Landed]:
    """The staged batches to stage again, each with why (`_difference`), what to record once this run's
    result is written (`record_staged`), and the topic's files as listed (`Landed`).

    A first run or full refresh empties the record before anything is written. An incremental run's table
    staged before the record existed has its batches recorded as they are now (nothing restaged)."""
    record = raw_files_table(model)
    if not incremental:
        _create_record(session, record)
        session.sql(f"truncate table {record}")
        listing, recorded, latest, appends = _fingerprints(session, topic_path, None)
    elif session.catalog.tableExists(record):
        listing, recorded, latest, appends = _fingerprints(session, topic_path, record)
    else:
        listing, _, latest, appends = _fingerprints(session, topic_path, None)
        _create_record(session, record)
        landed = listing.batches
        adopted = [(b, f, s, m, 0) for b in done for f, (s, m) in sorted(landed.get(b, {}).items())]
        if adopted:
            _append_record(session, record, adopted)
        recorded = {b: landed[b] for b in done if b in landed}
        latest = dict.fromkeys(recorded, 0)
    landed = listing.batches
    # A staged batch whose folder is gone (raw batches pruned after staging) keeps its staged lines.
    restaged = {b: why for b in done if b in landed and (why := _difference(landed[b], recorded.get(b)))}
    skipped = set(done) - set(restaged)
    run = max(latest.values(), default=0) + 1
    rows = [(b, f, s, m, run) for b in sorted(landed) if b not in skipped for f, (s, m) in sorted(landed[b].items())]
    compact = appends >= RECORD_COMPACT_RUNS
    if compact:
        rows += [
            (b, f, s, m, latest[b])
            for b in sorted(set(recorded) - {r[0] for r in rows})
            for f, (s, m) in sorted(recorded[b].items())
        ]
    return restaged, (record, rows, restaged, compact), listing


def record_staged(session, table: str) -> None:
    """Record the raw files of the batches `stage_new_batches` returned for `table`, once `table` is written
    (the `vcmt_spark` adapter calls it after each write of a model's result). A run killed before this leaves
    those batches unrecorded, and the next run stages them again. Call it after writing the result yourself
    (a notebook): without it, every run stages those batches again."""
    pending = _PENDING.pop(table, None)
    if pending is not None and pending[1]:
        _append_record(session, pending[0], pending[1], overwrite=pending[3])


def unwritten(table: str) -> bool:
    """Whether the result `stage_new_batches` last returned for `table` found nothing new: it has no row, and
    an incremental write of it would replace no partition and append nothing, so the `vcmt_spark` adapter
    skips the write (a Spark job, a commit and a metastore call per run). Asked once per result."""
    try:
        _UNWRITTEN.remove(table)
    except KeyError:
        return False
    return True


def restaged_batches(table: str) -> dict[int, str]:
    """The staged batches that the result `stage_new_batches` last returned for `table` stages again."""
    pending = _PENDING.get(table)
    return dict(pending[2]) if pending is not None else {}


def _refuse_unreplaceable(model: str, topic_path: str, restaged: Mapping[int, str], written: Iterable[int]) -> None:
    """A restaged batch that reads no line now cannot have its partition replaced (a write of no row
    replaces nothing): fail naming its folder instead of leaving its old lines staged silently."""
    left = sorted(set(restaged) - set(written))
    if left:
        folders = ", ".join(f"{topic_path.rstrip('/')}/_batch_id={b} ({restaged[b]})" for b in left)
        raise ValueError(
            f"{model}: the raw batch folders {folders} changed since they were staged and hold no line now: their "
            "staged partitions cannot be replaced by a write of no row, and would keep the old lines. Restore "
            "their files, or remove the folders (a batch folder that is gone keeps its staged lines), or drop the "
            f"partitions (alter table {model} drop partition (_batch_id=N)). Nothing was staged."
        )


# How much of a sample line a refusal shows.
SAMPLE_CHARS = 500


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {words or word + 's'}"


def _check_share(model: str, max_malformed_share: float) -> None:
    if not 0 <= max_malformed_share <= 1:
        raise ValueError(
            f"{model}: max_malformed_share must be between 0 and 1 (1 never refuses a batch), "
            f"got {max_malformed_share!r}"
        )


def checked(
    staged: DataFrame,
    model: str,
    columns: Mapping[str, str],
    max_malformed_share: float,
    *,
    restaged: Mapping[int, str] | None = None,
    topic_path: str = "",
) -> DataFrame:
    """`staged` computed once, as a local checkpoint that the model's write then reads, after counting its
    lines per batch, kind and reason: reports one summary line (`report`), and refuses (ValueError, before
    anything is written) a batch in which more than `max_malformed_share` of the lines are malformed, naming
    its top reasons with a sample line (docs/staging.md, "Run summary and the malformed threshold")."""
    _check_share(model, max_malformed_share)
    staged = staged.localCheckpoint(eager=True)
    counts = (
        staged.groupBy("_batch_id", "_kind", "_reason")
        .agg(F.count(F.lit(1)).alias("n"), F.min("_raw").alias("sample"))
        .collect()
    )
    report(summary(model, counts, restaged))
    _refuse_unreplaceable(model, topic_path, restaged or {}, {r["_batch_id"] for r in counts})
    # The share as written (0.29 is 29/100): a float product rounds, and 29 of 100 lines was "more than 0.29".
    share = Fraction(str(max_malformed_share))
    for batch in sorted({r["_batch_id"] for r in counts}):
        rows = [r for r in counts if r["_batch_id"] == batch]
        lines = sum(r["n"] for r in rows)
        bad = sorted((r for r in rows if r["_kind"] == "malformed"), key=lambda r: (-r["n"], r["_reason"]))
        malformed = sum(r["n"] for r in bad)
        if malformed <= share * lines:
            continue
        top = bad[0]
        sample = top["sample"] if len(top["sample"]) <= SAMPLE_CHARS else top["sample"][:SAMPLE_CHARS] + " ..."
        hint = ""
        if top["_reason"] == "wrong_type" and unitless(columns):
            hint = (
                " If the topic's lines carry no Connect schema: "
                + "; ".join(unit_fix(n, columns[n].strip().lower()) for n in unitless(columns))
                + "."
            )
        raise ValueError(
            f"{model}: batch {batch}: {malformed:,} of {_plural(lines, 'line')} ({malformed / lines:.0%}) are "
            f"malformed, more than max_malformed_share={max_malformed_share}; nothing was staged. Reasons: "
            + ", ".join(f"{r['_reason']} {r['n']:,}" for r in bad)
            + f". A {top['_reason']} line: {sample}\nFix the model's declared columns (or the lines), or pass "
            "max_malformed_share=1 to stage_new_batches to stage the batch anyway (malformed lines are kept as "
            f"_kind = 'malformed').{hint}"
        )
    return staged


def summary(model: str, counts: Sequence, restaged: Mapping[int, str] | None = None) -> str:
    """One line: the batches staged (and those among them staged again, with why) and their lines by kind
    (malformed ones by reason)."""
    if not counts:
        return f"{model}: nothing new to stage"
    batches = sorted({r["_batch_id"] for r in counts})
    kinds: Counter = Counter()
    reasons: Counter = Counter()
    for r in counts:
        kinds[r["_kind"]] += r["n"]
        if r["_reason"] is not None:
            reasons[r["_reason"]] += r["n"]
    shown = ", ".join(map(str, batches[:5])) + (f", ... {batches[-1]}" if len(batches) > 5 else "")
    if restaged:
        shown += "".join(f"; {b} restaged: {why}" for b, why in sorted(restaged.items()))
    parts = [f"{kinds[k]:,} {k}" for k in contract.KINDS if kinds[k] and k != "malformed"]
    if kinds["malformed"]:
        parts.append(
            f"{kinds['malformed']:,} malformed ("
            + ", ".join(f"{reasons[r]:,} {r}" for r in contract.REASONS if reasons[r])
            + ")"
        )
    return (
        f"{model}: staged {_plural(len(batches), 'batch', 'batches')} ({shown}), "
        f"{_plural(sum(kinds.values()), 'line')}: {', '.join(parts)}"
    )
