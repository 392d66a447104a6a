"""`python -m vcmt_lab.bench.virtual_shards --engine cluster` at a tiny size, on the session's two-shard cluster.

No timing assertions: at this size the numbers mean nothing. What is checked is what the figures in
lab/bench/README.md rest on: each sample starts from the base state on every shard (the live rows after the
batch equal the oracle's, for every K), the model is sharded (both shards hold keys), and each shard's node
gets its own CPU figure.
"""

from __future__ import annotations

from pathlib import Path

from vcmt_lab.bench.engine import bench_project
from vcmt_lab.bench.virtual_shards import measure, render

ROWS, BATCH = 4000, 3000


def test_virtual_shards_bench_on_the_cluster_resets_every_shard_and_times_each(cluster, tmp_path: Path) -> None:
    pids = [node.pid for node in cluster.nodes]
    with bench_project(tmp_path, "vcmt_bench_vs_test", cluster, cluster.name) as (engine, project):
        results = measure(engine, project, ROWS, BATCH, [1, 2], repeat=2, say=lambda _: None, pids=pids,
                          cluster=cluster.name)  # fmt: skip
        db = engine.database
        # The oracle: the base rows (version 1) and the batch's events, each key's latest event decides.
        expected = engine.scalar(
            f"select count() from (select argMax(sign, _version) as s from (select id, _version, sign from {db}.vs_base "
            f"union all select id, _version, sign from {db}.vs_src) group by id) where s = 1"
        )
        per_shard = [
            int(
                engine.scalar(
                    f"select sum(sign) from cluster(`{cluster.name}`, '{db}', `vs_k2_local`) where _shard_num = {n}"
                )
            )  # fmt: skip
            for n in (1, 2)
        ]
    assert [s.state[0] for s in results] == [int(expected)] * 2, (results, expected)
    assert len({s.state for s in results}) == 1
    assert sum(per_shard) == int(expected) and min(per_shard) > 0, per_shard
    for s in results:
        assert len(s.load_s) == len(s.shard_cpu_s) == 2 and all(len(cpu) == 2 for cpu in s.shard_cpu_s), s
        assert all(c > 0 for cpu in s.shard_cpu_s for c in cpu), s.shard_cpu_s
    table = render(results, ROWS, BATCH, (0.0, 0.0, 0.0))
    assert "| CPU s per shard |" in table and "identical live rows for every K" in table, table
