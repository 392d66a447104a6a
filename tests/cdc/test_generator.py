"""The CDC generator: deterministic files, Kafka Connect layout, every event kind, a faithful oracle."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from tests.cdc.reference import parse_lake, raw_lines
from vcmt_lab.cdc import REASONS, Manifest, generate
from vcmt_lab.cdc.cli import main
from vcmt_lab.cdc.delivery import Line
from vcmt_lab.cdc.domain import Customers, Orders
from vcmt_lab.cdc.expected import live_rows
from vcmt_lab.cdc.source import Change
from vcmt_lab.oracle import Oracle

SMALL = dict(events=2_000, batches=4, seed=3, malformed_share=0.05, wrap_share=0.3, late_window=2)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cdc") / "lake"
    generate(root, **SMALL)
    return root


@pytest.fixture(scope="module")
def manifest(lake: Path) -> Manifest:
    return Manifest.load(lake / "oracle" / "manifest.json")


def _digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_same_seed_identical_files(lake: Path, tmp_path: Path) -> None:
    """Two runs with the same arguments write byte-identical lakes."""
    again = tmp_path / "again"
    generate(again, **SMALL)
    assert _digest(again) == _digest(lake)


def test_other_seed_different_files(lake: Path, tmp_path: Path) -> None:
    """A different seed gives a different lake."""
    other = tmp_path / "other"
    generate(other, **{**SMALL, "seed": 4})
    assert _digest(other) != _digest(lake)


def test_layout_kafka_connect_hive_partitions(lake: Path, manifest: Manifest) -> None:
    """One file per topic and batch, `_batch_id=N/<topic>+0+<10-digit first offset>.json`, offsets contiguous."""
    for topic, t in manifest.topics.items():
        files = sorted((lake / "raw" / topic).glob("*/*"))
        assert [f.relative_to(lake).as_posix() for f in files] == t.files
        offset = 0
        for batch, path in enumerate(files):
            assert path.parent.name == f"_batch_id={batch}"
            assert path.name == f"{topic}+0+{offset:010d}.json"
            offset += len(path.read_text().splitlines())
        assert offset == t.events == sum(t.events_per_batch)
    assert sorted(p.name for p in (lake / "oracle").iterdir()) == [
        "customers.jsonl",
        "manifest.json",
        "orders.jsonl",
    ]


def test_every_event_kind_present(manifest: Manifest) -> None:
    """Snapshot, insert, update, delete, re-insert, duplicate, late, wrapped and every malformed reason occur."""
    for t in manifest.topics.values():
        assert all(t.valid_by_op[op] > 0 for op in "rcud"), t.valid_by_op
        assert t.reinserts > 0 and t.duplicates > 0 and t.late > 0 and t.wrapped > 0
        assert all(t.malformed[reason] > 0 for reason in REASONS), t.malformed


def test_snapshot_reads_first_delivered_in_batch_zero(lake: Path) -> None:
    """`r` events are the initial snapshot: first delivered in batch 0 (a redelivery may come later)."""
    for topic in ("orders", "customers"):
        first: dict[int, int] = {}
        for p in parse_lake(lake, topic):
            if p.row is not None and p.row["_op"] == "r":
                first[p.row["_version"]] = min(first.get(p.row["_version"], p.line.batch), p.line.batch)
        assert first and set(first.values()) == {0}


def test_malformed_counts_match_manifest(lake: Path, manifest: Manifest) -> None:
    """Reading the files with the staging rules finds exactly the manifest's malformed lines, by reason."""
    for topic, t in manifest.topics.items():
        parsed = parse_lake(lake, topic)
        found = Counter(p.reason for p in parsed if p.reason)
        assert {r: found.get(r, 0) for r in REASONS} == t.malformed
        assert sum(p.reason is None for p in parsed) == t.valid_events == t.expected_staged
        per_batch = Counter(p.line.batch for p in parsed)
        assert [per_batch[b] for b in range(manifest.batches)] == t.events_per_batch
    assert manifest.expected_quarantined + manifest.expected_staged == manifest.events


def test_versions_order_a_valid_lifecycle_per_key(lake: Path) -> None:
    """Per key, distinct changes in `source.lsn` order form a valid life: create, updates, delete, re-create."""
    for topic, domain in (("orders", Orders), ("customers", Customers)):
        history: dict[tuple, dict[int, str]] = {}
        for p in parse_lake(lake, topic):
            if p.row is not None:
                key = tuple(p.row[c] for c in domain.key)
                assert history.setdefault(key, {}).setdefault(p.row["_version"], p.row["_op"]) == p.row["_op"]
        for key, ops in history.items():
            live = False
            for _, op in sorted(ops.items()):
                assert (op in "rc") != live, f"{topic} {key}: {op} while {'live' if live else 'absent'}"
                live = op != "d"


