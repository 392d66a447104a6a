"""A vcmt_upsert model fed batch by batch, checked against the Python oracle."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vcmt_lab.dbt_project import DbtProject, DbtRun
from vcmt_lab.oracle import Event, Oracle


def jinja_literal(value: Any) -> str:
    """Python literal that Jinja parses to the same value (dicts, lists, str, numbers)."""
    return repr(value)


class Scenario:
    """Source table `<name>_src` holding the current batch → model `<name>` (vcmt_upsert)."""

    def __init__(
        self,
        project: DbtProject,
        columns: Mapping[str, str],
        config: Mapping[str, Any],
        name: str = "m",
        select: str | None = None,
    ) -> None:
        self.project = project
        self.name = name
        self.columns = dict(columns)
        self.config = dict(config)
        self.batch = 0
        cols = ", ".join(f"`{c}` {t}" for c, t in self.columns.items())
        project.command(f"create table `{name}_src` ({cols}, `_batch` UInt32) engine = MergeTree order by _batch")
        select = select or ", ".join(f"`{c}`" for c in self.columns)
        self.write_model(select)

    def write_model(self, select: str, **config_overrides: Any) -> None:
        self.config.update(config_overrides)
        args = ", ".join(f"{k}={jinja_literal(v)}" for k, v in self.config.items())
        self.project.model(
            self.name,
            f"{{{{ config(materialized='vcmt_upsert', {args}) }}}}\nselect {select} from `{self.name}_src`",
        )

    def insert_source(self, rows: Iterable[Sequence[Any]]) -> int:
        """Replace the source table's content with the next batch (keeps dbt's partial parse valid)."""
        self.batch += 1
        self.project.command(f"truncate table `{self.name}_src`")
        data = [list(r) + [self.batch] for r in rows]
        if data:
            self.project.client.insert(
                f"{self.name}_src", data, column_names=[*self.columns, "_batch"], database=self.project.schema
            )
        return self.batch

    def run_batch(self, rows: Iterable[Sequence[Any]], *extra: str, expect_pass: bool = True) -> DbtRun:
        self.insert_source(rows)
        return self.project.dbt("run", "--select", self.name, *extra, expect_pass=expect_pass)

    # -- reading the target ---------------------------------------------------
    def final_rows(self, order: str | None = None) -> list[tuple]:
        cols = ", ".join(f"`{c}`" for c in self.target_columns())
        order = order or ", ".join(f"`{k}`" for k in self.keys)
        return self.project.query(f"select {cols} from `{self.name}` final where sign = 1 order by {order}")

    def target_columns(self) -> list[str]:
        sign = self.config.get("sign", "sign")
        return [c for c in self.columns if c != sign and c != "_batch"]

    @property
    def keys(self) -> list[str]:
        key = self.config["unique_key"]
        return [key] if isinstance(key, str) else list(key)

    def assert_invariants(self) -> None:
        """Per key and per (key, version) sum(sign) in {0, 1}; one live version per key."""
        p = self.project
        keys = ", ".join(f"`{k}`" for k in self.keys)
        version = self.config.get("version", "_version")
        bad_key = p.query(f"select {keys}, sum(sign) s from `{self.name}` group by {keys} having s not in (0, 1)")
        assert not bad_key, f"per-key sum(sign) outside {{0,1}}: {bad_key[:5]}"
        bad_kv = p.query(
            f"select {keys}, `{version}`, sum(sign) s from `{self.name}` group by {keys}, `{version}` "
            "having s not in (0, 1)"
        )
        assert not bad_kv, f"per-(key, version) sum(sign) outside {{0,1}}: {bad_kv[:5]}"
        multi = p.query(
            f"select {keys}, count() from (select {keys}, `{version}` from `{self.name}` "
            f"group by {keys}, `{version}` having sum(sign) > 0) group by {keys} having count() > 1"
        )
        assert not multi, f"keys with more than one live version: {multi[:5]}"


def oracle_events(
    rows: Iterable[Sequence[Any]],
    columns: Sequence[str],
    keys: Sequence[str],
    version: str = "_version",
    sign: str | None = "sign",
) -> list[Event]:
    events = []
    for row in rows:
        values = dict(zip(columns, row, strict=True))
        events.append(
            Event(
                key=tuple(values[k] for k in keys),
                version=values[version],
                sign=-1 if sign and values.get(sign, 1) < 0 else 1,
                values={c: v for c, v in values.items() if c not in (*keys, version, sign)},
            )
        )
    return events


def expected_rows(
    oracle: Oracle, columns: Sequence[str], keys: Sequence[str], version: str = "_version", sign: str = "sign"
) -> list[tuple]:
    """The oracle's live rows in the column order of Scenario.final_rows()."""
    out = []
    for key, (ver, row) in sorted(oracle.live_rows().items()):
        values = {**dict(zip(keys, key, strict=True)), **row, version: ver}
        out.append(tuple(values[c] for c in columns if c != sign))
    return out
