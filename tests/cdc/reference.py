"""The staging contract (docs/design.md#cdc-staging-contract) in plain Python, read straight from the raw lake files.

Tests use it two ways: to check the generator's manifest and oracle against
what a reader of its files sees, and as the expected output of the Spark
staging models. It classifies a line with the rules of the SQL, in the same
order; conversions are only as lenient as the generator needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vcmt_lab.cdc.domain import DOMAINS
from vcmt_lab.oracle import Event

OPS = ("c", "u", "d", "r")
# Types of the typed columns (strings are never a wrong type).
TYPES = {
    "tenant_id": int,
    "order_id": int,
    "customer_id": int,
    "amount": float,
    "lifetime_value": float,
    "created_at": "timestamp_ms",
}
_BATCH = re.compile(r"_batch_id=(\d+)")


@dataclass(frozen=True)
class RawLine:
    topic: str
    batch: int
    text: str


@dataclass(frozen=True)
class Parsed:
    line: RawLine
    reason: str | None  # None: staged
    row: dict[str, Any] | None = None  # staged columns, `_batch_id` included

    def event(self) -> Event:
        """The oracle event of a staged row."""
        assert self.row is not None
        domain = DOMAINS[self.line.topic]
        return Event(
            key=tuple(self.row[c] for c in domain.key),
            version=self.row["_version"],
            sign=self.row["sign"],
            values={c: self.row[c] for c in domain.columns},
        )


def raw_lines(lake: Path, topic: str) -> Iterator[RawLine]:
    for path in sorted((lake / "raw" / topic).glob("_batch_id=*/*.json")):
        match = _BATCH.search(path.parent.name)
        assert match, path
        for text in path.read_text().splitlines():
            yield RawLine(topic, int(match.group(1)), text)


def parse(line: RawLine) -> Parsed:
    try:
        document = json.loads(line.text)
    except ValueError:
        return Parsed(line, "bad_json")
    envelope = document.get("payload", document) if isinstance(document, dict) else document
    op = envelope.get("op") if isinstance(envelope, dict) else None
    if op not in OPS:
        return Parsed(line, "unknown_op")
    domain = DOMAINS[line.topic]
    image = envelope.get("before" if op == "d" else "after") or {}
    if any(image.get(c) is None for c in domain.key):
        return Parsed(line, "null_key")
    lsn = (envelope.get("source") or {}).get("lsn")
    if lsn is None:
        return Parsed(line, "null_version")
    values = {c: _convert(c, image.get(c)) for c in (*domain.key, *domain.columns)}
    if not isinstance(lsn, int) or any(v is _WRONG for v in values.values()):
        return Parsed(line, "wrong_type")
    row = {
        **values,
        "_version": lsn,
        "sign": -1 if op == "d" else 1,
        "_op": op,
        "_source_ts": _timestamp(envelope["source"]["ts_ms"]),
        "_batch_id": line.batch,
    }
    return Parsed(line, None, row)


def parse_lake(lake: Path, topic: str) -> list[Parsed]:
    return [parse(line) for line in raw_lines(lake, topic)]


_WRONG = object()


def _convert(column: str, value: Any) -> Any:
    kind = TYPES.get(column)
    if value is None or kind is None:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _WRONG
    if kind == "timestamp_ms":
        return _timestamp(value)
    return kind(value)


def _timestamp(ms: int) -> datetime:
    seconds, millis = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, tz=UTC) + timedelta(milliseconds=millis)
