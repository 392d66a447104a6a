"""Write the vcmt_upsert event seeds and their expected states (computed by the oracle).

    python integration_tests/scripts/make_vcmt_upsert_seeds.py

The events are one messy batch per model: several versions per key, exact
redeliveries, deletes, re-inserts after a delete, a delete for an unknown key,
version-0 first events and NULLs in merged columns.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from vcmt_lab.oracle import Event, Oracle

SEEDS = Path(__file__).resolve().parents[1] / "seeds" / "vcmt_upsert"


def _write(name: str, header: list[str], rows: list[list]) -> None:
    with (SEEDS / f"{name}.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows([["" if v is None else v for v in row] for row in rows])


def orders(rng: random.Random) -> None:
    header = ["tenant_id", "order_id", "status", "amount", "created_at", "_version", "sign"]
    rows, version = [], 0
    for _ in range(120):
        tenant, order = rng.randint(1, 3), rng.randint(1, 15)
        sign = -1 if rng.random() < 0.15 else 1
        created = f"2024-0{rng.randint(1, 3)}-1{rng.randint(0, 9)} 10:00:00"
        rows.append(
            [tenant, order, rng.choice(["new", "paid", "shipped"]), rng.randint(1, 500) / 4, created, version, sign]
        )
        version += rng.choice([1, 1, 3])
    rows += [list(r) for r in rng.sample(rows, 15)]
    rng.shuffle(rows)
    _write("it_order_events", header, rows)
    oracle = Oracle(["status", "amount", "created_at"])
    oracle.apply_batch(Event((r[0], r[1]), r[5], r[6], dict(zip(header[2:5], r[2:5], strict=True))) for r in rows)
    live = sorted(oracle.live_rows().items())
    _write(
        "it_orders_expected",
        header[:-1],
        [[*k, row["status"], row["amount"], row["created_at"], v] for k, (v, row) in live],
    )


def customers(rng: random.Random) -> None:
    header = ["customer_id", "email", "tier", "lifetime_value", "visits", "first_seen", "score", "_version", "sign"]
    merge = {
        "email": "coalesce",
        "tier": "coalesce",
        "lifetime_value": "greatest",
        "visits": "sum",
        "first_seen": "keep",
        "score": lambda old, new: None if old is None or new is None else old * 2 + new,
    }
    rows = []
    for version in range(150):
        customer = rng.randint(1, 12)
        sign = -1 if rng.random() < 0.08 else 1

        def maybe(value):
            return None if rng.random() < 0.4 else value

        rows.append(
            [
                customer,
                maybe(f"c{customer}.{version}@x.io"),
                maybe(rng.choice(["gold", "silver"])),
                maybe(rng.randint(0, 1000)),
                rng.randint(1, 3),
                f"2024-01-{10 + version % 18:02d}",
                rng.randint(0, 5),
                version,
                sign,
            ]
        )
    rows += [list(r) for r in rng.sample(rows, 10)]
    rng.shuffle(rows)
    _write("it_customer_events", header, rows)
    oracle = Oracle(header[1:7], merge)
    oracle.apply_batch(Event((r[0],), r[7], r[8], dict(zip(header[1:7], r[1:7], strict=True))) for r in rows)
    _write(
        "it_customers_expected",
        header[:-1],
        [[k[0], *[row[c] for c in header[1:7]], v] for k, (v, row) in sorted(oracle.live_rows().items())],
    )


def main() -> None:
    SEEDS.mkdir(parents=True, exist_ok=True)
    orders(random.Random(42))
    customers(random.Random(7))


if __name__ == "__main__":
    main()
