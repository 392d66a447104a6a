"""Write change events straight into a vcmt_upsert model's stage, safely.

The rule for anyone inserting into `<model>__stage`: **at most one event per
key per INSERT**. A materialized view runs once per insert block and does not
see what earlier blocks of the same INSERT wrote, so a key that appears twice
in one INSERT can be applied twice (docs/design.md#loader). This module obeys
the rule by ranking each key's events by version (an upsert before a delete at
the same version) and sending round r as one INSERT holding every key's r-th
event.

    vcmt-load-stage --model fct_orders --key tenant_id,order_id events.parquet
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class StageWriteResult:
    events: int
    duplicates_dropped: int
    inserts: int


def rounds(
    events: Iterable[Mapping[str, Any]], keys: Sequence[str], version: str = "_version", sign: str = "sign"
) -> list[list[Mapping[str, Any]]]:
    """Split events into rounds holding at most one event per key, in apply order.

    Exact redeliveries (same key, version and sign) are kept once: the target
    would skip them anyway, and they would only add rounds.
    """
    per_key: dict[tuple, dict[tuple, Mapping[str, Any]]] = defaultdict(dict)
    for event in events:
        key = tuple(event[k] for k in keys)
        is_delete = (event.get(sign) or 1) < 0
        per_key[key].setdefault((event[version], is_delete), event)
    out: list[list[Mapping[str, Any]]] = []
    for versions in per_key.values():
        for i, (_, event) in enumerate(sorted(versions.items(), key=lambda item: item[0])):
            if i == len(out):
                out.append([])
            out[i].append(event)
    return out


def write_events(
    client: Any,
    model: str,
    events: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    version: str = "_version",
    sign: str = "sign",
    database: str | None = None,
    settings: Mapping[str, Any] | None = None,
    fold: bool = False,
) -> StageWriteResult:
    """Insert events into `<model>__stage` with a clickhouse-connect client, one round per INSERT.

    `fold=True` sends only each key's last event (one INSERT), as `dbt run` does;
    it is exact only when every merge policy of the model is `replace` and its
    delete_mode is `versioned`.
    """
    stage = f"{model}__stage"
    columns = list(events[0].keys()) if events else []
    batches = rounds(events, keys, version, sign)
    if fold and batches:
        last: dict[tuple, Mapping[str, Any]] = {}
        for batch in batches:
            for event in batch:
                last[tuple(event[k] for k in keys)] = event
        batches = [list(last.values())]
    for batch in batches:
        client.insert(
            stage,
            [[event.get(c) for c in columns] for event in batch],
            column_names=columns,
            database=database,
            settings={"insert_deduplicate": 0, **(settings or {})},
        )
    kept = sum(len(b) for b in batches)
    return StageWriteResult(events=len(events), duplicates_dropped=len(events) - kept, inserts=len(batches))


def _read_events(path: Path) -> list[dict[str, Any]]:
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    suffix = path.suffix.lower()
    if suffix == ".parquet":
        table = pq.read_table(path)
    elif suffix == ".csv":
        table = pacsv.read_csv(path)
    elif suffix in (".json", ".jsonl", ".ndjson"):
        table = pajson.read_json(path)
    else:
        raise SystemExit(f"vcmt-load-stage: unsupported file type '{suffix}'; use .parquet, .csv or .jsonl")
    return table.to_pylist()


def _client(args: argparse.Namespace) -> Any:
    import clickhouse_connect

    if args.chdb_path:
        return clickhouse_connect.get_client(interface="chdb", path=args.chdb_path, database=args.database)
    return clickhouse_connect.get_client(
        host=args.host, port=args.port, username=args.user, password=args.password,
        secure=args.secure, database=args.database,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-load-stage", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="events as .parquet, .csv or .jsonl")
    parser.add_argument("--model", required=True, help="the vcmt_upsert model (its stage is <model>__stage)")
    parser.add_argument("--key", required=True, help="unique_key columns, comma-separated")
    parser.add_argument("--version", default="_version")
    parser.add_argument("--sign", default="sign")
    parser.add_argument("--database", default="vcmt")
    parser.add_argument("--chdb-path", help="embedded chDB data directory (instead of a server)")
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--user", default="default")
    parser.add_argument("--password", default="")
    parser.add_argument("--secure", action="store_true")
    args = parser.parse_args(argv)
    events = _read_events(args.file)
    keys = [k.strip() for k in args.key.split(",") if k.strip()]
    missing = [c for c in [*keys, args.version] if events and c not in events[0]]
    if missing:
        print(f"vcmt-load-stage: {args.file} has no column(s) {missing}", file=sys.stderr)
        return 2
    result = write_events(_client(args), args.model, events, keys, args.version, args.sign, args.database)
    print(
        f"vcmt-load-stage: {result.events} events -> {args.model}__stage in {result.inserts} INSERT(s)"
        f" ({result.duplicates_dropped} exact duplicates dropped)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
