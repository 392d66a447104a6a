"""The change stream of one source table, in commit order, before any delivery effect.

`changes()` plays a random workload against a domain: a snapshot (`r`) of
the table as it was when capture started, then inserts, updates, deletes and
re-inserts of deleted keys. Positions come from a `SourceClock` shared by all
topics of one run, like a database's log sequence number.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vcmt_lab.cdc.domain import EPOCH_MS, Domain, Row


@dataclass(frozen=True)
class Change:
    op: str  # r, c, u, d
    key: tuple
    before: Row | None
    after: Row | None
    lsn: int
    ts_ms: int
    tx_id: int
    reinsert: bool = False
    # Debezium's `source.snapshot`: first/true/last on snapshot reads, false when streaming
    # (None in the simple encoding).
    snapshot: str | None = None
    pk_change: bool = False  # one half of a primary-key change (delete of the old key, create of the new)


class SourceClock:
    """Log position, commit time and transaction id; all strictly increasing."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.lsn = 10_000_000
        self.ts_ms = EPOCH_MS
        self.tx_id = 1_000
        self._left_in_tx = 0

    def tick(self) -> tuple[int, int, int]:
        self.lsn += self._rng.randint(1, 64)
        if self._left_in_tx == 0:
            self.tx_id += 1
            self.ts_ms += self._rng.randint(1, 250)
            self._left_in_tx = self._rng.randint(1, 3)
        self._left_in_tx -= 1
        return self.lsn, self.ts_ms, self.tx_id


class KeyPool:
    """A set of keys with O(1) add, remove and random choice."""

    def __init__(self) -> None:
        self._keys: list[tuple] = []
        self._index: dict[tuple, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: tuple) -> None:
        self._index[key] = len(self._keys)
        self._keys.append(key)

    def remove(self, key: tuple) -> None:
        i = self._index.pop(key)
        last = self._keys.pop()
        if i < len(self._keys):
            self._keys[i] = last
            self._index[last] = i

    def choice(self, rng: random.Random) -> tuple:
        return self._keys[rng.randrange(len(self._keys))]


# Share of streaming changes by kind; a re-insert falls back to an insert while nothing is deleted.
INSERT, REINSERT, UPDATE = 0.25, 0.33, 0.85  # cumulative; the rest are deletes
# Debezium encodings only: share of deletes that are the first half of a primary-key change.
PK_CHANGE = 0.2


def changes(
    domain: Domain, rng: random.Random, clock: SourceClock, snapshot: int, stream: int, truncates: int = 0
) -> list[Change]:
    """`snapshot` snapshot reads followed by `stream` streaming changes, in commit order.

    Debezium encodings (`domain.flavour` not `simple`): snapshot reads share the position of the
    snapshot's consistent point and say `snapshot` first/true/last; some deletes are primary-key
    changes (the row moves to a new key at the same position); `truncates` truncates (op `t`,
    counted among the `stream` changes) are spread evenly over the streaming part.
    """
    real = domain.flavour != "simple"
    rows: dict[tuple, Row] = {}
    live, deleted = KeyPool(), KeyPool()
    out: list[Change] = []
    truncate_at = {stream * (i + 1) // (truncates + 1) for i in range(truncates)} if real else set()
    snapshot_at = clock.tick() if real and snapshot else None

    def create(
        op: str,
        key: tuple,
        reinsert: bool = False,
        at: tuple | None = None,
        flag: str | None = None,
        row: Row | None = None,
    ) -> None:
        lsn, ts, tx = at or clock.tick()
        rows[key] = row if row is not None else domain.new_row(rng, key, ts)
        live.add(key)
        out.append(
            Change(
                op,
                key,
                None,
                dict(rows[key]),
                lsn,
                ts,
                tx,
                reinsert,
                snapshot=flag or ("false" if real else None),
                pk_change=row is not None,
            )
        )

    for i in range(snapshot):
        flag = "first" if i == 0 else "last" if i == snapshot - 1 else "true"
        create("r", domain.new_key(rng), at=snapshot_at, flag=flag if real else None)

    for step in range(stream):
        roll = rng.random()
        if step in truncate_at:
            lsn, ts, tx = clock.tick()
            for key in list(rows):
                live.remove(key)
                deleted.add(key)
            rows.clear()
            out.append(Change("t", (), None, None, lsn, ts, tx, snapshot="false"))
        elif not live or roll < INSERT or (roll < REINSERT and not deleted):
            create("c", domain.new_key(rng))
        elif roll < REINSERT:
            key = deleted.choice(rng)
            deleted.remove(key)
            create("c", key, reinsert=True)
        elif roll < UPDATE:
            key = live.choice(rng)
            lsn, ts, tx = clock.tick()
            new = domain.changed(rng, rows[key])
            before, after = domain.update_images(rows[key], new)
            rows[key] = new
            out.append(Change("u", key, before, after, lsn, ts, tx, snapshot="false" if real else None))
        else:
            key = live.choice(rng)
            at = clock.tick()
            moved = domain.new_key_for(rng, key) if real and rng.random() < PK_CHANGE else None
            live.remove(key)
            deleted.add(key)
            row = rows.pop(key)
            flag = "false" if real else None
            out.append(
                Change("d", key, domain.delete_image(row), None, *at, snapshot=flag, pk_change=moved is not None)
            )
            if moved is not None:
                # The same row under its new key, at the same position (one UPDATE of the key at the source).
                create("c", moved, at=at, row={**row, **dict(zip(domain.key, moved, strict=True))})
    return out
