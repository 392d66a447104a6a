"""What the mart must hold after all batches: the valid lines, batch by batch, through the oracle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from vcmt_tools.cdc.delivery import Line
from vcmt_tools.cdc.domain import Domain
from vcmt_tools.oracle import Event, Oracle

# docs/design.md#deletes-and-tombstones default; the lake's version column is the source position.
DELETE_MODE = "versioned"


def event_of(domain: Domain, line: Line) -> Event:
    """The staged form of a valid line: key from `before` for deletes, version = lsn, sign by op."""
    change = line.change
    assert change is not None, "malformed lines never reach the oracle"
    if change.op == "d":
        return Event(key=change.key, version=change.lsn, sign=-1)
    image = change.after or {}
    return Event(key=change.key, version=change.lsn, sign=1, values={c: image.get(c) for c in domain.columns})


def live_rows(domain: Domain, batches: list[list[Line]]) -> list[dict[str, Any]]:
    """Expected live rows sorted by key: key columns, data columns, `_version`."""
    oracle = Oracle(domain.columns, merge=domain.merge, delete_mode=DELETE_MODE)
    for lines in batches:
        oracle.apply_batch(event_of(domain, line) for line in lines if line.change is not None)
    return [
        {**dict(zip(domain.key, key, strict=True)), **_display(row), "_version": version}
        for key, (version, row) in sorted(oracle.live_rows().items())
    ]


def _display(row: dict[str, Any]) -> dict[str, Any]:
    """JSON-friendly values: `created_at` (epoch ms in the events) as ISO-8601 UTC with milliseconds."""
    out = dict(row)
    if out.get("created_at") is not None:
        # Integer arithmetic: ms / 1000 as a float can land a hair below the millisecond.
        seconds, millis = divmod(out["created_at"], 1000)
        stamp = datetime.fromtimestamp(seconds, tz=UTC) + timedelta(milliseconds=millis)
        out["created_at"] = stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return out
