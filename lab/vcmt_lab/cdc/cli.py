"""`vcmt-cdc` / `python -m vcmt_lab.cdc`: write a seeded CDC lake for the staging models."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from vcmt_lab.cdc.generator import ENCODINGS, generate
from vcmt_lab.cdc.lake import manifest_path


def _share(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be within [0, 1]; got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vcmt-cdc",
        description="Generate Debezium-style change events in batches, with the expected mart (oracle).",
    )
    p.add_argument("--lake", type=Path, default=Path(".local/lake"), help="lake root (default: .local/lake)")
    p.add_argument("--events", type=int, default=10_000, help="lines to write, all topics together")
    p.add_argument("--batches", type=int, default=5, help="number of batches (_batch_id=0..N-1)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--malformed-share", type=_share, default=0.02, help="share of malformed lines")
    p.add_argument("--wrap-share", type=_share, default=0.2, help="share wrapped as {schema, payload}")
    p.add_argument("--late-window", type=int, default=2, help="max batches a late or repeated line lags")
    p.add_argument("--late-share", type=_share, default=0.05, help="share of changes delivered late")
    p.add_argument("--duplicate-share", type=_share, default=0.02, help="share of redelivered lines")
    p.add_argument(
        "--encoding",
        choices=sorted(ENCODINGS),
        default="simple",
        help="simple: JSON doubles, epoch ms, source.lsn (the SQL staging models); debezium: what real "
        "PostgreSQL and MySQL connectors send (the Python staging models)",
    )
    p.add_argument(
        "--topics",
        default=None,
        help="comma-separated subset of the encoding's topics: "
        + "; ".join(f"{e}: {','.join(t)}" for e, t in ENCODINGS.items()),
    )
    p.add_argument(
        "--meta-share", type=_share, default=0.01, help="debezium: share of heartbeat and transaction-metadata lines"
    )
    p.add_argument("--truncates", type=int, default=1, help="debezium: truncates per PostgreSQL topic")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        manifest = generate(
            args.lake,
            events=args.events,
            batches=args.batches,
            seed=args.seed,
            malformed_share=args.malformed_share,
            wrap_share=args.wrap_share,
            late_window=args.late_window,
            late_share=args.late_share,
            duplicate_share=args.duplicate_share,
            topics=[t.strip() for t in args.topics.split(",") if t.strip()] if args.topics else None,
            encoding=args.encoding,
            meta_share=args.meta_share,
            truncates=args.truncates,
        )
    except ValueError as exc:
        print(f"vcmt-cdc: {exc}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - started
    for t in manifest.topics.values():
        bad = ", ".join(f"{r} {n}" for r, n in t.malformed.items())
        print(
            f"{t.topic}: {t.events} events in {len(t.files)} files, {t.valid_events} valid, "
            f"{t.duplicates} duplicates, {t.late} late, {t.live_rows} live rows; malformed: {bad}"
        )
    print(f"wrote {manifest.events} events to {args.lake} in {elapsed:.2f} s")
    print(f"manifest: {manifest_path(args.lake)}")
    return 0
