"""Under macros/vcmt/lifecycle/ only the executor sends statements, and the planners send none at all (issue 58:
plan purely, apply in one place).

A macro sends a statement when its text calls `statement` or `run_query` (or an adapter method that runs a query).
The orchestration (lifecycle.sql) may read what it needs through the readers of engine/ and checks/, but it sends no
statement of its own: every lifecycle statement is a step of a plan, sent by the executor. A planner (plans.sql)
sends nothing, however deep: the macros it reaches are read from its text (`vcmt.<name>`, a dispatched name's
implementations, and for `vcmt[...]` every macro the object declarations name); the engine's parse of the config's
own SQL (`_explain_ast`, `_sql_list_items`) is done once per run before planning and kept for it, so a plan reads
it from the run's state. The harness checks the same by rendering (tests/lifecycle/harness.py: `run_query` and
`statement` fail).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePath

import pytest

from tests.lifecycle.harness import PACKAGE_ROOT, package_macros
from tests.test_layout import declared_objects

# The macro of lifecycle/ that sends the lifecycle's statements (macros/vcmt/lifecycle/apply.sql).
EXECUTORS = frozenset({"_apply"})
# The engine's parse of the config's SQL, memoized per run (config.sql `_run_state`): what a planner may reach.
MEMOIZED_PARSES = frozenset({"_explain_ast", "_sql_list_items"})
PLANNERS = PurePath("macros", "vcmt", "lifecycle", "plans.sql")

LIFECYCLE = PurePath("macros", "vcmt", "lifecycle")
# What sends a statement: dbt's `statement` block and `run_query`, and the adapter's methods that run a query.
_SENDS = re.compile(
    r"\bcall\s+statement\s*\(|\brun_query\s*\(|\badapter\.(?:execute|get_columns_in_relation|get_column_schema_from_query)\s*\("
)
_COMMENT = re.compile(r"{#.*?#}", re.S)
_CALLS = re.compile(r"\bvcmt\.(\w+)")
_DISPATCH = re.compile(r"adapter\.dispatch\(\s*'(\w+)'")


def _bodies() -> dict[str, tuple[str, PurePath]]:
    """name -> (text without comments, file relative to the package)."""
    out = {}
    for m in package_macros():
        out[m.name] = (_COMMENT.sub("", m.macro_sql), PurePath(m.original_file_path).relative_to(PACKAGE_ROOT))
    return out


def _callees(name: str, bodies: dict[str, tuple[str, PurePath]]) -> Iterator[str]:
    text = bodies[name][0]
    yield from (c for c in _CALLS.findall(text) if c in bodies)
    for dispatched in _DISPATCH.findall(text):
        yield from (n for n in bodies if n.endswith("__" + dispatched))
    if re.search(r"\bvcmt\[", text):  # a macro named by an object declaration (model/objects.sql)
        yield from DECLARED


def _sending_path(name: str, bodies: dict[str, tuple[str, PurePath]], stop: frozenset[str]) -> list[str] | None:
    """The macros from `name` to one that sends a statement itself, or none when it sends nothing (not looking
    past the macros of `stop`)."""
    seen: set[str] = set()
    todo: list[list[str]] = [[name]]
    while todo:
        path = todo.pop(0)
        here = path[-1]
        if _SENDS.search(bodies[here][0]):
            return path
        for callee in _callees(here, bodies):
            if callee not in seen and callee not in stop:
                seen.add(callee)
                todo.append([*path, callee])
    return None


BODIES = _bodies()
DECLARED = [o[f] for o in declared_objects() for f in ("create", "select") if f in o]
LIFECYCLE_MACROS = sorted(n for n, (_, path) in BODIES.items() if LIFECYCLE in path.parents)
PLANNER_MACROS = sorted(n for n, (_, path) in BODIES.items() if path == PLANNERS)


@pytest.mark.parametrize("name", [n for n in LIFECYCLE_MACROS if n not in EXECUTORS])
def test_a_lifecycle_macro_sends_no_statement_of_its_own(name):
    """Only the executor calls `statement` or `run_query` under lifecycle/."""
    assert not _SENDS.search(BODIES[name][0]), f"{name} sends a statement: make it a step of a plan for the executor"


@pytest.mark.parametrize("name", PLANNER_MACROS)
def test_a_planner_sends_nothing_however_deep(name):
    """A planner returns statements and runs none, nor does anything it calls."""
    path = _sending_path(name, BODIES, MEMOIZED_PARSES)
    assert path is None, f"{name} sends a statement ({' -> '.join(path)}): a planner takes what it needs as input"


def test_the_executor_and_the_planners_are_where_they_are_named():
    """A renamed or moved executor or planners file fails here, not by checking nothing."""
    assert EXECUTORS <= set(LIFECYCLE_MACROS) and len(PLANNER_MACROS) >= 8
