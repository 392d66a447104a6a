"""Debezium-style JSON envelopes, bare or wrapped in the Kafka Connect `schema`/`payload` form."""

from __future__ import annotations

import base64
import json
from typing import Any

from vcmt_lab.cdc.domain import UNAVAILABLE, Domain
from vcmt_lab.cdc.source import Change

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


# -- Debezium encodings (domain.flavour postgres / mysql) ----------------------------------------
# What real connectors send with default settings (docs/staging.md): decimals as precise bytes,
# MicroTimestamp, Date as days, the flavour's source position, JsonConverter with or without schemas.

MYSQL_FILE_SPAN = 1_000_000  # source positions per simulated binlog file


def decimal_bytes(value: Any, scale: int) -> str:
    """Connect's Decimal: base64 of the unscaled value's big-endian two's-complement bytes (-0.01 -> "/w==")."""
    unscaled = int(round(value * 10**scale))
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


def _encode(connect_type: str, value: Any) -> Any:
    if value is None or value == UNAVAILABLE:
        return value
    if connect_type.startswith("decimal("):
        return decimal_bytes(value, int(connect_type.rstrip(")").split(",")[1]))
    return value


def mysql_position(lsn: int) -> dict[str, Any]:
    """A binlog position made from the run's monotonic source position: file, pos and row, in the same order."""
    file_no, offset = divmod(lsn, MYSQL_FILE_SPAN)
    return {"file": f"mysql-bin.{file_no:06d}", "pos": 4 + offset - offset % 4, "row": offset % 4}


def _source(domain: Domain, change: Change) -> dict[str, Any]:
    table = domain.name.rsplit(".", 1)[-1]
    if domain.flavour == "postgres":
        return {
            "version": "2.7.3.Final",
            "connector": "postgresql",
            "name": domain.name.split(".")[0],
            "ts_ms": change.ts_ms,
            "snapshot": change.snapshot,
            "db": "shop",
            "schema": "public",
            "table": table,
            "txId": change.tx_id,
            "lsn": change.lsn,
            "xmin": None,
        }
    # MySQL's binlog timestamps have second resolution.
    return {
        "version": "2.7.3.Final",
        "connector": "mysql",
        "name": domain.name.split(".")[0],
        "ts_ms": change.ts_ms // 1000 * 1000,
        "snapshot": change.snapshot,
        "db": "shop",
        "table": table,
        "server_id": 223344,
        "gtid": None,
        **mysql_position(change.lsn),
        "thread": 7,
        "query": None,
    }


def debezium_envelope(domain: Domain, change: Change, emitted_ms: int) -> Envelope:
    def image(row: Any) -> Any:
        return None if row is None else {c: _encode(domain.types[c], v) for c, v in row.items()}

    return {
        "before": image(change.before),
        "after": image(change.after),
        "source": _source(domain, change),
        "op": change.op,
        "ts_ms": emitted_ms,
        "transaction": None,
    }


_CONNECT_FIELD = {
    "int32": {"type": "int32"},
    "int64": {"type": "int64"},
    "string": {"type": "string"},
    "micro_timestamp": {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1},
    "date": {"type": "int32", "name": "io.debezium.time.Date", "version": 1},
}


def _connect_field(column: str, connect_type: str, optional: bool) -> dict[str, Any]:
    if connect_type.startswith("decimal("):
        precision, scale = connect_type[len("decimal(") : -1].split(",")
        spec = {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": scale, "connect.decimal.precision": precision},
        }
    else:
        spec = _CONNECT_FIELD[connect_type]
    return {**spec, "optional": optional, "field": column}


def debezium_schema(domain: Domain) -> dict[str, Any]:
    """The envelope's Connect schema, as JsonConverter writes it when schemas are enabled."""
    row = [_connect_field(c, domain.types[c], c not in domain.key) for c in (*domain.key, *domain.columns)]
    value = f"{domain.name}.Value"
    source = [{"type": "string", "optional": False, "field": f} for f in ("version", "connector", "name")]
    source += [
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {
            "type": "string",
            "optional": True,
            "field": "snapshot",
            "name": "io.debezium.data.Enum",
            "parameters": {"allowed": "true,first,last,false,incremental"},
        },
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": False, "field": "schema"},
        {"type": "string", "optional": False, "field": "table"},
        {"type": "int64", "optional": True, "field": "txId"},
        {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "int64", "optional": True, "field": "xmin"},
    ]
    return {
        "type": "struct",
        "optional": False,
        "name": f"{domain.name}.Envelope",
        "version": 2,
        "fields": [
            {"type": "struct", "fields": row, "optional": True, "name": value, "field": "before"},
            {"type": "struct", "fields": row, "optional": True, "name": value, "field": "after"},
            {
                "type": "struct",
                "fields": source,
                "optional": False,
                "name": "io.debezium.connector.postgresql.Source",
                "field": "source",
            },
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }


def heartbeat_line(domain: Domain, ts_ms: int) -> str:
    payload = {"ts_ms": ts_ms}
    if not domain.schemas:
        return to_json(payload)
    schema = {
        "type": "struct",
        "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}],
        "optional": False,
        "name": "io.debezium.connector.common.Heartbeat",
    }
    return line_of(payload, to_json(schema))


def transaction_line(domain: Domain, tx_id: int, status: str, ts_ms: int, events: int) -> str:
    """Transaction metadata (`provide.transaction.metadata`): a BEGIN or END marker."""
    payload = {
        "status": status,
        "id": f"{tx_id}:{tx_id * 64}",
        "event_count": events if status == "END" else None,
        "data_collections": None,
        "ts_ms": ts_ms,
    }
    if not domain.schemas:
        return to_json(payload)
    schema = {
        "type": "struct",
        "optional": False,
        "name": "io.debezium.connector.common.TransactionMetadataValue",
        "fields": [
            {"type": "string", "optional": False, "field": "status"},
            {"type": "string", "optional": False, "field": "id"},
            {"type": "int64", "optional": True, "field": "event_count"},
            {"type": "int64", "optional": False, "field": "ts_ms"},
        ],
    }
    return line_of(payload, to_json(schema))


def tombstone_line(domain: Domain) -> str:
    """The null value Kafka compaction needs after a delete, as an S3 sink writes it."""
    return '{"schema": null, "payload": null}' if domain.schemas else "null"
