"""The change stream of one source table, in commit order, before any delivery effect.

`changes()` plays a random workload against a domain: a snapshot (`r`) of
the table as it was when capture started, then inserts, updates, deletes and
re-inserts of deleted keys. Positions come from a `SourceClock` shared by all
topics of one run, like a database's log sequence number.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vcmt_tools.cdc.domain import EPOCH_MS, Domain, Row


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


def changes(
    domain: Domain, rng: random.Random, clock: SourceClock, snapshot: int, stream: int
) -> list[Change]:
    """`snapshot` snapshot reads followed by `stream` streaming changes, in commit order."""
    rows: dict[tuple, Row] = {}
    live, deleted = KeyPool(), KeyPool()
    out: list[Change] = []

    def create(op: str, key: tuple, reinsert: bool = False) -> None:
        lsn, ts, tx = clock.tick()
        rows[key] = domain.new_row(rng, key, ts)
        live.add(key)
        out.append(Change(op, key, None, dict(rows[key]), lsn, ts, tx, reinsert))

    for _ in range(snapshot):
        create("r", domain.new_key(rng))

    for _ in range(stream):
        roll = rng.random()
        if not live or roll < INSERT or (roll < REINSERT and not deleted):
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
            out.append(Change("u", key, before, after, lsn, ts, tx))
        else:
            key = live.choice(rng)
            lsn, ts, tx = clock.tick()
            live.remove(key)
            deleted.add(key)
            out.append(Change("d", key, domain.delete_image(rows.pop(key)), None, lsn, ts, tx))
    return out
