"""Where generated files live in the lake, laid out like a Kafka Connect S3 sink.

    <lake>/raw/<topic>/_batch_id=<N>/<topic>+0+<first offset, 10 digits>.json
    <lake>/oracle/<topic>.jsonl
    <lake>/oracle/manifest.json

The `_batch_id=<N>` folders are Hive partitions, so Spark and ClickHouse both
read the batch number from the path. Offsets count lines per topic (one Kafka
partition), as the sink names its files by the first offset they hold.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from vcmt_lab.cdc.delivery import Line

# Kafka Connect's default `filename.offset.zero.pad.width`.
OFFSET_WIDTH = 10


def raw_dir(lake: Path, topic: str) -> Path:
    return lake / "raw" / topic


def oracle_dir(lake: Path) -> Path:
    return lake / "oracle"


def manifest_path(lake: Path) -> Path:
    return oracle_dir(lake) / "manifest.json"


def batch_file(lake: Path, topic: str, batch: int, first_offset: int) -> Path:
    return raw_dir(lake, topic) / f"_batch_id={batch}" / f"{topic}+0+{first_offset:0{OFFSET_WIDTH}d}.json"


def write_raw(lake: Path, topic: str, batches: list[list[Line]]) -> list[str]:
    """One file per non-empty batch, replacing the topic's raw folder; returns paths relative to the lake."""
    # A previous run with more batches would otherwise leave stale partitions behind.
    shutil.rmtree(raw_dir(lake, topic), ignore_errors=True)
    written: list[str] = []
    offset = 0
    for batch, lines in enumerate(batches):
        if not lines:
            continue
        path = batch_file(lake, topic, batch, offset)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line.text + "\n" for line in lines))
        written.append(path.relative_to(lake).as_posix())
        offset += len(lines)
    return written


def write_oracle(lake: Path, topic: str, rows: list[dict[str, Any]]) -> Path:
    path = oracle_dir(lake) / f"{topic}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
