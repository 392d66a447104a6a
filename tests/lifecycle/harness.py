"""A macro harness for the lifecycle's planners: the package's macros rendered by dbt's own Jinja machinery
(dbt.clients.jinja.MacroGenerator, dbt's base context, its `exceptions` and its relation proxy), with no engine.

As dbt-clickhouse's tests/unit/macro_harness.py does for its own macros: every macro of the package is one
MacroGenerator over one shared context, here reachable as `vcmt.<name>` (how the package's macros call each
other), beside dbt-clickhouse's own macros (`on_cluster_clause`, ...) and this repository's chdb adapter's. What a
real run's context holds and a planner may use without a server is there: `return`, `exceptions`, `log`,
`modules`, `tojson`/`fromjson`, `local_md5`, `invocation_id`, `run_started_at`, `var` (the project's vars),
`api.Relation` (dbt-clickhouse's ClickHouseRelation, through dbt's RelationProxy) and `adapter`, a stand-in that
answers from what a capture recorded (tests/lifecycle/captured, vcmt_lab.lifecycle_capture): the cluster's name,
the local suffix, `can_exchange`, `type()`, `get_relation` (from the observed catalog) and `dispatch`.

`run_query` and `statement` fail the test that reaches them (ImpureCall): a macro the harness renders to the
end sent nothing. Anything else a run has and the harness does not (`config`, `this`, `graph`, `target`,
`adapter.execute`, ...) is undefined, and a macro that touches it fails too.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dbt.include.clickhouse
from dbt.adapters.clickhouse.relation import ClickHouseRelation
from dbt.clients.jinja import MacroGenerator
from dbt.context.base import generate_base_context
from dbt.context.exceptions_jinja import wrapped_exports
from dbt.context.providers import RelationProxy
from dbt_common.clients.jinja import extract_toplevel_blocks

from tests.conftest import PACKAGE_ROOT, REPO_ROOT

PACKAGE = "vcmt"
# The adapters' macros a run sees beside the package's: dbt-clickhouse's, then the chdb adapter's (this repository).
ADAPTER_MACROS = (
    Path(dbt.include.clickhouse.__file__).parent / "macros",
    REPO_ROOT / "dbt" / "include" / "chdb" / "macros",
)


class ImpureCall(AssertionError):
    """A macro the harness rendered sent a statement (or asked for a query's result): it is not a pure planner."""


@dataclass
class _MacroSource:
    """What MacroGenerator needs of a dbt macro node: its name and its own block, as dbt parses a macro file."""

    name: str
    macro_sql: str
    package_name: str
    original_file_path: str

    @property
    def unique_id(self) -> str:
        return f"macro.{self.package_name}.{self.name}"


@functools.cache
def _macro_sources(root: Path, package: str) -> tuple[_MacroSource, ...]:
    """Every macro block under `root`, read once per session (dbt caches each block's compiled template)."""
    sources: list[_MacroSource] = []
    for path in sorted(root.rglob("*.sql")):
        for block in extract_toplevel_blocks(path.read_text(), allowed_blocks={"macro"}, collect_raw_data=False):
            sources.append(_MacroSource(block.block_name, block.full_block, package, str(path)))
    return tuple(sources)


def package_macros() -> tuple[_MacroSource, ...]:
    """Every macro of the package under test: its name, its block and its file."""
    return _macro_sources(PACKAGE_ROOT / "macros", PACKAGE)


def _impure(name: str):
    def refuse(*args: Any, **kwargs: Any) -> None:
        shown = ", ".join([repr(a) for a in args] + [f"{k}=..." for k in kwargs if k != "caller"])
        raise ImpureCall(f"`{name}({shown})` was called: the macro under test sends statements, so it is not pure")

    return refuse


@dataclass(frozen=True)
class AdapterFacts:
    """What the stand-in adapter answers, as a capture recorded it (vcmt_lab.lifecycle_capture: `context`)."""

    type: str = "chdb"
    cluster: str | None = None
    local_suffix: str = "_local"
    can_exchange: bool = True

    @classmethod
    def from_capture(cls, context: Mapping[str, Any]) -> AdapterFacts:
        return cls(
            type=context["adapter_type"],
            cluster=context["cluster"],
            local_suffix=context["local_suffix"],
            can_exchange=context["can_exchange"],
        )


class _Config:
    """`adapter.config` as dbt's RelationProxy reads it: the project's quoting (dbt-clickhouse quotes every part)."""

    quoting: dict[str, bool] = {}


class StandInAdapter:
    """The `adapter` of a run, for what a planner asks without a server. `relations`: the identifiers, per schema,
    that dbt's relation cache holds (the observed catalog of the dbt node)."""

    Relation = ClickHouseRelation
    config = _Config()

    def __init__(self, facts: AdapterFacts, namespaces: Mapping[str, Mapping[str, Any]], relations: Iterable[str]):
        self._facts = facts
        self._namespaces = namespaces
        self.relations = set(relations)

    def type(self) -> str:
        return self._facts.type

    def get_clickhouse_cluster_name(self) -> str | None:
        # dbt-clickhouse returns the profile's cluster in double quotes (dbt/adapters/clickhouse/impl.py).
        return f'"{self._facts.cluster}"' if self._facts.cluster else None

    def get_clickhouse_local_suffix(self) -> str:
        return self._facts.local_suffix

    def can_exchange(self, schema: str, rel_type: str) -> bool:
        return self._facts.can_exchange and rel_type == "table" and bool(schema)

    def get_relation(self, database: str | None, schema: str, identifier: str) -> ClickHouseRelation | None:
        if identifier not in self.relations:
            return None
        return RelationProxy(self).create(schema=schema, identifier=identifier, type="table")

    def dispatch(self, macro_name: str, macro_namespace: str | None = None) -> Any:
        """dbt's search: `<adapter>__`, then its parents' (`clickhouse__`), then `default__`, in the package
        `macro_namespace` names, else among the adapters' macros."""
        space = self._namespaces[macro_namespace or ""]
        for prefix in dict.fromkeys((self._facts.type, "clickhouse", "default")):
            found = space.get(f"{prefix}__{macro_name}")
            if found is not None:
                return found
        raise KeyError(f"adapter.dispatch: no implementation of `{macro_name}` in {macro_namespace or 'the adapters'}")


class MacroHarness:
    """Every macro of the package, callable by name (`call('_interrupted_swap', ...)`), with no engine.

    `facts`: what the stand-in adapter answers; `vars`: the project's vars (`var()`); `relations`: the identifiers
    dbt's relation cache holds; `invocation_id`, `run_started_at`: the run's."""

    def __init__(
        self,
        facts: AdapterFacts | None = None,
        vars: Mapping[str, Any] | None = None,  # noqa: A002 (dbt's name)
        relations: Iterable[str] = (),
        invocation_id: str = "00000000-0000-0000-0000-000000000001",
        run_started_at: datetime.datetime | None = None,
    ) -> None:
        self.logs: list[tuple[str, bool]] = []
        context: dict[str, Any] = generate_base_context(dict(vars or {}))
        package: dict[str, MacroGenerator] = {}
        adapters: dict[str, MacroGenerator] = {}
        self.adapter = StandInAdapter(facts or AdapterFacts(), {PACKAGE: package, "": adapters}, relations)
        context.update(
            {
                "exceptions": wrapped_exports(None),
                "log": self._log,
                "invocation_id": invocation_id,
                "run_started_at": run_started_at or datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC),
                "execute": True,
                "adapter": self.adapter,
                "api": {"Relation": RelationProxy(self.adapter)},
                "run_query": _impure("run_query"),
                "statement": _impure("statement"),
                PACKAGE: package,
            }
        )
        self.files: dict[str, str] = {}
        for root in ADAPTER_MACROS:
            for source in _macro_sources(root, "clickhouse"):
                adapters[source.name] = MacroGenerator(source, context)
        for source in package_macros():
            if source.name in package:
                raise ValueError(
                    f"macro {source.name} is defined twice, in {self.files[source.name]} and "
                    f"{source.original_file_path}"
                )
            package[source.name] = MacroGenerator(source, context)
            self.files[source.name] = source.original_file_path
        # The adapters' macros are global in a run, as `on_cluster_clause` is to the package's macros.
        context.update(adapters)
        self.context = context
        self.package = package

    @property
    def macro_names(self) -> list[str]:
        return list(self.package)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The macro `vcmt.<name>`'s return value, or the text it renders."""
        if name not in self.package:
            raise KeyError(f"no macro vcmt.{name} under {PACKAGE_ROOT / 'macros'}")
        return self.package[name](*args, **kwargs)

    def relation(self, schema: str, identifier: str, on_cluster: bool = False) -> ClickHouseRelation:
        """A table as the run's `api.Relation.create` makes it (on the profile's cluster when `on_cluster`)."""
        return RelationProxy(self.adapter).create(
            database=schema, schema=schema, identifier=identifier, type="table", can_on_cluster=on_cluster
        )

    def objects(self, schema: str, names: Mapping[str, str]) -> dict[str, ClickHouseRelation]:
        """A model's objects by role, from their names (as vcmt.objects makes them: on the cluster when the
        profile names one)."""
        on_cluster = self.adapter.get_clickhouse_cluster_name() is not None
        return {role: self.relation(schema, name, on_cluster) for role, name in names.items()}

    def _log(self, msg: Any = "", info: bool = False) -> str:
        self.logs.append((str(msg), info))
        return ""
