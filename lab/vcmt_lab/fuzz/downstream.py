"""The fuzz's downstream models of a stream's model, and their oracle (README, "Downstream models").

For model `x`: `x_totals`, an incremental model over `vcmt.changes(ref('x'))` (the README's recipe), and
`x_online`, a `vcmt_aggregate` model. Both keep, per group (a column of `x` as text), the live rows' count and
the sum of a measure; the oracle computes the same from its live rows.
"""

from __future__ import annotations

from typing import Any

from vcmt_lab.dbt_project import DbtProject
from vcmt_lab.fuzz.streams import ModelSpec
from vcmt_lab.oracle import Oracle

# A group's text when its column is NULL (no value of the fuzz's is this).
NULL_GROUP = "~"


def group_column(spec: ModelSpec) -> str:
    """The column whose value (as text) groups the downstream models: the first data column that is no array."""
    return next(c for c, t in spec.columns.items() if not t.startswith("Array"))


def measure_column(spec: ModelSpec) -> str | None:
    """The column the downstream models sum: the first integer data column, if any."""
    return next((c for c, t in spec.columns.items() if "Int" in t), None)


def _group_sql(spec: ModelSpec) -> str:
    return f"ifNull(toString(`{group_column(spec)}`), '{NULL_GROUP}')"


def _measure_sql(spec: ModelSpec) -> str:
    measure = measure_column(spec)
    return f"ifNull(`{measure}`, 0)" if measure else "0"


def totals_sql(spec: ModelSpec, fail: str | None = None) -> str:
    """`x_totals`: the README's incremental model over the changes. With `fail` (an incremental run), one whose run
    fails "while reading" (its SELECT, before anything changed) or "after its swap" (a post-hook, once its new
    table is in place)."""
    changes = f"{{{{ vcmt.changes(ref('{spec.name}')) }}}}"
    message = "'fuzz: the downstream run failed'"
    hook = f', post_hook="select throwIf(1, {message})"' if fail == "after its swap" else ""
    # A scalar subquery runs before the query whatever rows it reads: a throwIf over the rows is skipped when a
    # run has no change (`fz_g in (<empty>)` is false, and the rest of the `and` is never evaluated).
    reading = (
        f" and (select throwIf(count() >= 0, {message}) from {{{{ this }}}}) = 0" if fail == "while reading" else ""
    )
    return f"""
{{{{ config(materialized='incremental', unique_key='fz_g'{hook}) }}}}
select fz_g, sum(fz_n) as fz_n, sum(fz_s) as fz_s, max(_vcmt_load) as _vcmt_load
from (
    select {_group_sql(spec)} as fz_g, sign as fz_n, {_measure_sql(spec)} * sign as fz_s, _vcmt_load from {changes}
    {{% if is_incremental() %}}
    union all
    select fz_g, fz_n, fz_s, _vcmt_load from {{{{ this }}}}
    where fz_g in (select {_group_sql(spec)} from {changes}){reading}
    {{% endif %}}
)
group by fz_g
"""


def online_sql(spec: ModelSpec) -> str:
    """`x_online`: the same totals kept online by a vcmt_aggregate model."""
    return f"""
{{{{ config(materialized='vcmt_aggregate') }}}}
select {_group_sql(spec)} as fz_g, sum(sign) as fz_n, sum({_measure_sql(spec)} * sign) as fz_s
from {{{{ ref('{spec.name}') }}}}
group by fz_g
"""


def totals_name(spec: ModelSpec) -> str:
    return f"{spec.name}_totals"


def online_name(spec: ModelSpec) -> str:
    return f"{spec.name}_online"


def write_downstream(project: DbtProject, spec: ModelSpec) -> None:
    project.model(totals_name(spec), totals_sql(spec))
    project.model(online_name(spec), online_sql(spec))


def expected_totals(spec: ModelSpec, oracle: Oracle) -> dict[str, tuple[int, int]]:
    """Per group of the oracle's live rows: (rows, sum of the measure)."""
    group, measure = group_column(spec), measure_column(spec)
    totals: dict[str, tuple[int, int]] = {}
    for _version, values in oracle.live_rows().values():
        g = NULL_GROUP if values[group] is None else str(values[group])
        n, s = totals.get(g, (0, 0))
        totals[g] = (n + 1, s + ((values[measure] or 0) if measure else 0))
    return totals


def check_downstream(project: DbtProject, spec: ModelSpec, oracle: Oracle, online: bool = True) -> list[str]:
    """Differences between each downstream model and the oracle's totals, as readable lines."""
    expected = expected_totals(spec, oracle)
    problems = []
    rows: list[Any] = project.query(f"select fz_g, fz_n, fz_s from `{totals_name(spec)}`")
    totals = {g: (n, s) for g, n, s in rows if n != 0}
    if totals != expected:
        problems.append(f"{totals_name(spec)}: {_diff(totals, expected)}")
    if any(n == 0 and s != 0 for _, n, s in rows):
        problems.append(f"{totals_name(spec)}: a group with no row has a sum: {rows}")
    if online:
        kept = project.query(
            f"select fz_g, sum(fz_n), sum(fz_s) from `{online_name(spec)}` group by fz_g "
            "having sum(fz_n) != 0 or sum(fz_s) != 0"
        )
        found = {g: (n, s) for g, n, s in kept}
        if found != expected:
            problems.append(f"{online_name(spec)}: {_diff(found, expected)}")
    return problems


def _diff(found: dict[str, tuple[int, int]], expected: dict[str, tuple[int, int]]) -> str:
    keys = sorted(set(found) | set(expected))
    return "; ".join(
        f"{g}: {found.get(g)} != oracle {expected.get(g)}" for g in keys if found.get(g) != expected.get(g)
    )
