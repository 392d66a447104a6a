"""How a topic's changes reach the lake: batches, late and repeated delivery, malformed lines.

A connector flushes one batch at a time. In source order, snapshot reads
land in batch 0 and streaming changes spread evenly over all batches. Then
the usual at-least-once effects are layered on top, each counted in the
returned lines so the manifest can report it:
* late: a streaming change is delivered 1..`late_window` batches after its
  own batch (never past the last one);
* duplicate: a delivered line is delivered again, byte for byte, in the same
  batch or up to `late_window` batches later;
* malformed: a broken copy of some change, one reason code each.

Debezium encodings (`domain.flavour` postgres / mysql) add what real topics
hold besides changes: a tombstone after every delete, truncates (op `t`),
and heartbeat and transaction-metadata lines (`meta` of them, spread over
the batches).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vcmt_lab.cdc.domain import Domain
from vcmt_lab.cdc.envelope import (
    debezium_envelope,
    envelope_of,
    heartbeat_line,
    line_of,
    tombstone_line,
    transaction_line,
)
from vcmt_lab.cdc.malformed import malformed_line, reasons_of
from vcmt_lab.cdc.source import Change
from vcmt_staging import contract

# The kinds of line the generator writes (the staging contract's, but for logical decoding messages and
# schema changes, which no generated topic carries).
KINDS = tuple(k for k in contract.KINDS if k not in ("message", "schema_change"))


@dataclass(frozen=True)
class Line:
    text: str
    change: Change | None  # the change (or truncate) this line carries; None for the other kinds
    reason: str | None = None
    wrapped: bool = False
    late: bool = False
    duplicate: bool = False
    kind: str = "change"


@dataclass(frozen=True)
class DeliveryPlan:
    batches: int
    late_window: int
    late_share: float
    duplicates: int
    malformed: int
    wrap_share: float
    meta: int = 0  # heartbeat and transaction-metadata lines (Debezium encodings)


def deliver(
    domain: Domain,
    changes: list[Change],
    snapshot: int,
    plan: DeliveryPlan,
    rng: random.Random,
    schema_json: str,
) -> list[list[Line]]:
    """The lines of each batch, in delivery order."""
    last = plan.batches - 1
    real = domain.flavour != "simple"
    on_time: list[list[Line]] = [[] for _ in range(plan.batches)]
    extra: list[tuple[int, Line]] = []  # lines placed at a random position of their batch
    stream = len(changes) - snapshot

    def encoded(change: Change, emitted_ms: int, wrapped: bool) -> str:
        if real:
            return line_of(debezium_envelope(domain, change, emitted_ms), schema_json if wrapped else None)
        return line_of(envelope_of(change, emitted_ms), schema_json if wrapped else None)

    delivered: list[tuple[int, Line]] = []
    for i, change in enumerate(changes):
        wrapped = domain.schemas if real else rng.random() < plan.wrap_share
        emitted_ms = change.ts_ms + rng.randint(5, 500)
        text = encoded(change, emitted_ms, wrapped)
        batch = 0 if i < snapshot else (i - snapshot) * plan.batches // stream
        # The snapshot is read before streaming starts: only streaming changes arrive late.
        late = i >= snapshot and plan.late_window > 0 and rng.random() < plan.late_share
        delay = rng.randint(1, plan.late_window) if late else 0
        late_batch = min(last, batch + delay)
        kind = "truncate" if change.op == "t" else "change"
        line = Line(text, change, wrapped=wrapped, late=late_batch > batch, kind=kind)
        # A delete is followed by its tombstone (same key, null value), delivered with it.
        follow = (
            [Line(tombstone_line(domain), None, late=line.late, kind="tombstone")] if real and change.op == "d" else []
        )
        for one in (line, *follow):
            if line.late:
                extra.append((late_batch, one))
            else:
                on_time[batch].append(one)
        delivered.append((late_batch, line))

    for _ in range(plan.duplicates):
        batch, line = delivered[rng.randrange(len(delivered))]
        again = Line(line.text, line.change, wrapped=line.wrapped, duplicate=True, kind=line.kind)
        extra.append((min(last, batch + rng.randint(0, plan.late_window)), again))

    rows = [c for c in changes if c.op != "t"]  # malformed lines are broken copies of row changes
    reasons = reasons_of(domain)
    for n in range(plan.malformed):
        reason = reasons[n % len(reasons)]
        template = rows[rng.randrange(len(rows))]
        wrapped = domain.schemas if real else rng.random() < plan.wrap_share
        emitted_ms = template.ts_ms + rng.randint(5, 500)
        envelope = debezium_envelope(domain, template, emitted_ms) if real else envelope_of(template, emitted_ms)
        text = malformed_line(reason, envelope, domain, rng, schema_json if wrapped else None)
        extra.append((rng.randrange(plan.batches), Line(text, None, reason=reason, wrapped=wrapped, kind="malformed")))

    for n in range(plan.meta):
        template = changes[rng.randrange(len(changes))]
        if n % 3 == 0:
            text, kind = heartbeat_line(domain, template.ts_ms + rng.randint(0, 10_000)), "heartbeat"
        else:
            text = transaction_line(
                domain, template.tx_id, "BEGIN" if n % 3 == 1 else "END", template.ts_ms, rng.randint(1, 3)
            )
            kind = "transaction"
        extra.append((rng.randrange(plan.batches), Line(text, None, wrapped=domain.schemas, kind=kind)))

    return _interleave(on_time, extra, rng)


def _interleave(on_time: list[list[Line]], extra: list[tuple[int, Line]], rng: random.Random) -> list[list[Line]]:
    """Keep on-time lines in source order and drop every other line at a random place among them."""
    placed: list[list[tuple[float, int, Line]]] = [
        [((k + 0.5) / len(lines), k, line) for k, line in enumerate(lines)] for lines in on_time
    ]
    for n, (batch, line) in enumerate(extra):
        placed[batch].append((rng.random(), len(on_time[batch]) + n, line))
    return [[line for _, _, line in sorted(batch, key=lambda p: p[:2])] for batch in placed]
