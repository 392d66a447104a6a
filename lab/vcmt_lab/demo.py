"""make demo: the CDC pipeline end to end, proving its own result.

    python -m vcmt_lab.demo [--events 20000] [--batches 6] [--seed 42] [--staging python|sql]
                              [--spark session|connect|thrift]

1. generate seeded Debezium events (with duplicates, late events, deletes,
   snapshots and malformed lines; with `--staging python`, the default, in the
   encodings real PostgreSQL and MySQL connectors send, with tombstones,
   truncates, primary-key changes, TOAST placeholders, heartbeats and
   transaction markers) and their oracle into a landing area;
2. for each batch: land it in the lake, stage it on Spark (the Python models
   `examples/cdc/models/staging/debezium` on the vcmt_spark target, or with `--staging sql`
   the SQL models on dbt-spark), apply it to the ClickHouse marts (chDB,
   vcmt_upsert);
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
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from vcmt_lab.paths import EXAMPLE_ROOT, REPO_ROOT


@dataclass(frozen=True)
class Staging:
    """One way to stage the lake: the generator's encoding, the Spark target and models, the marts they feed."""

    encoding: str
    target: str
    select: tuple[str, ...]
    models: dict[str, str]  # topic -> staging model
    marts: dict[str, str]  # topic -> mart


