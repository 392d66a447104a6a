"""The staging contract: what a staged line is (`_kind`) and why a line is quarantined (`_reason`).

The one list of each. The Python staging (`debezium.py`) classifies by it, the lab's CDC generator
writes lines of each kind and reason, and the example project's yml tests and SQL staging
(examples/cdc: vars `cdc_kinds` and `cdc_reasons`, kept equal to these by tests/test_layout.py)
accept exactly these values. docs/staging.md, "Event kinds", says what each one means.
"""

from __future__ import annotations

# What a line is. Only `change` lines are events for a mart (and `truncate` lines, with
# `truncate_when`); the others are counted and kept out.
KINDS: tuple[str, ...] = (
    "change",
    "truncate",
    "tombstone",
    "heartbeat",
    "transaction",
    "message",
    "schema_change",
    "malformed",
)
# Why a line cannot be staged, in the order they are checked: the first that applies wins.
REASONS: tuple[str, ...] = (
    "bad_json",
    "unknown_op",
    "null_key",
    "null_version",
    "version_out_of_range",
    "wrong_type",
)
# The SQL staging of the example (the simple encoding: `source.lsn` as the version) cannot tell a
# position out of range: its version is the LSN itself.
SIMPLE_REASONS: tuple[str, ...] = tuple(r for r in REASONS if r != "version_out_of_range")
