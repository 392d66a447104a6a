"""The two source tables the generator simulates: their keys, columns, and how rows change.

A domain knows nothing about envelopes or batches. It makes source rows
(dicts holding key and data columns, as a Debezium image would) and says
what an update image looks like: `orders` sends full images, `customers`
sends only the fields that changed (the mart merges them with policies).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

Row = dict[str, Any]

# 2026-01-01T00:00:00Z: timestamps start here so data looks plausible and never depends on the clock.
EPOCH_MS = 1_767_225_600_000


@dataclass
class Domain:
    """Base of a simulated source table; subclasses fill in the row factories."""

    name: ClassVar[str]
    key: ClassVar[tuple[str, ...]]
    columns: ClassVar[tuple[str, ...]]
    merge: ClassVar[Mapping[str, str]]
    # Fields a `wrong_type` corruption may replace with a non-numeric string, with the bad values.
    typed_fields: ClassVar[Mapping[str, tuple[str, ...]]]
    # How lines are encoded: `simple` (JSON doubles, epoch ms, `source.lsn`; the SQL staging models)
    # or a Debezium connector flavour, `postgres` / `mysql` (envelope.py; the Python staging models).
    flavour: ClassVar[str] = "simple"
    # Kafka Connect's JsonConverter with schemas enabled: every line is `{"schema", "payload"}`.
    schemas: ClassVar[bool] = False
    # Connect types of the columns, for the Debezium encodings (envelope.py).
    types: ClassVar[Mapping[str, str]] = {}

    def key_of(self, row: Row) -> tuple:
        return tuple(row[c] for c in self.key)

    def new_key(self, rng: random.Random) -> tuple:
        raise NotImplementedError

    def new_row(self, rng: random.Random, key: tuple, ts_ms: int) -> Row:
        raise NotImplementedError

    def changed(self, rng: random.Random, row: Row) -> Row:
        """The source row after one update."""
        raise NotImplementedError

    def update_images(self, old: Row, new: Row) -> tuple[Row | None, Row]:
        """(before, after) of an update event."""
        return dict(old), dict(new)

    def delete_image(self, row: Row) -> Row:
        """`before` of a delete event: the key plus what the source ships."""
        return dict(row)

    def new_key_for(self, rng: random.Random, key: tuple) -> tuple | None:
        """A primary-key change of `key` (the row moves to the returned key), or None if the table has none."""
        return None


@dataclass
class Orders(Domain):
    name: ClassVar[str] = "orders"
    key: ClassVar[tuple[str, ...]] = ("tenant_id", "order_id")
    columns: ClassVar[tuple[str, ...]] = ("customer_id", "status", "amount", "note", "created_at")
    merge: ClassVar[Mapping[str, str]] = {}
    typed_fields: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "tenant_id": ("t-1", "tenant"),
        "order_id": ("ord-17", "abc"),
        "customer_id": ("cust", "n/a"),
        "amount": ("n/a", "12,50 EUR", "free"),
        "created_at": ("yesterday",),
    }
    tenants: int = 8
    customers: int = 500
    # order_id counts per tenant, so the same order_id exists under several tenants.
    _next_order: dict[int, int] = field(default_factory=dict)

    def new_key(self, rng: random.Random) -> tuple:
        tenant = rng.randint(1, self.tenants)
        order = self._next_order.get(tenant, 0) + 1
        self._next_order[tenant] = order
        return (tenant, order)

    def new_row(self, rng: random.Random, key: tuple, ts_ms: int) -> Row:
        return {
            "tenant_id": key[0],
            "order_id": key[1],
            "customer_id": rng.randint(1, self.customers),
            "status": "new",
            "amount": round(rng.uniform(5, 500), 2),
            "note": rng.choice((None, None, "gift", "express")),
            "created_at": ts_ms,
        }

    def changed(self, rng: random.Random, row: Row) -> Row:
        new = dict(row)
        new["status"] = {
            "new": rng.choice(("paid", "paid", "cancelled")),
            "paid": rng.choice(("shipped", "shipped", "cancelled")),
        }.get(row["status"], row["status"])
        if rng.random() < 0.3:
            new["amount"] = round(rng.uniform(5, 500), 2)
        if rng.random() < 0.2:
            new["note"] = rng.choice((None, "call first", "leave at door"))
        return new


@dataclass
class Customers(Domain):
    name: ClassVar[str] = "customers"
    key: ClassVar[tuple[str, ...]] = ("customer_id",)
    columns: ClassVar[tuple[str, ...]] = ("name", "email", "tier", "lifetime_value")
    merge: ClassVar[Mapping[str, str]] = {
        "name": "coalesce",
        "email": "coalesce",
        "tier": "coalesce",
        "lifetime_value": "greatest",
    }
    typed_fields: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "customer_id": ("C-42", "none"),
        "lifetime_value": ("lots", "1.000,00"),
    }
    _next_id: int = 0

    _NAMES: ClassVar[tuple[str, ...]] = ("Ada", "Grace", "Linus", "Barbara", "Ken", "Edsger", "Frances")
    _TIERS: ClassVar[tuple[str, ...]] = ("bronze", "silver", "gold")

    def new_key(self, rng: random.Random) -> tuple:
        self._next_id += 1
        return (self._next_id,)

    def new_row(self, rng: random.Random, key: tuple, ts_ms: int) -> Row:
        name = f"{rng.choice(self._NAMES)} {key[0]}"
        return {
            "customer_id": key[0],
            "name": name,
            "email": f"c{key[0]}@example.com",
            "tier": rng.choice((None, *self._TIERS)),
            "lifetime_value": round(rng.uniform(0, 100), 2),
        }

    def changed(self, rng: random.Random, row: Row) -> Row:
        new = dict(row)
        for column in rng.sample(self.columns, rng.randint(1, 2)):
            if column == "name":
                new["name"] = f"{rng.choice(self._NAMES)} {row['customer_id']}"
            elif column == "email":
                new["email"] = f"c{row['customer_id']}.{rng.randint(1, 99)}@example.com"
            elif column == "tier":
                new["tier"] = rng.choice(self._TIERS)
            elif column == "birth_date":
                new["birth_date"] = rng.randint(-7300, 12800)
            else:
                # Mostly grows; an occasional refund lowers it, which `greatest` must ignore.
                delta = rng.uniform(1, 200) if rng.random() < 0.9 else -rng.uniform(1, 50)
                new["lifetime_value"] = round(max(0.0, (row["lifetime_value"] or 0.0) + delta), 2)
        return new

    def update_images(self, old: Row, new: Row) -> tuple[Row | None, Row]:
        # Partial updates: `after` names every column but only changed ones carry a value.
        after = {c: (new[c] if new[c] != old[c] else None) for c in self.columns}
        return None, {"customer_id": new["customer_id"], **after}

    def delete_image(self, row: Row) -> Row:
        # REPLICA IDENTITY DEFAULT: a delete only ships the key.
        return {"customer_id": row["customer_id"], **dict.fromkeys(self.columns)}


# The placeholder Debezium sends for a value it does not have (PostgreSQL: an unchanged TOASTed column).
UNAVAILABLE = "__debezium_unavailable_value"


@dataclass
class PgOrders(Orders):
    """`orders` captured from PostgreSQL (pgoutput, REPLICA IDENTITY DEFAULT), JsonConverter with schemas.

    Real encodings: `amount` numeric(12,2) as precise Decimal bytes, `created_at` timestamp(6) as
    MicroTimestamp; updates carry `before: null`; deletes carry the key with placeholder values in
    the NOT NULL columns; an update that leaves the (TOASTed) `note` unchanged sends the
    placeholder instead of its value; primary-key changes move an order to another order_id.
    """

    name: ClassVar[str] = "pg.public.orders"
    flavour: ClassVar[str] = "postgres"
    schemas: ClassVar[bool] = True
    types: ClassVar[Mapping[str, str]] = {
        "tenant_id": "int32",
        "order_id": "int64",
        "customer_id": "int64",
        "status": "string",
        "amount": "decimal(12,2)",
        "note": "string",
        "created_at": "micro_timestamp",
    }
    typed_fields: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "tenant_id": ("t-1", "tenant"),
        "order_id": ("ord-17", "abc"),
        "customer_id": ("cust", "n/a"),
        "created_at": ("yesterday", "31/12/2025"),
    }
    _NOTES: ClassVar[tuple[str, ...]] = ("gift", "express", "call first", "leave at door")

    def new_row(self, rng: random.Random, key: tuple, ts_ms: int) -> Row:
        row = super().new_row(rng, key, ts_ms)
        row["created_at"] = ts_ms * 1000 + rng.randint(0, 999)  # microseconds
        row["note"] = rng.choice((None, *self._NOTES))
        return row

    def update_images(self, old: Row, new: Row) -> tuple[Row | None, Row]:
        after = dict(new)
        if new["note"] is not None and new["note"] == old["note"]:
            after["note"] = UNAVAILABLE
        return None, after

    def delete_image(self, row: Row) -> Row:
        # REPLICA IDENTITY DEFAULT: the key, and the type's zero value in the other NOT NULL columns.
        return {
            **{c: row[c] for c in self.key},
            "customer_id": 0,
            "status": "",
            "amount": 0,
            "note": None,
            "created_at": 0,
        }

    def new_key_for(self, rng: random.Random, key: tuple) -> tuple | None:
        return self.new_key(rng)


@dataclass
class MysqlCustomers(Customers):
    """`customers` captured from MySQL (binlog, full row images), JsonConverter without schemas.

    Real encodings: `lifetime_value` decimal(12,2) as precise Decimal bytes (scale from the declared
    type, there is no schema), `birth_date` DATE as days since 1970-01-01 (negative before).
    """

    name: ClassVar[str] = "mysql.shop.customers"
    flavour: ClassVar[str] = "mysql"
    columns: ClassVar[tuple[str, ...]] = ("name", "email", "tier", "lifetime_value", "birth_date")
    types: ClassVar[Mapping[str, str]] = {
        "customer_id": "int64",
        "name": "string",
        "email": "string",
        "tier": "string",
        "lifetime_value": "decimal(12,2)",
        "birth_date": "date",
    }
    typed_fields: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "customer_id": ("C-42", "none"),
        "birth_date": ("someday", "1.1.1970"),
    }

    def new_row(self, rng: random.Random, key: tuple, ts_ms: int) -> Row:
        row = super().new_row(rng, key, ts_ms)
        row["birth_date"] = rng.randint(-7300, 12800) if rng.random() < 0.9 else None  # 1950 .. 2005
        return row

    def update_images(self, old: Row, new: Row) -> tuple[Row | None, Row]:
        return dict(old), dict(new)  # binlog_row_image=FULL

    def delete_image(self, row: Row) -> Row:
        return dict(row)


DOMAINS: dict[str, type[Domain]] = {d.name: d for d in (Orders, Customers, PgOrders, MysqlCustomers)}
