"""The reference semantics of `vcmt_upsert`, in plain Python.

This is the oracle every correctness test compares the ClickHouse target
against. It states docs/design.md#per-key-semantics as code:

* a batch (one `dbt run`, or one external load) is applied per key in version
  order; at equal versions an upsert is applied before a delete;
* an upsert is accepted when the key has no state yet, or when its version is
  newer than the key's state version (live row or recorded delete); otherwise
  it is skipped as stale or duplicate;
* `versioned` deletes remove the live row when their version is not older than
  it; `unconditional` deletes remove it whatever their version; either way the
  key's tombstone keeps the greater of the delete's version and the removed
  row's version (a delete for a key with no row records its own version);
* an accepted upsert combines the live row (`old`, absent after a delete) with
  the event (`new`) column by column through the merge policies; a column the
  event lists as unavailable (`unavailable_column`) keeps `old` (NULL without
  one);
* a truncate (`truncate_when`) at version T removes every row, live or
  deleted, whose version is at or below T, and every later event at or
  below T is ignored; within a batch the truncate comes first, so events of
  the same batch at or below T are ignored too.

NULL handling of the built-in policies: `greatest`, `least` and `sum` ignore a
NULL side (NULL only when both sides are NULL); `coalesce` keeps `old` when
`new` is NULL; `replace` and `keep` copy values as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Policy = str | Callable[[Any, Any], Any]
BUILTIN_POLICIES = ("replace", "keep", "greatest", "least", "sum", "coalesce")


@dataclass(frozen=True)
class Event:
    key: tuple
    version: Any
    sign: int
    values: Mapping[str, Any] = field(default_factory=dict)
    unavailable: frozenset[str] = frozenset()  # columns whose value was not sent: they keep the stored one
    truncate: bool = False  # a truncate at `version`; key and values are ignored


@dataclass
class KeyState:
    live: bool
    version: Any
    row: dict[str, Any] | None


@dataclass
class BatchStats:
    upserts_applied: int = 0
    deletes_applied: int = 0
    skipped: int = 0


def _ignore_null(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def combine(old: Any, new: Any) -> Any:
        if old is None:
            return new
        if new is None:
            return old
        return fn(old, new)

    return combine


_COMBINERS: dict[str, Callable[[Any, Any], Any]] = {
    "replace": lambda old, new: new,
    "keep": lambda old, new: old,
    "greatest": _ignore_null(max),
    "least": _ignore_null(min),
    "sum": _ignore_null(lambda a, b: a + b),
    "coalesce": lambda old, new: old if new is None else new,
}


def combiner(policy: Policy) -> Callable[[Any, Any], Any]:
    if callable(policy):
        return policy
    if policy not in _COMBINERS:
        raise ValueError(f"unknown merge policy {policy!r}; expected one of {BUILTIN_POLICIES}")
    return _COMBINERS[policy]


def apply_order(events: Iterable[Event]) -> list[Event]:
    """The order the materialization applies one batch in: per key, by version, upsert first."""
    return sorted(events, key=lambda e: (e.key, e.version, -e.sign))


class Oracle:
    """Per-key state machine mirroring the target, its tombstones and merge policies."""

    def __init__(
        self,
        columns: Iterable[str],
        merge: Mapping[str, Policy] | None = None,
        delete_mode: str = "versioned",
    ) -> None:
        if delete_mode not in ("versioned", "unconditional"):
            raise ValueError(f"delete_mode must be versioned or unconditional, got {delete_mode!r}")
        self.columns = list(columns)
        merge = dict(merge or {})
        self._combine = {c: combiner(merge.get(c, "replace")) for c in self.columns}
        self.delete_mode = delete_mode
        self.state: dict[tuple, KeyState] = {}
        self.floor: Any = None  # the newest truncate's version: events at or below it are ignored

    def apply_batch(self, events: Iterable[Event]) -> BatchStats:
        stats = BatchStats()
        events = list(events)
        truncates = [e.version for e in events if e.truncate]
        if truncates:
            floor = max(truncates) if self.floor is None else max(self.floor, *truncates)
            self.floor = floor
            self.state = {k: s for k, s in self.state.items() if s.version > floor}
        for event in apply_order(e for e in events if not e.truncate):
            if self.floor is not None and event.version <= self.floor:
                stats.skipped += 1
                continue
            if event.sign >= 0:
                applied = self._upsert(event)
                stats.upserts_applied += applied
            else:
                applied = self._delete(event)
                stats.deletes_applied += applied
            stats.skipped += not applied
        return stats

    def _upsert(self, event: Event) -> bool:
        state = self.state.get(event.key)
        if state is not None and not event.version > state.version:
            return False
        old = state.row if state is not None and state.live else None
        row = {}
        for column in self.columns:
            if column in event.unavailable:
                row[column] = None if old is None else old[column]
                continue
            new_value = event.values.get(column)
            row[column] = new_value if old is None else self._combine[column](old[column], new_value)
        self.state[event.key] = KeyState(live=True, version=event.version, row=row)
        return True

    def _delete(self, event: Event) -> bool:
        state = self.state.get(event.key)
        if self.delete_mode == "unconditional":
            if state is None:
                self.state[event.key] = KeyState(live=False, version=event.version, row=None)
                return False
            self.state[event.key] = KeyState(live=False, version=max(state.version, event.version), row=None)
            return state.live
        if state is None:
            self.state[event.key] = KeyState(live=False, version=event.version, row=None)
            return False
        if event.version < state.version:
            return False
        was_live = state.live
        self.state[event.key] = KeyState(live=False, version=max(state.version, event.version), row=None)
        return was_live

    def live_rows(self) -> dict[tuple, tuple[Any, dict[str, Any]]]:
        """key -> (version, row) for every live key: what `SELECT ... FINAL WHERE sign = 1` must return."""
        return {k: (s.version, dict(s.row)) for k, s in self.state.items() if s.live and s.row is not None}
