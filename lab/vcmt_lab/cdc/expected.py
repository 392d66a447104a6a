"""What the mart must hold after all batches: the valid lines, batch by batch, through the oracle."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from vcmt_lab.cdc.delivery import Line
from vcmt_lab.cdc.domain import UNAVAILABLE, Domain
from vcmt_lab.cdc.envelope import mysql_position
from vcmt_lab.cdc.source import Change
from vcmt_lab.oracle import Event, Oracle

# docs/design.md#deletes-and-tombstones default; the lake's version column is the source position.
DELETE_MODE = "versioned"


def version_of(domain: Domain, change: Change) -> int:
    """The `_version` staging must derive from the line (docs/staging.md#versions), computed independently."""
    if domain.flavour == "postgres":
        return change.lsn * 2 + (change.op != "r")
    if domain.flavour == "mysql":
        p = mysql_position(change.lsn)
        return int(p["file"].rsplit(".", 1)[1]) << 44 | p["pos"] << 12 | p["row"]
    return change.lsn


def event_of(domain: Domain, line: Line) -> Event:
    """The staged form of a valid line: key from `before` for deletes, version by flavour, sign by op."""
    change = line.change
    assert change is not None, "malformed lines never reach the oracle"
    version = version_of(domain, change)
    if change.op == "t":
        return Event(key=(), version=version, sign=1, truncate=True)
    if change.op == "d":
        return Event(key=change.key, version=version, sign=-1)
    image = change.after or {}
    unavailable = frozenset(c for c in domain.columns if image.get(c) == UNAVAILABLE)
    values = {c: image.get(c) for c in domain.columns if c not in unavailable}
    return Event(key=change.key, version=version, sign=1, values=values, unavailable=unavailable)


def live_rows(domain: Domain, batches: list[list[Line]]) -> list[dict[str, Any]]:
    """Expected live rows sorted by key: key columns, data columns, `_version`."""
    oracle = Oracle(domain.columns, merge=domain.merge, delete_mode=DELETE_MODE)
    for lines in batches:
        oracle.apply_batch(event_of(domain, line) for line in lines if line.change is not None)
    micros = domain.types.get("created_at") == "micro_timestamp"
    return [
        {**dict(zip(domain.key, key, strict=True)), **_display(row, micros), "_version": version}
        for key, (version, row) in sorted(oracle.live_rows().items())
    ]


def _display(row: dict[str, Any], micros: bool = False) -> dict[str, Any]:
    """JSON-friendly values: `created_at` (epoch ms, or µs) as ISO-8601 UTC, `birth_date` (days) as ISO date."""
    out = dict(row)
    if out.get("created_at") is not None:
        # Integer arithmetic: ms / 1000 as a float can land a hair below the millisecond.
        seconds, fraction = divmod(out["created_at"], 1_000_000 if micros else 1000)
        stamp = datetime.fromtimestamp(seconds, tz=UTC) + timedelta(
            microseconds=fraction if micros else fraction * 1000
        )
        timespec = "microseconds" if micros else "milliseconds"
        out["created_at"] = stamp.isoformat(timespec=timespec).replace("+00:00", "Z")
    if out.get("birth_date") is not None:
        out["birth_date"] = (date(1970, 1, 1) + timedelta(days=out["birth_date"])).isoformat()
    return out