STAGINGS = {
    # Python models on stage_topic (docs/staging.md): one model per topic, every line in one table.
    "python": Staging(
        "debezium",
        "vcmt_spark",
        ("staging.debezium",),
        {"pg.public.orders": "stg_pg__orders", "mysql.shop.customers": "stg_mysql__customers"},
        {"pg.public.orders": "fct_orders", "mysql.shop.customers": "dim_customers"},
    ),
    # SQL models (docs/design.md#cdc-staging-contract): also run on a Spark Thrift server.
    # On a vcmt_spark target (Spark Connect) the Python models are enabled too: they are left out.
    "sql": Staging(
        "simple",
        "spark",
        ("staging.thrift",),
        {"orders": "stg_cdc__order_changes", "customers": "stg_cdc__customer_changes"},
        {"orders": "fct_orders", "customers": "dim_customers"},
    ),
}


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
    """Point the example project's profiles (chdb, spark) at the demo's own folders."""
    os.environ["VCMT_CHDB_PATH"] = str(work / "chdb")
    os.environ["VCMT_SPARK_WAREHOUSE"] = str(work / "spark" / "warehouse")
    os.environ["VCMT_SPARK_METASTORE"] = str(work / "spark" / "metastore_db")
    os.environ["VCMT_SPARK_DERBY_HOME"] = str(work / "spark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


class Pipeline:
    """Runs the example project (examples/cdc) in this process."""

    def __init__(self, work: Path, staging: str = "python", ch_target: str = "chdb") -> None:
        from vcmt_cli.dbt_invoke import invoke

        self._invoke = invoke
        self.work = work
        self.ch_target = ch_target
        self.vars = json.dumps({"vcmt_lake_root": str(work / "lake"), "vcmt_staging": staging})
        # The example installs the package from this repository (examples/cdc/packages.yml).
        deps = invoke(
            [
                "deps",
                "--project-dir",
                str(EXAMPLE_ROOT),
                "--profiles-dir",
                str(EXAMPLE_ROOT),
                "--log-path",
                str(work / "logs"),
            ]
        )
        if not deps.success:
            raise SystemExit(f"demo: dbt deps failed in {EXAMPLE_ROOT}:\n{deps.log[-3000:]}")

    def dbt(self, *args: str, target: str, expect_pass: bool = True) -> Any:
        # --no-write-json: dbt would write manifest.json before and after each run and run_results.json
        # after each model, about half a second per run that nothing here reads (docs/staging.md,
        # "Where staging time goes"); partial parsing keeps its own file.
        cli = [
            *args,
            "--target",
            target,
            "--vars",
            self.vars,
            "--project-dir",
            str(EXAMPLE_ROOT),
            "--profiles-dir",
            str(EXAMPLE_ROOT),
            "--target-path",
            str(self.work / "target" / target),
            "--log-path",
            str(self.work / "logs"),
            "--no-write-json",
        ]
        run = self._invoke(cli)
        if expect_pass and not run.success:
            raise SystemExit(f"demo: dbt {' '.join(args)} --target {target} failed:\n{run.log[-5000:]}")
        return run

    def object_names(self, model: str) -> dict[str, str]:
        """`model`'s objects, role -> table name, as vcmt.objects names them."""
        from vcmt_lab.dbt_project import OBJECT_NAMES_OPERATION, object_names

        return object_names(self.dbt(*OBJECT_NAMES_OPERATION, json.dumps({"model": model}), target=self.ch_target))


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


def _normalize(value: Any, timespec: str = "milliseconds") -> Any:
    """ClickHouse values in the oracle's JSON form (floats, ISO-8601 UTC timestamps with a Z, ISO dates)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.isoformat(timespec=timespec).replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
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


def _query(client: Any, sql: str, timespec: str = "milliseconds") -> list[dict[str, Any]]:
    result = client.query(sql)
    return [
        {c: _normalize(v, timespec) for c, v in zip(result.column_names, row, strict=True)}
        for row in result.result_rows
    ]


def run(args: argparse.Namespace) -> int:
    staging = STAGINGS[args.staging]
    if args.spark == "thrift" and args.staging == "python":
        raise SystemExit(
            "demo: a Spark Thrift server runs SQL models only, not the Python staging models; "
            "use --staging sql with --spark thrift (or --spark connect for the Python models)"
        )
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    _configure_env(work)
    if args.clickhouse == "chdb":
        return _run(args, work, staging, None)
    from vcmt_lab.clickhouse_server import served_node

    # The marts on a ClickHouse node served on 127.0.0.1 (the example's `clickhouse` target, over HTTP). A server
    # reads the lake with file() only under its user_files_path: the node's is the lake (docs/staging.md, "A lake
    # on a ClickHouse server").
    with served_node(work / "served_node", user_files=work / "lake") as node:
        os.environ.update({"CLICKHOUSE_HOST": "127.0.0.1", "CLICKHOUSE_PORT": str(node.http_port)})
        version = node.client().server_version
        _say(
            f"==> ClickHouse: a node served on 127.0.0.1:{node.http_port} (HTTP; ClickHouse {version}'s own server "
            "code in chDB's local-server mode)"
        )
        return _run(args, work, staging, node)


def _run(args: argparse.Namespace, work: Path, staging: Staging, node: Any) -> int:
    from vcmt_lab import demo_spark
    from vcmt_lab.cdc import generate

    landing, lake = work / "landing", work / "lake"
    ch_target = "clickhouse" if node else "chdb"
    spark = demo_spark.setup(args, work)
    timer = Timer()
    started = time.time()

    _say(
        f"==> [1/4] generating {args.events:,} change events in {args.batches} batches (seed {args.seed}, "
        f"{staging.encoding} encoding)"
    )
    t = time.time()
    manifest = generate(
        landing,
        events=args.events,
        batches=args.batches,
        seed=args.seed,
        malformed_share=args.malformed_share,
        encoding=staging.encoding,
    )
    timer.add("generate", t)
    malformed = manifest.malformed
    # Lines, not events: redeliveries, tombstones and the other kinds of line come on top of the changes.
    _say(
        f"    written as {manifest.events:,} lines: {manifest.valid_events:,} change lines (duplicates and late ones "
        f"included), {sum(malformed.values()):,} malformed "
        f"({', '.join(f'{k} {v}' for k, v in sorted(malformed.items()))})"
    )

    pipeline = Pipeline(work, args.staging, ch_target)
    _say(f"==> [2/4] running {args.batches} batches: Spark staging ({args.staging} models), then ClickHouse marts")
    for batch in range(args.batches):
        landed = _land_batch(landing, lake, batch)
        t = time.time()
        pipeline.dbt("run", "--select", *staging.select, target=spark.target_for(staging.target))
        spark_s = timer.add("spark staging", t)
        t = time.time()
        pipeline.dbt("run", "--select", "marts", target=ch_target)
        ch_s = timer.add("clickhouse marts", t)
        _say(
            f"    batch {batch + 1}/{args.batches}: {landed:,} lines landed; staged on Spark in {spark_s:.1f}s; "
            f"applied to ClickHouse in {ch_s:.1f}s"
        )

    _say("==> [3/4] dbt test (staging on Spark, marts on ClickHouse)")
    t = time.time()
    spark_tests = pipeline.dbt(
        "test", "--select", *staging.select, target=spark.target_for(staging.target), expect_pass=False
    )
    ch_tests = pipeline.dbt("test", "--select", "marts", target=ch_target, expect_pass=False)
    timer.add("dbt test", t)
    passed_s, failed_s = _test_results(spark_tests)
    passed_c, failed_c = _test_results(ch_tests)

    _say("==> [4/4] comparing with the oracle")
    loads = {mart: pipeline.object_names(mart)["loads"] for mart in staging.marts.values()}
    client = node.client("vcmt") if node else None
    report, ok = _report(
        work, lake, landing, manifest, timer, passed_s + passed_c, failed_s + failed_c, staging, loads, client
    )
    _say(report)
    _say(spark.describe())
    total = time.time() - started
    verdict = "OK" if ok else "FAILED"
    _say(
        f"make demo: {verdict} in {total:.0f}s — {args.events:,} change events ({manifest.events:,} lines), "
        f"{args.batches} batches; "
        f"marts {'equal' if ok else 'differ from'} the oracle; "
        f"{passed_s + passed_c} tests passed, {len(failed_s) + len(failed_c)} failed"
    )
    return 0 if ok else 1


def _report(
    work: Path,
    lake: Path,
    landing: Path,
    manifest: Any,
    timer: Timer,
    tests_passed: int,
    tests_failed: list[str],
    staging: Staging,
    loads: dict[str, str],
    client: Any = None,
) -> tuple[str, bool]:
    import clickhouse_connect

    if client is None:
        client = clickhouse_connect.get_client(interface="chdb", path=str(work / "chdb"), database="vcmt")
    staged_root = lake / "staged"
    lines = ["", "## Report", ""]
    ok = not tests_failed

    def parquet(dataset: str) -> str:
        return f"file('{staged_root / dataset}/**/*.parquet', 'Parquet')"

    counts, ok_counts = (_kinds_report if staging.encoding == "debezium" else _quarantine_report)(
        client, parquet, manifest, staging
    )
    lines += counts
    ok = ok and ok_counts
    MARTS = staging.marts  # noqa: N806
    KEYS = {topic: tuple(manifest.topics[topic].key) for topic in MARTS}  # noqa: N806
    timespec = "microseconds" if staging.encoding == "debezium" else "milliseconds"

    # The mart loads' numbers as the README's "What each run reports" defines them: events = ignored below a
    # truncate + superseded + sent; sent = inserted + updated + deleted + skipped.
    lines += [
        "",
        "| mart | events | upserts | deletes | ignored below a truncate | superseded | sent | inserted "
        "| updated | deleted | skipped | truncates | rows truncated | rows stored (cancel pairs until merged) "
        "| live keys |",
        "|---|" + "---:|" * 14,
    ]
    for mart in MARTS.values():
        s = client.query(
            f"select sum(events), sum(upserts), sum(deletes), sum(ignored_below_truncate), sum(superseded), sum(fed), "
            f"sum(inserted), sum(updated), sum(deleted), sum(skipped), sum(truncates), sum(truncated_rows) "
            f"from {loads[mart]}"
        ).result_rows[0]
        rows, live = client.query(f"select count(), sum(sign) from {mart}").result_rows[0]
        lines.append(f"| {mart} | " + " | ".join(f"{int(v):,}" for v in (*s, rows, live)) + " |")

    lines += ["", f"dbt tests: {tests_passed} passed, {len(tests_failed)} failed"]
    lines += [f"  - {f}" for f in tests_failed]

    lines += [
        "",
        "| target vs oracle (FINAL) | expected | actual | missing | extra | different |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    oracle_rows: dict[str, list[dict[str, Any]]] = {}
    for topic, mart in MARTS.items():
        expected = [json.loads(x) for x in (landing / "oracle" / f"{topic}.jsonl").read_text().splitlines()]
        oracle_rows[topic] = expected
        columns = list(expected[0].keys()) if expected else list(KEYS[topic])
        actual = _query(client, f"select {', '.join(columns)} from {mart} final where sign = 1", timespec)
        diff = _compare(expected, actual, KEYS[topic])
        ok = ok and not any(diff.values())
        lines.append(
            f"| {mart} | {len(expected):,} | {len(actual):,} | {len(diff['missing'])} | "
            f"{len(diff['extra'])} | {len(diff['different'])} |"
        )
        for kind in ("missing", "extra", "different"):
            for item in diff[kind][:3]:
                lines.append(f"  - {kind}: {item}")

    expected_agg: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0])
    orders_topic = next(t for t, m in MARTS.items() if m == "fct_orders")
    for row in oracle_rows[orders_topic]:
        cell = expected_agg[(row["tenant_id"], row["status"])]
        cell[0] += 1
        cell[1] += row["amount"]
    actual_agg = {
        (t, s): [n, float("nan") if a is None else float(a)]
        for t, s, n, a in client.query(
            "select tenant_id, status, sum(orders), sum(amount) from agg_orders_by_tenant_status "
            "group by tenant_id, status having sum(orders) != 0 or sum(amount) != 0"
        ).result_rows
    }
    agg_diff = [
        k
        for k in set(expected_agg) | set(actual_agg)
        if k not in expected_agg
        or k not in actual_agg
        or expected_agg[k][0] != actual_agg[k][0]
        or abs(expected_agg[k][1] - actual_agg[k][1]) > 0.005
    ]
    ok = ok and not agg_diff
    lines += [
        "",
        f"downstream aggregate agg_orders_by_tenant_status vs oracle: {len(expected_agg)} groups, "
        f"{len(agg_diff)} differ" + (f" (e.g. {sorted(agg_diff, key=repr)[:3]})" if agg_diff else ""),
    ]

    lines += ["", "| stage | seconds | lines/s |", "|---|---:|---:|"]
    for stage, seconds in timer.seconds.items():
        lines.append(f"| {stage} | {seconds:.1f} | {manifest.events / seconds if seconds else 0:,.0f} |")
    client.close()
    return "\n".join(lines), ok


def _quarantine_report(client: Any, parquet: Any, manifest: Any, staging: Staging) -> tuple[list[str], bool]:
    """SQL staging: rows per changes model, the quarantine by reason, against what was generated."""
    staged = {
        t: client.query(f"select count() from {parquet(model)}").result_rows[0][0]
        for t, model in staging.models.items()
    }
    quarantine = dict(
        client.query(
            f"select reason, count() from {parquet('stg_cdc__quarantine')} group by reason order by reason"
        ).result_rows
    )
    generated_bad = manifest.malformed
    lines = ["| | count |", "|---|---:|", f"| lines generated | {manifest.events:,} |"]
    for topic in staging.models:
        lines.append(f"| staged `{topic}` | {staged[topic]:,} |")
    lines.append(f"| quarantined | {sum(quarantine.values()):,} |")
    for reason in sorted(set(quarantine) | set(generated_bad)):
        generated = generated_bad.get(reason, 0)
        lines.append(f"| quarantined: {reason} (generated {generated}) | {quarantine.get(reason, 0):,} |")
    balance = manifest.events == sum(staged.values()) + sum(quarantine.values())
    quarantine_ok = quarantine == {k: v for k, v in generated_bad.items() if v}
    lines.append(f"| count in = staged + quarantined | {'yes' if balance else 'NO'} |")
    lines.append(f"| quarantine = malformed generated | {'yes' if quarantine_ok else 'NO'} |")
    return lines, balance and quarantine_ok


def _kinds_report(client: Any, parquet: Any, manifest: Any, staging: Staging) -> tuple[list[str], bool]:
    """Python staging: every landed line is one staged row; each kind staged = each kind generated."""
    lines = ["| topic | what | generated | staged | |", "|---|---|---:|---:|:-:|"]
    ok = True
    for topic, model in staging.models.items():
        t = manifest.topics[topic]
        got = {
            (k, r or ""): n
            for k, r, n in client.query(
                f"select _kind, _reason, count() from {parquet(model)} group by _kind, _reason"
            ).result_rows
        }
        deletes, toast = client.query(
            f"select countIf(_kind = 'change' and sign = -1), countIf(notEmpty(_unavailable)) from {parquet(model)}"
        ).result_rows[0]
        rows = [("lines", t.events, sum(got.values()))]
        rows += [(kind, n, got.get((kind, ""), 0)) for kind, n in t.kinds.items() if kind != "malformed"]
        rows += [("  of which deletes", t.deletes, deletes), ("  of which TOAST placeholders", t.toast, toast)]
        rows += [(f"malformed: {r}", n, got.get(("malformed", r), 0)) for r, n in t.malformed.items()]
        other = sum(n for (k, _), n in got.items() if k not in t.kinds)
        rows.append(("other kinds (message, schema_change)", 0, other))
        for what, generated, staged in rows:
            same = generated == staged
            ok = ok and same
            lines.append(f"| {topic} | {what} | {generated:,} | {staged:,} | {'✔' if same else 'DIFFERENT'} |")
        if t.pk_changes:
            lines.append(f"| {topic} | primary-key changes (delete + tombstone + create) | {t.pk_changes:,} | | |")
    lines.append(f"| | staged kinds = generated kinds | | | {'yes' if ok else 'NO'} |")
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--malformed-share", type=float, default=0.02)
    parser.add_argument("--work", type=Path, default=REPO_ROOT / ".local" / "demo")
    from vcmt_lab import demo_spark

    demo_spark.add_arguments(parser)
    parser.add_argument(
        "--clickhouse",
        choices=["chdb", "server"],
        default="chdb",
        help="chdb (default): the marts on the embedded engine; server: on a ClickHouse node served "
        "on 127.0.0.1 for the demo's lifetime, over HTTP (type: clickhouse)",
    )
    parser.add_argument(
        "--staging",
        choices=sorted(STAGINGS),
        default="python",
        help="python (default): real Debezium encodings, Python staging models on the vcmt_spark "
        "target; sql: the simple encoding through the SQL staging models (dbt-spark)",
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
