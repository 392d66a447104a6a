"""What one generator run wrote and what staging and the mart must make of it."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vcmt_lab.cdc.delivery import KINDS, Line
from vcmt_lab.cdc.domain import UNAVAILABLE, Domain
from vcmt_lab.cdc.malformed import reasons_of


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
    flavour: str = "simple"
    # Lines by what staging must make of them (delivery.KINDS), and, among change lines: deletes,
    # lines carrying the unavailable-value placeholder (TOAST); and the primary-key changes made.
    kinds: dict[str, int] = field(default_factory=dict)
    deletes: int = 0
    pk_changes: int = 0
    toast: int = 0

    @classmethod
    def of(cls, domain: Domain, batches: list[list[Line]], live_rows: int, files: list[str]) -> TopicManifest:
        lines = [line for batch in batches for line in batch]
        valid = [line for line in lines if line.kind == "change"]
        reasons = Counter(line.reason for line in lines if line.reason is not None)
        ops = Counter(line.change.op for line in valid if line.change is not None)
        kinds = Counter(line.kind for line in lines)
        changes = [line.change for line in valid if line.change is not None]
        return cls(
            topic=domain.name,
            key=list(domain.key),
            columns=list(domain.columns),
            merge={c: domain.merge.get(c, "replace") for c in domain.columns},
            events=len(lines),
            events_per_batch=[len(batch) for batch in batches],
            valid_events=len(valid),
            valid_per_batch=[sum(line.kind == "change" for line in batch) for batch in batches],
            expected_staged=len(valid),
            malformed={reason: reasons.get(reason, 0) for reason in reasons_of(domain)},
            malformed_per_batch=[sum(line.reason is not None for line in batch) for batch in batches],
            valid_by_op={op: ops.get(op, 0) for op in ("r", "c", "u", "d")},
            changes=sum(not line.duplicate for line in valid),
            reinserts=sum(line.change.reinsert and not line.duplicate for line in valid if line.change),
            late=sum(line.late for line in valid),
            duplicates=sum(line.duplicate for line in valid),
            wrapped=sum(line.wrapped for line in lines),
            live_rows=live_rows,
            files=files,
            flavour=domain.flavour,
            kinds={k: kinds.get(k, 0) for k in KINDS},
            deletes=sum(c.op == "d" for c in changes),
            pk_changes=sum(
                line.change.pk_change and line.change.op == "d" and not line.duplicate
                for line in valid
                if line.change is not None
            ),
            toast=sum(UNAVAILABLE in (c.after or {}).values() for c in changes),
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
    encoding: str = "simple"

    @property
    def malformed(self) -> dict[str, int]:
        reasons = dict.fromkeys(r for t in self.topics.values() for r in t.malformed)
        return {r: sum(t.malformed.get(r, 0) for t in self.topics.values()) for r in reasons}

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
