"""The generator's Debezium encodings (`encoding="debezium"`) and the oracle's truncate and unavailable-value rules."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pytest

from vcmt_lab.cdc import Manifest, generate
from vcmt_lab.cdc.domain import UNAVAILABLE
from vcmt_lab.cdc.envelope import decimal_bytes, mysql_position
from vcmt_lab.oracle import Event, Oracle

PG, MY = "pg.public.orders", "mysql.shop.customers"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dbz") / "lake"
    generate(root, events=3_000, batches=3, seed=5, encoding="debezium", truncates=2)
    return root


def _lines(lake: Path, topic: str) -> list[str]:
    return [x for p in sorted((lake / "raw" / topic).glob("*/*.json")) for x in p.read_text().splitlines()]


def _json(line: str):
    try:
        return json.loads(line)
    except ValueError:  # a malformed line
        return None


def _unscaled(text: str) -> int:
    return int.from_bytes(base64.b64decode(text), "big", signed=True)


def test_decimal_bytes_are_twos_complement() -> None:
    """Connect's precise Decimal: -0.01 at scale 2 is "/w=="; values round-trip exactly."""
    assert decimal_bytes(-0.01, 2) == "/w=="
    for value in (0, 1.27, 1.28, -1.28, -1.29, 499.99, 12345678.91):
        assert _unscaled(decimal_bytes(value, 2)) == round(value * 100)


def test_mysql_positions_order_like_the_source() -> None:
    """file/pos/row packed as staging does keeps the order of the run's positions, across binlog files."""
    packed = []
    for lsn in (999_997, 999_998, 1_000_001, 1_000_002, 1_000_010):
        p = mysql_position(lsn)
        packed.append(int(p["file"].rsplit(".", 1)[1]) << 44 | p["pos"] << 12 | p["row"])
    assert packed == sorted(packed) and len(set(packed)) == len(packed)


def test_every_kind_is_written_and_counted(lake: Path) -> None:
    """Each line kind the manifest counts is in the files: tombstones, truncates, TOAST, heartbeats, ..."""
    m = Manifest.load(lake / "oracle" / "manifest.json")
    pg = _lines(lake, PG)
    wrapped = [w for x in pg if x.startswith('{"schema": {') and isinstance(w := _json(x), dict)]
    payloads = [w["payload"] for w in wrapped if isinstance(w.get("payload"), dict)]
    ops = Counter(p.get("op") for p in payloads)
    assert m.topics[PG].kinds["truncate"] >= 2 and ops["t"] >= 2
    assert pg.count('{"schema": null, "payload": null}') == m.topics[PG].kinds["tombstone"] > 0
    assert sum(UNAVAILABLE in x for x in pg) >= m.topics[PG].toast > 0
    assert 0 < m.topics[PG].pk_changes < m.topics[PG].deletes
    assert sum(1 for p in payloads if p.get("status") in ("BEGIN", "END")) == m.topics[PG].kinds["transaction"]
    # Snapshot reads share one LSN and say first/true/last.
    snap = [
        p["source"]
        for p in payloads
        if p.get("op") == "r"
        and isinstance(p.get("source"), dict)
        and isinstance(p["source"].get("lsn"), int)
        and p["source"]["lsn"] < 2**62
    ]  # not the malformed copies
    assert len({s["lsn"] for s in snap}) == 1 and {s["snapshot"] for s in snap} == {"first", "true", "last"}
    my = _lines(lake, MY)
    assert my.count("null") == m.topics[MY].kinds["tombstone"] > 0
    changes = [c for x in my if x.startswith('{"before"') and isinstance(c := _json(x), dict)]
    sources = [c["source"] for c in changes if isinstance(c.get("source"), dict) and "pos" in c["source"]]
    assert sources and all(s["ts_ms"] % 1000 == 0 for s in sources if isinstance(s.get("ts_ms"), int))
    assert all(
        isinstance(c["after"]["lifetime_value"], str)
        for c in changes[:50]
        if isinstance(c.get("after"), dict) and c["after"].get("lifetime_value") is not None
    )
    assert sum(m.topics[t].events for t in (PG, MY)) == m.events == len(pg) + len(my)


def test_oracle_truncate_removes_older_rows_and_ignores_later_older_events() -> None:
    """Rows at or below the truncate's version go; rows above stay; later events at or below it are ignored."""
    o = Oracle(["v"])
    o.apply_batch([Event((1,), 10, 1, {"v": "a"}), Event((2,), 30, 1, {"v": "b"})])
    o.apply_batch(
        [Event((), 20, 1, truncate=True), Event((3,), 15, 1, {"v": "late"}), Event((4,), 25, 1, {"v": "new"})]
    )
    o.apply_batch([Event((5,), 19, 1, {"v": "later but older"}), Event((6,), 20, 1, {"v": "same version"})])
    assert o.live_rows() == {(2,): (30, {"v": "b"}), (4,): (25, {"v": "new"})}


def test_oracle_unavailable_column_keeps_the_stored_value() -> None:
    """A column listed as unavailable keeps the stored value; a column really set to NULL becomes NULL."""
    o = Oracle(["note", "status"])
    o.apply_batch([Event((1,), 1, 1, {"note": "long text", "status": "new"})])
    o.apply_batch([Event((1,), 2, 1, {"status": None}, unavailable=frozenset({"note"}))])
    assert o.live_rows() == {(1,): (2, {"note": "long text", "status": None})}
    o.apply_batch([Event((1,), 3, 1, {"note": None, "status": "paid"})])
    assert o.live_rows() == {(1,): (3, {"note": None, "status": "paid"})}
