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
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vcmt_tools.cdc.domain import Domain
from vcmt_tools.cdc.envelope import envelope_of, line_of
from vcmt_tools.cdc.malformed import REASONS, malformed_line
from vcmt_tools.cdc.source import Change


@dataclass(frozen=True)
class Line:
    text: str
    change: Change | None  # the valid change this line carries; None when malformed
    reason: str | None = None
    wrapped: bool = False
    late: bool = False
    duplicate: bool = False


@dataclass(frozen=True)
class DeliveryPlan:
    batches: int
    late_window: int
    late_share: float
    duplicates: int
    malformed: int
    wrap_share: float


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
    on_time: list[list[Line]] = [[] for _ in range(plan.batches)]
    extra: list[tuple[int, Line]] = []  # lines placed at a random position of their batch
    stream = len(changes) - snapshot

    delivered: list[tuple[int, Line]] = []
    for i, change in enumerate(changes):
        wrapped = rng.random() < plan.wrap_share
        emitted_ms = change.ts_ms + rng.randint(5, 500)
        text = line_of(envelope_of(change, emitted_ms), schema_json if wrapped else None)
        batch = 0 if i < snapshot else (i - snapshot) * plan.batches // stream
        # The snapshot is read before streaming starts: only streaming changes arrive late.
        late = i >= snapshot and plan.late_window > 0 and rng.random() < plan.late_share
        delay = rng.randint(1, plan.late_window) if late else 0
        late_batch = min(last, batch + delay)
        line = Line(text, change, wrapped=wrapped, late=late_batch > batch)
        if line.late:
            extra.append((late_batch, line))
        else:
            on_time[batch].append(line)
        delivered.append((late_batch, line))

    for _ in range(plan.duplicates):
        batch, line = delivered[rng.randrange(len(delivered))]
        again = Line(line.text, line.change, wrapped=line.wrapped, duplicate=True)
        extra.append((min(last, batch + rng.randint(0, plan.late_window)), again))

    for n in range(plan.malformed):
        reason = REASONS[n % len(REASONS)]
        template = changes[rng.randrange(len(changes))]
        wrapped = rng.random() < plan.wrap_share
        envelope = envelope_of(template, template.ts_ms + rng.randint(5, 500))
        text = malformed_line(reason, envelope, domain, rng, schema_json if wrapped else None)
        extra.append((rng.randrange(plan.batches), Line(text, None, reason=reason, wrapped=wrapped)))

    return _interleave(on_time, extra, rng)


def _interleave(
    on_time: list[list[Line]], extra: list[tuple[int, Line]], rng: random.Random
) -> list[list[Line]]:
    """Keep on-time lines in source order and drop every other line at a random place among them."""
    placed: list[list[tuple[float, int, Line]]] = [
        [((k + 0.5) / len(lines), k, line) for k, line in enumerate(lines)] for lines in on_time
    ]
    for n, (batch, line) in enumerate(extra):
        placed[batch].append((rng.random(), len(on_time[batch]) + n, line))
    return [[line for _, _, line in sorted(batch, key=lambda p: p[:2])] for batch in placed]