def test_oracle_file_matches_replay_of_lake(lake: Path, manifest: Manifest) -> None:
    """Replaying the valid lines batch by batch through the oracle reproduces oracle/<topic>.jsonl."""
    for topic, t in manifest.topics.items():
        parsed = [p for p in parse_lake(lake, topic) if p.row is not None]
        oracle = Oracle(t.columns, merge=t.merge, delete_mode="versioned")
        for batch in range(manifest.batches):
            oracle.apply_batch(p.event() for p in parsed if p.line.batch == batch)
        expected = [json.loads(line) for line in (lake / "oracle" / f"{topic}.jsonl").read_text().splitlines()]
        replayed = []
        for key, (version, row) in sorted(oracle.live_rows().items()):
            if row.get("created_at") is not None:
                row["created_at"] = row["created_at"].isoformat(timespec="milliseconds").replace("+00:00", "Z")
            replayed.append({**dict(zip(t.key, key, strict=True)), **row, "_version": version})
        assert replayed == expected
        assert len(expected) == t.live_rows > 0


def _line(change: Change) -> Line:
    return Line(text="", change=change)


def _order(op: str, lsn: int, status: str = "new", order_id: int = 1) -> Change:
    row = {
        "tenant_id": 1,
        "order_id": order_id,
        "customer_id": 7,
        "status": status,
        "amount": 10.0,
        "note": None,
        "created_at": 1_767_225_600_000,
    }
    before, after = (row, None) if op == "d" else (None, row)
    return Change(op, (1, order_id), before, after, lsn, 0, 0)


def test_oracle_late_update_after_delete_stays_deleted() -> None:
    """A late update older than a delete does not bring the key back; a newer re-insert does."""
    batches = [
        [_line(_order("c", 10)), _line(_order("u", 20, "paid"))],
        [_line(_order("d", 30)), _line(_order("u", 20, "paid"))],  # redelivered update
        [_line(_order("u", 25, "shipped"))],  # late: older than the delete
    ]
    assert live_rows(Orders(), batches) == []
    batches.append([_line(_order("c", 40, "new"))])
    rows = live_rows(Orders(), batches)
    assert [(r["status"], r["_version"]) for r in rows] == [("new", 40)]
    assert rows[0]["created_at"] == "2026-01-01T00:00:00.000Z"


def test_oracle_out_of_order_within_batch_keeps_newest() -> None:
    """Inside one batch, events apply in version order whatever the delivery order."""
    rows = live_rows(Orders(), [[_line(_order("u", 30, "shipped")), _line(_order("c", 10))]])
    assert [(r["status"], r["_version"]) for r in rows] == [("shipped", 30)]


def test_oracle_partial_customer_updates_merge_by_policy() -> None:
    """Customers: NULL in a partial update keeps the stored value; lifetime_value only grows."""
    full = {"customer_id": 5, "name": "Ada", "email": "a@x", "tier": "gold", "lifetime_value": 10.0}

    def change(op: str, lsn: int, after: dict) -> Line:
        return _line(Change(op, (5,), None, {"customer_id": 5, **after}, lsn, 0, 0))

    batches = [
        [change("r", 1, full)],
        [change("u", 2, {"name": None, "email": "b@x", "tier": None, "lifetime_value": 4.0})],
        [change("u", 3, {"name": None, "email": None, "tier": "silver", "lifetime_value": 25.5})],
    ]
    assert live_rows(Customers(), batches) == [
        {"customer_id": 5, "name": "Ada", "email": "b@x", "tier": "silver", "lifetime_value": 25.5, "_version": 3}
    ]


def test_customer_partial_update_carries_only_changed_fields(lake: Path) -> None:
    """A customers `u` event names every column but leaves unchanged ones NULL; `c`/`r` carry all fields."""
    parsed = [p for p in parse_lake(lake, "customers") if p.row is not None]
    updates = [p.row for p in parsed if p.row["_op"] == "u"]
    assert any(sum(u[c] is None for c in Customers.columns) >= 2 for u in updates)
    creates = [p.row for p in parsed if p.row["_op"] in ("c", "r")]
    assert all(r["name"] and r["email"] and r["lifetime_value"] is not None for r in creates)


def test_cli_writes_lake_and_reports(tmp_path: Path, capsys) -> None:
    """`vcmt-cdc` writes the lake and a manifest matching its flags."""
    lake = tmp_path / "lake"
    code = main(["--lake", str(lake), "--events", "400", "--batches", "2", "--seed", "9", "--topics", "orders"])
    assert code == 0
    manifest = Manifest.load(lake / "oracle" / "manifest.json")
    assert (manifest.events, manifest.batches, list(manifest.topics)) == (400, 2, ["orders"])
    assert sum(1 for _ in raw_lines(lake, "orders")) == 400
    assert "orders: 400 events" in capsys.readouterr().out


def test_cli_bad_topic_exits_with_message(tmp_path: Path, capsys) -> None:
    """An unknown topic is refused with a message naming the allowed ones."""
    assert main(["--lake", str(tmp_path), "--topics", "invoices"]) == 2
    assert "`topics` must be a non-empty subset of ['customers', 'orders']" in capsys.readouterr().err
