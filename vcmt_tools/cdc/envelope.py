"""Debezium-style JSON envelopes, bare or wrapped in the Kafka Connect `schema`/`payload` form."""

from __future__ import annotations

import json
from typing import Any

from vcmt_tools.cdc.domain import Domain
from vcmt_tools.cdc.source import Change

Envelope = dict[str, Any]

# Connect's JsonConverter types, enough for a reader to see what a schema block looks like.
_CONNECT_TYPES = {
    "tenant_id": "int32",
    "order_id": "int64",
    "customer_id": "int64",
    "amount": "double",
    "lifetime_value": "double",
    "created_at": "int64",
}


def envelope_of(change: Change, emitted_ms: int) -> Envelope:
    return {
        "before": change.before,
        "after": change.after,
        "source": {"lsn": change.lsn, "ts_ms": change.ts_ms, "txId": change.tx_id},
        "op": change.op,
        "ts_ms": emitted_ms,
    }


def schema_of(domain: Domain) -> dict[str, Any]:
    """The `schema` block JsonConverter puts next to the payload when schemas are enabled."""
    row_fields = [
        {
            "field": column,
            "type": _CONNECT_TYPES.get(column, "string"),
            "optional": column not in domain.key,
            **({"name": "io.debezium.time.Timestamp"} if column == "created_at" else {}),
        }
        for column in (*domain.key, *domain.columns)
    ]
    value = f"{domain.name}.Value"
    return {
        "type": "struct",
        "name": f"{domain.name}.Envelope",
        "optional": False,
        "fields": [
            {"field": "before", "type": "struct", "name": value, "optional": True, "fields": row_fields},
            {"field": "after", "type": "struct", "name": value, "optional": True, "fields": row_fields},
            {
                "field": "source",
                "type": "struct",
                "optional": False,
                "fields": [
                    {"field": "lsn", "type": "int64", "optional": True},
                    {"field": "ts_ms", "type": "int64", "optional": False},
                    {"field": "txId", "type": "int64", "optional": True},
                ],
            },
            {"field": "op", "type": "string", "optional": False},
            {"field": "ts_ms", "type": "int64", "optional": True},
        ],
    }


def to_json(value: Any) -> str:
    # Default separators: json.dumps then reuses its cached C encoder, about twice as fast as compact output.
    return json.dumps(value)


def line_of(envelope: Envelope, schema_json: str | None) -> str:
    """One JSON line; wrapped as `{"schema": ..., "payload": ...}` when a schema (as JSON) is given."""
    payload = to_json(envelope)
    # The schema block is the same for every line of a topic: splice its text instead of re-encoding it.
    return payload if schema_json is None else f'{{"schema": {schema_json}, "payload": {payload}}}'
