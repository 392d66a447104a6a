"""`generate()`: one seeded run from source simulation to lake files, oracle and manifest."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from vcmt_lab.cdc import lake as lake_files
from vcmt_lab.cdc.delivery import DeliveryPlan, deliver
from vcmt_lab.cdc.domain import DOMAINS
from vcmt_lab.cdc.envelope import debezium_schema, schema_of, to_json
from vcmt_lab.cdc.expected import live_rows
from vcmt_lab.cdc.manifest import Manifest, TopicManifest
from vcmt_lab.cdc.source import SourceClock, changes

DEFAULT_TOPICS: tuple[str, ...] = ("orders", "customers")
# Topics per encoding: `simple` (the SQL staging models) or `debezium` (real connector encodings: a
# PostgreSQL topic with schemas, a MySQL topic without; the Python staging models).
ENCODINGS: dict[str, tuple[str, ...]] = {
    "simple": DEFAULT_TOPICS,
    "debezium": ("pg.public.orders", "mysql.shop.customers"),
}


def generate(
    lake: Path,
    events: int = 10_000,
    batches: int = 5,
    seed: int = 42,
    *,
    malformed_share: float = 0.02,
    wrap_share: float = 0.2,
    late_window: int = 2,
    topics: Sequence[str] | None = None,
    late_share: float = 0.05,
    duplicate_share: float = 0.02,
    snapshot_share: float = 0.1,
    encoding: str = "simple",
    meta_share: float = 0.01,
    truncates: int = 1,
) -> Manifest:
    """Write `events` change lines (all topics, every kind) in `batches` batches under `lake`.

    Also writes the expected live rows per topic and `oracle/manifest.json`.
    Same arguments, same bytes. Replaces `raw/<topic>` for each topic it writes.
    `encoding="debezium"` writes real connector encodings (domain.PgOrders, domain.MysqlCustomers):
    then `meta_share` of the lines are heartbeats and transaction markers, each PostgreSQL topic
    holds `truncates` truncates, and every delete is followed by a tombstone line (on top of `events`).
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"generate: `encoding` must be one of {sorted(ENCODINGS)}; got {encoding!r}.")
    topics = list(ENCODINGS[encoding] if topics is None else topics)
    if truncates < 0 or not 0 <= meta_share <= 1:
        raise ValueError(
            f"generate: `truncates` must be 0 or more and `meta_share` within [0, 1]; got {truncates} and {meta_share}."
        )
    _check(
        events,
        batches,
        late_window,
        topics,
        ENCODINGS[encoding],
        malformed_share,
        wrap_share,
        late_share,
        duplicate_share,
    )
    if not 0 < snapshot_share < 1:
        raise ValueError(f"generate: `snapshot_share` must be within (0, 1); got {snapshot_share}.")
    lake = Path(lake)
    clock = SourceClock(random.Random(f"{seed}/clock"))
    plan_base = dict(batches=batches, late_window=late_window, late_share=late_share, wrap_share=wrap_share)
    per_topic = _split(events, len(topics))
    topic_manifests: dict[str, TopicManifest] = {}

    for topic, lines in zip(topics, per_topic, strict=True):
        domain = DOMAINS[topic]()
        rng = random.Random(f"{seed}/{topic}")
        malformed = round(lines * malformed_share)
        duplicates = round(lines * duplicate_share)
        meta = round(lines * meta_share) if domain.flavour != "simple" else 0
        source = lines - malformed - duplicates - meta
        if source < 2:
            raise ValueError(f"generate: {lines} lines for topic `{topic}` leave {source} changes; raise `events`.")
        snapshot = min(source - 1, max(1, round(source * snapshot_share)))
        history = changes(
            domain, rng, clock, snapshot, source - snapshot, truncates=truncates if domain.flavour == "postgres" else 0
        )
        plan = DeliveryPlan(malformed=malformed, duplicates=duplicates, meta=meta, **plan_base)
        schema = debezium_schema(domain) if domain.flavour != "simple" else schema_of(domain)
        delivered = deliver(domain, history, snapshot, plan, rng, to_json(schema))

        files = lake_files.write_raw(lake, topic, delivered)
        expected = live_rows(domain, delivered)
        lake_files.write_oracle(lake, topic, expected)
        topic_manifests[topic] = TopicManifest.of(domain, delivered, len(expected), files)

    manifest = Manifest(
        seed=seed,
        batches=batches,
        events=sum(t.events for t in topic_manifests.values()),  # tombstones come on top of `events`
        late_window=late_window,
        malformed_share=malformed_share,
        wrap_share=wrap_share,
        late_share=late_share,
        duplicate_share=duplicate_share,
        topics=topic_manifests,
        encoding=encoding,
    )
    manifest.write(lake_files.manifest_path(lake))
    return manifest


def _split(total: int, parts: int) -> list[int]:
    """`total` as `parts` near-equal counts, the remainder going to the first ones."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def _check(
    events: int, batches: int, late_window: int, topics: Sequence[str], allowed: Sequence[str], *shares: float
) -> None:
    unknown = [t for t in topics if t not in allowed]
    if not topics or unknown:
        raise ValueError(
            f"generate: `topics` must be a non-empty subset of {sorted(allowed)} (the topics of this "
            f"`encoding`); got {list(topics)}."
        )
    if len(set(topics)) != len(topics):
        raise ValueError(f"generate: `topics` lists a topic twice; got {list(topics)}.")
    if batches < 1 or events < 1:
        raise ValueError(f"generate: `events` and `batches` must be positive; got {events} and {batches}.")
    if late_window < 0:
        raise ValueError(f"generate: `late_window` must be 0 or more; got {late_window}.")
    if any(not 0 <= share <= 1 for share in shares):
        raise ValueError(f"generate: every share must be within [0, 1]; got {list(shares)}.")
