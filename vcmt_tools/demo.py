"""make demo: the CDC pipeline end to end, proving its own result.

    python -m vcmt_tools.demo [--events 20000] [--batches 6] [--seed 42] [--spark session|connect|thrift]

1. generate seeded Debezium-style events (with duplicates, late events,
   deletes, snapshots and malformed lines) and their oracle into a landing area;
2. for each batch: land it in the lake, stage it on Spark (dbt-spark), apply it
   to the ClickHouse marts (chDB, vcmt_upsert);
3. run `dbt test` on both sides;
4. report counts, invariants, the marts against the oracle, the downstream
   aggregate against the oracle, and time per stage. Exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
MARTS = {"orders": "fct_orders", "customers": "dim_customers"}
KEYS = {"orders": ("tenant_id", "order_id"), "customers": ("customer_id",)}


@dataclass
class Timer:
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, stage: str, started: float) -> float:
        elapsed = time.time() - started
        self.seconds[stage] += elapsed
        return elapsed


def _say(text: str) -> None:
    print(text, flush=True)


def _configure_env(work: Path) -> None:
    """Point the repository's profiles (chdb, spark) at the demo's own folders."""
    os.environ["VCMT_CHDB_PATH"] = str(work / "chdb")
    os.environ["VCMT_SPARK_WAREHOUSE"] = str(work / "spark" / "warehouse")
    os.environ["VCMT_SPARK_METASTORE"] = str(work / "spark" / "metastore_db")
    os.environ["VCMT_SPARK_DERBY_HOME"] = str(work / "spark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["VCMT_REFERENCE_MODELS"] = "1"  # the repository's reference pipeline is opt-in


class Pipeline:
    """Runs the repository's own dbt project (reference models enabled) in this process."""

    def __init__(self, work: Path) -> None:
        from vcmt_tools.dbt_project import invoke

        self._invoke = invoke
        self.work = work
        self.vars = json.dumps({"vcmt_lake_root": str(work / "lake")})

    def dbt(self, *args: str, target: str, expect_pass: bool = True) -> Any:
        cli = [*args, "--target", target, "--vars", self.vars, "--project-dir", str(REPO_ROOT),
               "--profiles-dir", str(REPO_ROOT), "--target-path", str(self.work / "target" / target),
               "--log-path", str(self.work / "logs")]
        run = self._invoke(cli)
        if expect_pass and not run.success:
            raise SystemExit(f"demo: dbt {' '.join(args)} --target {target} failed:\n{run.log[-5000:]}")
        return run


def _land_batch(landing: Path, lake: Path, batch: int) -> int:
    """Move one batch of raw files from the landing area into the lake, as a sink would deliver it."""
    lines = 0
    for topic_dir in sorted((landing / "raw").iterdir()):
        src = topic_dir / f"_batch_id={batch}"
        if not src.exists():
            continue
        dst = lake / "raw" / topic_dir.name / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst)
        lines += sum(len(p.read_text().splitlines()) for p in dst.glob("*.json"))
    return lines


def _test_results(run: Any) -> tuple[int, list[str]]:
    passed, failed = 0, []
    for result in run.result.result or []:
        status = str(result.status).lower()
        if status in ("pass", "success"):
            passed += 1
        else:
            failed.append(f"{result.node.name}: {status} {result.message or ''}".strip())
    return passed, failed


