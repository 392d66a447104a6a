"""Load change events from a file, or from Python rows, into a vcmt_upsert model.

There is one loader: `vcmt.load_stage`, the engine-side loader `dbt run` uses.
This module only hands it a SELECT over the file, so the model's own config
(key, version, sign, merge policies, delete mode) decides, the engine reads the
file as a stream, casts every value to the target's types (one key, one
spelling) and checks every value before the first INSERT: a bad row fails the
whole load with its row number and column, and nothing is half-applied.

    vcmt-load-stage events.parquet --model fct_orders --project-dir my_dbt_project

The file is read by the engine, so this works on the embedded target
(`type: chdb`), where the engine runs in this process. A ClickHouse server
reads its own file system: on a server target the command refuses, and
`dbt run-operation vcmt.load_stage` with a SELECT over `s3(...)`, `url(...)`
or `file(...)` (a path on the server) is the way there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from vcmt_cli.dbt_invoke import invoke

FORMATS = {
    ".parquet": "Parquet",
    ".csv": "CSVWithNames",
    ".jsonl": "JSONEachRow",
    ".ndjson": "JSONEachRow",
    ".json": "JSONEachRow",
}
# Text formats reach the loader's cast as written: the engine must not guess
# types first (a CSV key `01234` read as the number 1234, `1.10` as 1.1, a JSON
# string that looks like a date turned into one).
NO_GUESSING = {
    "CSVWithNames": "input_format_csv_use_best_effort_in_schema_inference = 0",
    "JSONEachRow": "input_format_try_infer_dates = 0, input_format_try_infer_datetimes = 0, "
    "input_format_json_try_infer_numbers_from_strings = 0",
}
GLOB = set("*?{}[]")
ROWS_PER_GROUP = 100_000


class LoadError(Exception):
    """The load was refused or failed; the message says why (row and column for a bad value)."""


def file_select(path: Path) -> str:
    """The SELECT that reads `path` inside the engine."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise LoadError(f"vcmt-load-stage: unsupported file type '{path.suffix}'; use one of {sorted(FORMATS)}")
    resolved = str(path.resolve())
    if GLOB & set(resolved):
        # file() would expand them and read other files' events too.
        raise LoadError(f"vcmt-load-stage: the path {resolved} contains one of {''.join(sorted(GLOB))}; rename it")
    literal = resolved.replace("\\", "\\\\").replace("'", "\\'")
    settings = f" settings {NO_GUESSING[fmt]}" if fmt in NO_GUESSING else ""
    return f"select * from file('{literal}', '{fmt}'){settings}"


def load_select(
    sql: str,
    model: str,
    project_dir: Path,
    profiles_dir: Path | None = None,
    target: str | None = None,
    extra_args: Sequence[str] = (),
    local_file: Path | None = None,
    move_watermark: bool = False,
) -> str:
    """Run `vcmt.load_stage` for `sql`; returns its one-line report. `local_file`: the file of this machine
    that `sql` reads, which a server target cannot reach (the macro refuses it there). The model's
    `watermark` stays where it is unless `move_watermark` (docs/design.md#watermark)."""
    operation = {
        "model": model,
        "sql": sql,
        **({"local_file": str(local_file)} if local_file else {}),
        **({"move_watermark": True} if move_watermark else {}),
    }
    args = [
        "run-operation",
        "vcmt.load_stage",
        "--args",
        json.dumps(operation),
        "--project-dir",
        str(project_dir),
        *extra_args,
    ]
    if profiles_dir:
        args += ["--profiles-dir", str(profiles_dir)]
    if target:
        args += ["--target", target]
    run = invoke(args)
    report = [line for line in run.log.splitlines() if line.startswith(f"vcmt.load_stage {model}:")]
    if not run.success or not report:
        raise LoadError(_failure(run.log))
    return report[-1]


def _failure(log: str) -> str:
    """The lines of a failed dbt log that say why: vcmt's own message, the chDB adapter's (a data directory in
    use), or the engine's."""
    why = []
    for line in (raw.strip() for raw in log.splitlines()):
        ours = line.startswith(("vcmt_upsert", "vcmt.load_stage", "vcmt-load-stage", "chdb:"))
        if (ours or "DB::Exception" in line) and line not in why:
            why.append(line)
    return "\n".join(why[-3:]) or log[-3000:]


def load_file(path: Path, model: str, project_dir: Path, **kwargs: Any) -> str:
    """Apply the events in `path` (.parquet, .csv with a header, or JSON lines) to `model`."""
    if not path.is_file():
        raise LoadError(f"vcmt-load-stage: no such file: {path}")
    return load_select(file_select(path), model, project_dir, local_file=path.resolve(), **kwargs)


def load_rows(rows: Iterable[Mapping[str, Any]], model: str, project_dir: Path, **kwargs: Any) -> str:
    """Apply Python rows (dicts of column -> value) to `model`, through a Parquet file.

    Rows may name different columns: a column missing from a row is NULL
    there (a NULL sign or version fails the load, naming the row), and a
    column that is NULL in every row is written as text NULLs.
    """
    rows = list(rows)
    if not rows:
        return f"vcmt.load_stage {model}: 0 events"
    with parquet_of(rows) as path:
        return load_file(path, model, project_dir, **kwargs)


@contextlib.contextmanager
def parquet_of(rows: Sequence[Mapping[str, Any]]) -> Iterator[Path]:
    """`rows` as a temporary Parquet file (removed afterwards), written in row groups of ROWS_PER_GROUP."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(dict.fromkeys(c for row in rows for c in row))
    table = pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows])
    for i, field in enumerate(table.schema):
        if pa.types.is_null(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(pa.string()))
    with tempfile.TemporaryDirectory(prefix="vcmt-load-") as tmp:
        path = Path(tmp) / "events.parquet"
        pq.write_table(table, path, row_group_size=ROWS_PER_GROUP)
        yield path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vcmt-load-stage", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="events as .parquet, .csv (with a header) or JSON lines")
    parser.add_argument("--model", required=True, help="the vcmt_upsert model, as named in the dbt project")
    parser.add_argument("--project-dir", type=Path, default=Path.cwd(), help="the dbt project (default: .)")
    parser.add_argument("--profiles-dir", type=Path, help="where profiles.yml is (default: as dbt finds it)")
    parser.add_argument("--target", help="the profile target (default: the profile's own)")
    parser.add_argument(
        "--move-watermark",
        action="store_true",
        help="let this load move the model's watermark (by default it stays: the next dbt run "
        "still reads every batch of the model's own source above it)",
    )
    args = parser.parse_args(argv)
    try:
        print(
            load_file(
                args.file,
                args.model,
                args.project_dir,
                profiles_dir=args.profiles_dir,
                target=args.target,
                move_watermark=args.move_watermark,
            )
        )
    except LoadError as ex:
        print(ex, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
