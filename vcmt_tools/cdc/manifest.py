"""What one generator run wrote and what staging and the mart must make of it."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vcmt_tools.cdc.delivery import Line
from vcmt_tools.cdc.domain import Domain
from vcmt_tools.cdc.malformed import REASONS


@dataclass
class TopicManifest:
    topic: str
    key: list[str]
    columns: list[str]
    merge: dict[str, str]
    events: int  # lines written, every kind included: count in
    events_per_batch: list[int]
    valid_events: int
    valid_per_batch: list[int]
    # Staging keeps every valid line, duplicates and late ones included; the mart sorts them out.
    expected_staged: int
    malformed: dict[str, int]
    malformed_per_batch: list[int]
    valid_by_op: dict[str, int]
    changes: int  # distinct source changes (before duplication)
    reinserts: int
    late: int
    duplicates: int
    wrapped: int
    live_rows: int
    files: list[str] = field(default_factory=list)  # relative to the lake root

    @classmethod
    def of(cls, domain: Domain, batches: list[list[Line]], live_rows: int, files: list[str]) -> TopicManifest:
        lines = [line for batch in batches for line in batch]
        valid = [line for line in lines if line.change is not None]
        reasons = Counter(line.reason for line in lines if line.reason is not None)
        ops = Counter(line.change.op for line in valid if line.change is not None)
        return cls(
            topic=domain.name,
            key=list(domain.key),
            columns=list(domain.columns),
            merge={c: domain.merge.get(c, "replace") for c in domain.columns},
            events=len(lines),
            events_per_batch=[len(batch) for batch in batches],
            valid_events=len(valid),
            valid_per_batch=[sum(line.change is not None for line in batch) for batch in batches],
            expected_staged=len(valid),
            malformed={reason: reasons.get(reason, 0) for reason in REASONS},
            malformed_per_batch=[sum(line.reason is not None for line in batch) for batch in batches],
            valid_by_op={op: ops.get(op, 0) for op in ("r", "c", "u", "d")},
            changes=sum(not line.duplicate for line in valid),
            reinserts=sum(line.change.reinsert and not line.duplicate for line in valid if line.change),
            late=sum(line.late for line in valid),
            duplicates=sum(line.duplicate for line in valid),
            wrapped=sum(line.wrapped for line in lines),
            live_rows=live_rows,
            files=files,
        )


@dataclass
class Manifest:
    seed: int
    batches: int
    events: int
    late_window: int
    malformed_share: float
    wrap_share: float
    late_share: float
    duplicate_share: float
    topics: dict[str, TopicManifest]

    @property
    def malformed(self) -> dict[str, int]:
        return {r: sum(t.malformed[r] for t in self.topics.values()) for r in REASONS}

    @property
    def valid_events(self) -> int:
        return sum(t.valid_events for t in self.topics.values())

    @property
    def expected_staged(self) -> int:
        return sum(t.expected_staged for t in self.topics.values())

    @property
    def expected_quarantined(self) -> int:
        return sum(self.malformed.values())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            malformed=self.malformed,
            valid_events=self.valid_events,
            expected_staged=self.expected_staged,
            expected_quarantined=self.expected_quarantined,
        )
        return out

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> Manifest:
        data = json.loads(path.read_text())
        fields = set(cls.__dataclass_fields__)
        topics = {name: TopicManifest(**t) for name, t in data["topics"].items()}
        return cls(**{k: v for k, v in data.items() if k in fields and k != "topics"}, topics=topics)
