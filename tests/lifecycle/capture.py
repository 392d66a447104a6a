"""The fixtures captured from real runs (tests/lifecycle/captured, made by vcmt_lab.lifecycle_capture), as the
planners take them: a harness answering as the run's adapter did, the model's objects, its observation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.lifecycle.harness import AdapterFacts, MacroHarness
from vcmt_lab.faults.inject import statement_label

CAPTURED = Path(__file__).parent / "captured"
# The verbs of statements that change the catalog.
DDL = ("create", "drop", "alter", "exchange", "rename")


@dataclass(frozen=True)
class Captured:
    """One capture: what a run observed right before it ran (`observation`, `wanted`, `context`), and what it
    sent and logged."""

    name: str
    data: dict[str, Any]

    @property
    def context(self) -> dict[str, Any]:
        return self.data["context"]

    @property
    def observation(self) -> dict[str, Any]:
        return self.data["observation"]

    @property
    def obs(self) -> dict[str, Any]:
        return self.observation["obs"]

    @property
    def cfg(self) -> dict[str, Any]:
        return self.observation["cfg"]

    @property
    def wanted(self) -> list[dict[str, str]]:
        return self.data["wanted"]

    @property
    def rebuild(self) -> bool:
        """A first run or a --full-refresh (the materialization's `rebuild`)."""
        return (
            "--full-refresh" in self.data["command"] or self.observation["objects"]["target"] not in self.obs["found"]
        )

    @property
    def statements(self) -> list[str]:
        return [s["sql"] for s in self.data["statements"]]

    @property
    def messages(self) -> str:
        """Everything vcmt logged and every error, one line each."""
        return "\n".join(" ".join(m["msg"].split()) for m in self.data["messages"])

    def harness(self) -> MacroHarness:
        """A harness whose adapter answers as this run's did; dbt's relation cache holds the observed catalog."""
        harness = MacroHarness(
            AdapterFacts.from_capture(self.context),
            self.context["vars"],
            [t["name"] for t in self.obs["tables"]],
            self.context["invocation_id"],
        )
        if self.obs.get("lock") is not None:  # observe.sql reads the lock only where the cache holds its table
            target = self.objects(harness)["target"]
            lock = harness.call("_lock_relation", harness.call("_model_relation", target))
            harness.adapter.relations.add(lock.identifier)
        return harness

    def objects(self, harness: MacroHarness) -> dict[str, Any]:
        """The model's objects, built from the captured names as vcmt.objects builds them."""
        return harness.objects(self.observation["schema"], self.observation["objects"])

    def ddl_on(self, names: set[str], verbs: tuple[str, ...] = DDL) -> list[str]:
        """The statements the run sent that change one of the objects `names` (by the name the fault harness
        gives a statement: vcmt_lab.faults.inject.statement_label), in order."""
        out = []
        for sql in self.statements:
            verb, _, obj = statement_label(sql).partition(" ")
            if verb in verbs and obj.split(" ")[0] in names:
                out.append(sql)
        return out


def load(name: str) -> Captured:
    """A fresh copy each time: macros may change what they are given (`cfg._run`)."""
    return Captured(name, json.loads((CAPTURED / f"{name}.json").read_text()))


def names() -> list[str]:
    return sorted(p.stem for p in CAPTURED.glob("*.json"))


def every(predicate=lambda c: True) -> list[str]:
    """The captures that `predicate` selects."""
    return [n for n in names() if predicate(load(n))]
