"""Under macros/vcmt/lifecycle/ only the executor sends statements (issue 58: plan purely, apply in one place).

A macro sends a statement when its text calls `statement` or `run_query` (or an adapter method that runs a query),
or when it refers to a macro of the package that does, however deep: the macros it reaches are read from its text
(`vcmt.<name>`, a dispatched name's implementations, and for `vcmt[...]` every macro the object declarations name).
The harness checks the same thing by rendering (tests/lifecycle/harness.py: `run_query` and `statement` fail);
this test checks every macro of lifecycle/, rendered or not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePath

import pytest

from tests.lifecycle.harness import PACKAGE_ROOT, package_macros
from tests.test_layout import declared_objects

# The macros of lifecycle/ that run statements themselves: the executor (the lead names it).
EXECUTORS: frozenset[str] = frozenset()
# The macros of lifecycle/ that send statements today, directly or through the macros they call. The refactor of
# issue 58 empties it: a macro that stops sending fails its case until it leaves this list, and one that starts
# sending fails until it is listed (or stops).
EXPECTED_OFFENDERS = frozenset(
    {
        "_build_objects",
        "_check_mend_copy",
        "_check_on_every_node",
        "_check_stored_values_fit",  # reads the stored rows of a retyped column
        "_create_objects",
        "_create_role_sql",  # via transform_sql -> _lookup_key: the engine parses an order_by with expressions
        "_create_statements",  # the same, through _views
        "_drop_leftovers",
        "_drop_mend_tables",
        "_exchange_tables",
        "_finish_interrupted_swap",
        "_finish_swap",
        "_helper_tables",  # the same, through _create_role_sql
        "_interrupted_swap",  # reads every node's catalog when not given `nodes`
        "_mend_split",
        "_rebuild_columns",
        "_rebuild_relation",  # reads the dbt node's catalog for the rebuild's name
        "_reconcile_objects",
        "_refuse_interrupted_swap",
        "_repair_distributed",
        "_schema_change_plan",  # _check_stored_values_fit; _sql_differs on a kept projection
        "_swap_in_new_objects",
        "_views",  # the same, through transform_sql
        "_why_split_stays",
    }
)

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


def _sending_path(name: str, bodies: dict[str, tuple[str, PurePath]]) -> list[str] | None:
    """The macros from `name` to one that sends a statement itself, or none when it sends nothing (the executors
    excepted: sending through them is applying the plan)."""
    seen: set[str] = set()
    todo: list[list[str]] = [[name]]
    while todo:
        path = todo.pop(0)
        here = path[-1]
        if _SENDS.search(bodies[here][0]):
            return path
        for callee in _callees(here, bodies):
            if callee not in seen and callee not in EXECUTORS:
                seen.add(callee)
                todo.append([*path, callee])
    return None


BODIES = _bodies()
DECLARED = [o[f] for o in declared_objects() for f in ("create", "select") if f in o]
LIFECYCLE_MACROS = sorted(n for n, (_, path) in BODIES.items() if LIFECYCLE in path.parents)


@pytest.mark.parametrize("name", [n for n in LIFECYCLE_MACROS if n not in EXECUTORS])
def test_a_lifecycle_macro_sends_no_statement_unless_listed(name):
    """A macro of lifecycle/ other than the executor sends a statement exactly when EXPECTED_OFFENDERS lists it."""
    path = _sending_path(name, BODIES)
    if name in EXPECTED_OFFENDERS:
        assert path is not None, f"{name} sends no statement: remove it from EXPECTED_OFFENDERS"
    else:
        assert path is None, f"{name} sends a statement ({' -> '.join(path)}): plan it for the executor instead"


def test_every_listed_offender_and_executor_is_a_lifecycle_macro():
    """A listed macro that was renamed, moved out of lifecycle/ or removed fails here, not silently."""
    assert sorted((EXPECTED_OFFENDERS | EXECUTORS) - set(LIFECYCLE_MACROS)) == []
