"""`make bench-staging`'s read counters on a real Spark session: files and `_batch_id` folders read by the
queries of one run, from Spark SQL's own scan metrics, and nothing of the queries before it."""

from __future__ import annotations

from pathlib import Path

from vcmt_lab.bench.staging import _last_query, _spark_counters, _sql_reads
from vcmt_staging.topic import read_lines


def test_sql_reads_counts_the_files_and_folders_of_the_queries_after_a_mark(spark, tmp_path: Path) -> None:
    topic = tmp_path / "topic"
    for batch, files in ((0, 1), (1, 2), (2, 3)):
        (topic / f"_batch_id={batch}").mkdir(parents=True)
        for i in range(files):
            (topic / f"_batch_id={batch}" / f"part{i}.json").write_text(f'{{"n": {i}}}\n')
    assert len(read_lines(spark, str(topic)).collect()) == 6  # before the mark: not counted

    _spark_counters()  # waits for Spark's listeners, as after each staging run
    mark = _last_query()
    assert mark >= 0
    assert len(read_lines(spark, str(topic), exclude_batches=[0, 2]).collect()) == 2
    _spark_counters()
    assert _sql_reads(mark) == (2, 1), "batch 1's two files, in its one folder; batches 0 and 2 pruned"
    assert _sql_reads(_last_query()) == (0, 0)