def _normalize(value: Any) -> Any:
    """ClickHouse values in the oracle's JSON form (floats, ISO-8601 UTC timestamps with a Z)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return value


def _compare(expected: list[dict[str, Any]], actual: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    exp = {tuple(r[k] for k in keys): r for r in expected}
    act = {tuple(r[k] for k in keys): r for r in actual}
    different = []
    for key in exp.keys() & act.keys():
        e, a = exp[key], act[key]
        for column, value in e.items():
            got = a.get(column)
            if isinstance(value, float) or isinstance(got, float):
                same = value is not None and got is not None and abs(float(value) - float(got)) < 0.005
                same = same or (value is None and got is None)
            else:
                same = value == got
            if not same:
                different.append((key, column, value, got))
                break
    return {
        "missing": sorted(exp.keys() - act.keys(), key=repr),
        "extra": sorted(act.keys() - exp.keys(), key=repr),
        "different": sorted(different, key=repr),
    }


def _query(client: Any, sql: str) -> list[dict[str, Any]]:
    result = client.query(sql)
    return [{c: _normalize(v) for c, v in zip(result.column_names, row, strict=True)} for row in result.result_rows]


def run(args: argparse.Namespace) -> int:
    from vcmt_tools import demo_spark
    from vcmt_tools.cdc import generate

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    landing, lake = work / "landing", work / "lake"
    _configure_env(work)
    spark = demo_spark.setup(args, work)
    timer = Timer()
    started = time.time()

    _say(f"==> [1/4] generating {args.events:,} events in {args.batches} batches (seed {args.seed})")
    t = time.time()
    manifest = generate(landing, events=args.events, batches=args.batches, seed=args.seed,
                        malformed_share=args.malformed_share)
    timer.add("generate", t)
    malformed = manifest.malformed
    _say(f"    {manifest.events:,} lines: {manifest.valid_events:,} valid, {sum(malformed.values()):,} malformed "
         f"({', '.join(f'{k} {v}' for k, v in sorted(malformed.items()))})")

    pipeline = Pipeline(work)
    _say(f"==> [2/4] running {args.batches} batches: Spark staging, then ClickHouse marts")
    for batch in range(args.batches):
        landed = _land_batch(landing, lake, batch)
        t = time.time()
        pipeline.dbt("run", "--select", "staging", target=spark.target)
        spark_s = timer.add("spark staging", t)
        t = time.time()
        pipeline.dbt("run", "--select", "marts", target="chdb")
        ch_s = timer.add("clickhouse marts", t)
        _say(f"    batch {batch + 1}/{args.batches}: {landed:,} lines landed; staged on Spark in {spark_s:.1f}s; "
             f"applied to ClickHouse in {ch_s:.1f}s")

    _say("==> [3/4] dbt test (staging on Spark, marts on ClickHouse)")
    t = time.time()
    spark_tests = pipeline.dbt("test", "--select", "staging", target=spark.target, expect_pass=False)
    ch_tests = pipeline.dbt("test", "--select", "marts", target="chdb", expect_pass=False)
    timer.add("dbt test", t)
    passed_s, failed_s = _test_results(spark_tests)
    passed_c, failed_c = _test_results(ch_tests)

    _say("==> [4/4] comparing with the oracle")
    report, ok = _report(work, lake, landing, manifest, timer, passed_s + passed_c, failed_s + failed_c)
    _say(report)
    _say(spark.describe())
    total = time.time() - started
    verdict = "OK" if ok else "FAILED"
    _say(f"make demo: {verdict} in {total:.0f}s — {manifest.events:,} events, {args.batches} batches; "
         f"marts {'equal' if ok else 'differ from'} the oracle; "
         f"{passed_s + passed_c} tests passed, {len(failed_s) + len(failed_c)} failed")
    return 0 if ok else 1


def _report(work: Path, lake: Path, landing: Path, manifest: Any, timer: Timer, tests_passed: int,
            tests_failed: list[str]) -> tuple[str, bool]:
    import clickhouse_connect

    client = clickhouse_connect.get_client(interface="chdb", path=str(work / "chdb"), database="vcmt")
    staged_root = lake / "staged"
    lines = ["", "## Report", ""]
    ok = not tests_failed

    def parquet(dataset: str) -> str:
        return f"file('{staged_root / dataset}/**/*.parquet', 'Parquet')"

    staged = {t: client.query(f"select count() from {parquet(f'stg_{t}_changes')}").result_rows[0][0]
              for t in MARTS}
    quarantine = dict(client.query(
        f"select reason, count() from {parquet('stg_cdc_quarantine')} group by reason order by reason"
    ).result_rows)
    generated_bad = manifest.malformed
    lines.append("| | count |")
    lines.append("|---|---:|")
    lines.append(f"| events generated | {manifest.events:,} |")
    for topic in MARTS:
        lines.append(f"| staged `{topic}` | {staged[topic]:,} |")
    lines.append(f"| quarantined | {sum(quarantine.values()):,} |")
    for reason in sorted(set(quarantine) | set(generated_bad)):
        generated = generated_bad.get(reason, 0)
        lines.append(f"| quarantined: {reason} (generated {generated}) | {quarantine.get(reason, 0):,} |")
    balance = manifest.events == sum(staged.values()) + sum(quarantine.values())
    quarantine_ok = quarantine == {k: v for k, v in generated_bad.items() if v}
    ok = ok and balance and quarantine_ok
    lines.append(f"| count in = staged + quarantined | {'yes' if balance else 'NO'} |")
    lines.append(f"| quarantine = malformed generated | {'yes' if quarantine_ok else 'NO'} |")

    lines += ["", "| mart | events | upserts | deletes | inserted | updated | deleted | skipped | rows | live keys |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mart in MARTS.values():
        s = client.query(
            f"select sum(events), sum(upserts), sum(deletes), sum(inserted), sum(updated), sum(deleted), "
            f"sum(skipped) from {mart}__loads"
        ).result_rows[0]
        rows, live = client.query(f"select count(), sum(sign) from {mart}").result_rows[0]
        lines.append(f"| {mart} | " + " | ".join(f"{int(v):,}" for v in (*s, rows, live)) + " |")

    lines += ["", f"dbt tests: {tests_passed} passed, {len(tests_failed)} failed"]
    lines += [f"  - {f}" for f in tests_failed]

    lines += ["", "| target vs oracle (FINAL) | expected | actual | missing | extra | different |",
              "|---|---:|---:|---:|---:|---:|"]
    oracle_rows: dict[str, list[dict[str, Any]]] = {}
    for topic, mart in MARTS.items():
        expected = [json.loads(x) for x in (landing / "oracle" / f"{topic}.jsonl").read_text().splitlines()]
        oracle_rows[topic] = expected
        columns = list(expected[0].keys()) if expected else list(KEYS[topic])
        actual = _query(client, f"select {', '.join(columns)} from {mart} final where sign = 1")
        diff = _compare(expected, actual, KEYS[topic])
        ok = ok and not any(diff.values())
        lines.append(f"| {mart} | {len(expected):,} | {len(actual):,} | {len(diff['missing'])} | "
                     f"{len(diff['extra'])} | {len(diff['different'])} |")
        for kind in ("missing", "extra", "different"):
            for item in diff[kind][:3]:
                lines.append(f"  - {kind}: {item}")

    expected_agg: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0])
    for row in oracle_rows["orders"]:
        cell = expected_agg[(row["tenant_id"], row["status"])]
        cell[0] += 1
        cell[1] += row["amount"]
    actual_agg = {(t, s): [n, float(a)] for t, s, n, a in client.query(
        "select tenant_id, status, sum(orders), sum(amount) from agg_orders_by_tenant_status "
        "group by tenant_id, status having sum(orders) != 0 or sum(amount) != 0"
    ).result_rows}
    agg_diff = [k for k in set(expected_agg) | set(actual_agg)
                if k not in expected_agg or k not in actual_agg
                or expected_agg[k][0] != actual_agg[k][0] or abs(expected_agg[k][1] - actual_agg[k][1]) > 0.005]
    ok = ok and not agg_diff
    lines += ["", f"downstream aggregate agg_orders_by_tenant_status vs oracle: {len(expected_agg)} groups, "
              f"{len(agg_diff)} differ" + (f" (e.g. {sorted(agg_diff, key=repr)[:3]})" if agg_diff else "")]

    lines += ["", "| stage | seconds | events/s |", "|---|---:|---:|"]
    for stage, seconds in timer.seconds.items():
        lines.append(f"| {stage} | {seconds:.1f} | {manifest.events / seconds if seconds else 0:,.0f} |")
    client.close()
    return "\n".join(lines), ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--malformed-share", type=float, default=0.02)
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".local" / "demo")
    from vcmt_tools import demo_spark

    demo_spark.add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
