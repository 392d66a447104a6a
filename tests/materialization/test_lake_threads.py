"""Several marts reading one staged dataset with `vcmt.lake_source(..., new_files=true)`, run by
`dbt run --threads 4` while batches land (docs/staging.md, "Reading each file once")."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vcmt_lab.dbt_project import DbtProject

# Four marts over one dataset: by key, with a column of its own, even keys only, and a running sum (merge `sum`
# adds every event it applies).
MARTS = {
    "m_plain": ("", "id, x"),
    "m_double": ("", "id, x * 2 as x"),
    "m_even": ("where id % 2 = 0", "id, x"),
    "m_sum": ("", "id, x"),
}


def _mart(name: str) -> str:
    where, columns = MARTS[name]
    merge = ", merge={'x': 'sum'}" if name == "m_sum" else ""
    return (
        f"{{{{ config(materialized='vcmt_upsert', unique_key='id'{merge}) }}}}\n"
        f"select {columns}, toUInt64(_batch_id) as _version, toInt8(1) as sign\n"
        f"from {{{{ vcmt.lake_source('stg_orders', new_files=true) }}}} {where}"
    )


def _land(project: DbtProject, lake: Path, batch: int, ids: range) -> None:
    """One file of `batch`, written by the engine under another name and then renamed into its batch folder,
    as a staging job commits it: a run never lists it half-written."""
    folder = lake / "staged" / "stg_orders" / f"_batch_id={batch}"
    folder.mkdir(parents=True, exist_ok=True)
    written = folder / f".part-{ids.start}.tmp"
    project.command(
        f"insert into function file('{written}', 'Parquet') "
        f"select toInt32(number) as id, toInt64(10 * number) as x from numbers({ids.start}, {len(ids)})"
    )
    os.replace(written, folder / f"part-{ids.start}.parquet")


def test_marts_sharing_a_dataset_under_threads_4_read_each_file_once(project: DbtProject, tmp_path: Path) -> None:
    """Issue 60: four marts read one dataset with new_files=true, run with `--threads 4` while batches land
    (before and during the runs). Every mart ends exact and reads each file once: its recorded loads claimed each
    file once, and their events add up to the rows its SELECT reads."""
    lake = tmp_path / "lake"
    landed: list[range] = []

    def land(batch: int, ids: range) -> None:
        _land(project, lake, batch, ids)
        landed.append(ids)

    project.vars = {"vcmt_lake_root": str(lake)}
    for name in MARTS:
        project.model(name, _mart(name))
    land(1, range(0, 40))
    for batch in (2, 4):
        land(batch, range(20 * batch - 30, 20 * batch + 10))  # updates keys of earlier batches, adds others
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(project.dbt, "run", "--threads", "4")
            land(batch + 1, range(20 * batch, 20 * batch + 30))  # lands while the marts load
            run.result()
    project.dbt("run", "--threads", "4")  # what landed after the last claims
    for name, (where, _) in MARTS.items():
        ids = [i for r in landed for i in r if not where or i % 2 == 0]
        expected = {
            i: 10 * i * ids.count(i) if name == "m_sum" else 10 * i * (2 if name == "m_double" else 1) for i in ids
        }
        assert dict(project.query(f"select id, x from {name} final where sign = 1")) == expected, name
        assert project.query(f"select sum(events) from {name}__loads") == [(len(ids),)], name
        claims = project.query(
            f"select count() from {name}__lake_files where path != '' and invocation_id in "
            f"(select invocation_id from {name}__loads) group by path"
        )
        assert claims == [(1,)] * len(landed), (name, claims)
