"""The repository's own rules, checked on its files.

- the three shelves: the package (macros/, dbt/, vcmt_staging/, vcmt_cli/) imports nothing from the lab, holds no
  Spark-only macro, and its wheel ships nothing else;
- public macros are dispatched and documented; no macro line is longer than 120 characters;
- README "Layout" matches the tree; every relative link of the docs lands on a file (and heading);
- a model's config options are one declaration (macros/vcmt/model/options.sql), which the README's
  configuration table and its list of options that need --full-refresh repeat;
- every system.* read of the package's macros lives in macros/vcmt/engine/;
- the staging contract has one list of kinds and reasons, which the example project's vars repeat;
- one version number: pyproject.toml's, which every copy repeats and CHANGELOG.md's newest release names.
- every command the Makefile runs as a module answers `--help`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from jinja2 import Environment

from vcmt_staging import contract

ROOT = Path(__file__).resolve().parents[1]
MACRO = re.compile(r"\{%-?\s*macro\s+([A-Za-z_][A-Za-z0-9_]*)\s*\((.*?)\)\s*-?%\}(.*?)\{%-?\s*endmacro", re.S)
TEST = re.compile(r"\{%-?\s*test\s+([A-Za-z_][A-Za-z0-9_]*)\s*\((.*?)\)\s*-?%\}", re.S)
# vcmt_tools: the 0.3 names, kept as aliases until 0.5 (vcmt_tools/__init__.py).
PRODUCT_PYTHON = ("dbt", "vcmt_staging", "vcmt_cli", "vcmt_tools")
# Markdown that a user or a maintainer reads: every relative link in it must resolve.
DOCS = (
    "README.md",
    "CHANGELOG.md",
    "docs",
    "examples/cdc/README.md",
    "lab/README.md",
    "lab/bench/README.md",
    "lab/capture/README.md",
    "lab/bench/results/staging-history.md",
)


def _macros() -> dict[str, str]:
    found = {}
    for path in (ROOT / "macros").rglob("*.sql"):
        for name, _args, body in MACRO.findall(path.read_text()):
            found[name] = body
    return found


def _documented() -> set[str]:
    names = set()
    for path in (ROOT / "macros").rglob("*.yml"):
        names |= {m["name"] for m in (yaml.safe_load(path.read_text()) or {}).get("macros", [])}
    return names


def test_public_macros_are_dispatched_and_documented() -> None:
    macros = _macros()
    public = {n for n in macros if not n.startswith(("_", "default__", "test_"))}
    assert len(public) >= 8, f"the scan found too few macros: {sorted(public)}"
    undocumented = public - _documented()
    assert not undocumented, (
        f"public macros missing from a macros yml (document them or prefix _): {sorted(undocumented)}"
    )
    not_dispatched = sorted(n for n in public if f"adapter.dispatch('{n}', 'vcmt')" not in macros[n])
    assert not not_dispatched, f"public macros that are not dispatched: {not_dispatched}"
    stale = {n for n in _documented() - set(macros) if f"default__{n}" not in macros}
    assert not stale, f"macros yml documents macros that do not exist: {sorted(stale)}"


@pytest.mark.parametrize("macros", ["macros", "examples/cdc/macros", "integration_tests/macros"])
def test_documented_macro_arguments_pass_dbts_own_check(macros: str) -> None:
    """What dbt checks of a macros yml on every full parse (dbt-core's `_check_patch_arguments`, on by default
    from 1.12): each documented argument is the definition's, in its order, and its `type` is one dbt knows
    (`bool`, not `boolean`; `list[string]`, not `list`). A failure is a warning on every user's parse."""
    from dbt.parser.schemas import is_valid_type

    signatures = {}
    for path in (ROOT / macros).rglob("*.sql"):
        text = path.read_text()
        # A generic test `{% test t(...) %}` is the macro `test_t` to dbt.
        defined = [(n, a) for n, a, _ in MACRO.findall(text)] + [(f"test_{n}", a) for n, a in TEST.findall(text)]
        for name, args in defined:
            signatures[name] = [a.split("=", 1)[0].strip() for a in args.split(",") if a.strip()]
    wrong = []
    for path in (ROOT / macros).rglob("*.yml"):
        for macro in (yaml.safe_load(path.read_text()) or {}).get("macros", []):
            documented = macro.get("arguments") or []
            if not documented:
                continue
            names = [a["name"] for a in documented]
            if names != signatures[macro["name"]]:
                wrong.append(f"{macro['name']}: arguments {names}, defined {signatures[macro['name']]}")
            wrong += [
                f"{macro['name']}: argument {a['name']} has type {a['type']!r}, which dbt does not know"
                for a in documented
                if str(a.get("type") or "").strip() and not is_valid_type(a["type"])
            ]
    assert not wrong, "macros yml arguments dbt warns about on parse: " + "; ".join(wrong)


def test_the_package_imports_nothing_from_the_lab() -> None:
    sources = [p for top in PRODUCT_PYTHON for p in (ROOT / top).rglob("*.py")]
    assert len(sources) >= 15, f"the scan found too few sources: {sources}"
    importing = [
        str(p.relative_to(ROOT))
        for p in sources
        if re.search(r"^\s*(from|import)\s+(vcmt_lab|tests)\b", p.read_text(), re.M)
    ]
    assert not importing, (
        f"the package imports the lab (the lab may import the package, never the reverse): {importing}"
    )


# What only Spark runs: dbt-spark's strategies and config, Spark SQL functions, the SQL staging's macros.
SPARK_ONLY = re.compile(
    r"(?i)\b(try_variant_get|variant_get|parse_json|insert_overwrite|file_format|location_root|"
    r"spark\.sql|cdc_\w+)\b"
)


def test_the_package_holds_only_clickhouse_macros() -> None:
    """A project that installs the package gets ClickHouse macros only: the Spark staging macros live
    in the example project."""
    files = sorted((ROOT / "macros").rglob("*.sql"))
    assert len(files) >= 20, files
    spark = {
        str(p.relative_to(ROOT)): sorted(set(SPARK_ONLY.findall(p.read_text())))
        for p in files
        if SPARK_ONLY.search(p.read_text())
    }
    assert not spark, f"Spark-only SQL in the package's macros (it belongs in examples/cdc/macros): {spark}"
    project = yaml.safe_load((ROOT / "dbt_project.yml").read_text())
    assert project["macro-paths"] == ["macros"] and project["model-paths"] == [], project


# The longest line a macro file may have: a macro reads in a side-by-side diff. Jinja allows a line break anywhere
# inside a tag, and a long message splits into literals joined with `~`.
MACRO_LINE = 120


def test_macro_lines_fit_the_line_length() -> None:
    files = sorted((ROOT / "macros").rglob("*.sql"))
    assert len(files) >= 20, files
    long = [
        f"{p.relative_to(ROOT)}:{n} ({len(line)} characters)"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if len(line) > MACRO_LINE
    ]
    assert not long, f"macro lines longer than {MACRO_LINE} characters (break them inside a tag):\n" + "\n".join(long)


def test_macro_string_literals_hold_only_valid_escapes() -> None:
    """Jinja reads a string literal's backslashes as Python's `unicode-escape` does: an unknown escape such as
    `\\(` in a regular expression is kept, with a DeprecationWarning on every parse (Python will refuse it one
    day). Write the backslash twice (`\\\\(`)."""
    env = Environment(extensions=["jinja2.ext.do"])
    files = sorted((ROOT / "macros").rglob("*.sql"))
    assert len(files) >= 20, files
    bad = []
    for path in files:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in env.lexer.tokenize(path.read_text(), path.name):
                pass
        bad += [f"{path.relative_to(ROOT)}: {w.message}" for w in caught if issubclass(w.category, DeprecationWarning)]
    assert not bad, "\n".join(bad)


def test_every_test_folder_is_a_package() -> None:
    """Each folder of tests/ has an __init__.py, so two test files of one name in two folders never collide."""
    folders = [p for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    assert len(folders) >= 8, folders
    missing = [str(p.relative_to(ROOT)) for p in folders if not (p / "__init__.py").exists()]
    assert not missing, f"test folders without __init__.py: {missing}"


def test_the_wheel_ships_the_package_only(tmp_path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("vcmt-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == set(PRODUCT_PYTHON), tops
    assert "vcmt_staging/topic.py" in names and "dbt/adapters/chdb/client.py" in names, names
    assert not [n for n in names if "vcmt_lab" in n or n.startswith(("tests/", "lab/", "examples/"))], names


# Every module vcmt_tools held (0.3.0's wheel, and spark_server and processes added after it), which a project may import.
MODULES_OF_0_3 = (
    "vcmt_tools.staging",
    "vcmt_tools.staging.contract",
    "vcmt_tools.staging.debezium",
    "vcmt_tools.staging.topic",
    "vcmt_tools.stage_writer",
    "vcmt_tools.spark_server",
    "vcmt_tools.processes",
    "vcmt_tools.dbt_invoke",
)


def test_the_0_3_module_names_still_import_and_name_the_new_one() -> None:
    """A 0.3 staging model's `from vcmt_tools.staging import stage_new_batches` runs until 0.5: each old name is
    the module of its new name (the same object, its own spec) and warns once, naming the import to write; an old
    name that never existed is not found."""
    # In one fresh process, in order: each old name, then one that never existed.
    probe = """
import importlib, importlib.util, sys, warnings
for old in sys.argv[1:]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
        importlib.import_module(old)
    new = module.__spec__.name
    assert new != old and not new.startswith("vcmt_tools"), new
    assert sys.modules[old] is sys.modules[new] is module, (old, new)
    said = [str(w.message) for w in caught if w.category is FutureWarning]
    notice = f"`{old}` is now `{new}`: import `{new}` (vcmt 0.4 renamed vcmt_tools; the old name goes in 0.5)"
    assert said.count(notice) == 1 and all(s.startswith("`vcmt_tools.") for s in said), said
    print(new)
print(importlib.util.find_spec("vcmt_tools.staging.no_such_module"))
"""
    proc = subprocess.run(
        [sys.executable, "-c", probe, *MODULES_OF_0_3], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    news = proc.stdout.split()
    assert news[:4] == ["vcmt_staging", "vcmt_staging.contract", "vcmt_staging.debezium", "vcmt_staging.topic"]
    assert news[4:] == ["vcmt_cli.load_stage", "vcmt_cli.spark_server", "vcmt_cli.processes", "vcmt_cli.dbt_invoke",
                        "None"]  # fmt: skip
    # A command run as a module by its old name runs the new one.
    proc = subprocess.run(
        [sys.executable, "-m", "vcmt_tools.stage_writer", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("usage: vcmt-load-stage"), proc.stdout + proc.stderr
    assert "`vcmt_tools.stage_writer` is now `vcmt_cli.load_stage`" in proc.stderr, proc.stderr


def test_installed_packages_name_every_source_folder() -> None:
    """pyproject.toml lists the packages (setuptools' finder loops on dbt deps' link): each folder of Python
    code under the product's folders, and the folders above it, and nothing else; the lab's likewise."""
    import tomllib

    for root, tops in ((ROOT, PRODUCT_PYTHON), (ROOT / "lab", ("vcmt_lab",))):
        listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
        code = {path.parent.relative_to(root) for top in tops for path in (root / top).rglob("*.py")}
        packages = {".".join(folder.parts[:n]) for folder in code for n in range(1, len(folder.parts) + 1)}
        assert len(packages) >= 4, f"the scan found too few packages: {sorted(packages)}"
        assert listed == packages, (
            f"{root / 'pyproject.toml'} [tool.setuptools] packages: add "
            f"{sorted(packages - listed)}, drop {sorted(listed - packages)}"
        )


def _layout_paths() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    paths = []
    for line in block.splitlines():
        first = line.split("  ", 1)[0].strip()
        for item in first.split(", "):
            if item and not item.startswith(("-", "#")):
                paths.append(item)
    return paths


def test_readme_layout_matches_the_tree() -> None:
    paths = _layout_paths()
    assert len(paths) >= 15, f"README Layout parsed to too few paths: {paths}"
    missing = [p for p in paths if not (ROOT / p.rstrip("/")).exists()]
    assert not missing, f"README Layout names paths that do not exist: {missing}"
    listed = [p.rstrip("/") for p in paths]
    unlisted = [
        str(Path(top, p.name))
        for top in (".", "macros", "macros/vcmt", "vcmt_cli", "dbt/adapters", "examples", "lab")
        for p in sorted((ROOT / top).iterdir())
        if (p.is_dir() and (top != "." or p.name in PRODUCT_PYTHON) or top == "vcmt_cli")
        and not p.name.startswith(("_", "."))
        and p.name not in ("work", "pyproject.toml", "README.md")
        and not p.name.endswith(".egg-info")
        and not any(
            str(Path(top, p.name)) in (item, item.split("/")[0]) or item.startswith(f"{top}/{p.name}/")
            for item in listed
        )
    ]
    assert not unlisted, f"folders missing from README Layout: {unlisted}"


def _literal_macro(path: str, macro: str) -> list[dict]:
    """What a macro that returns a literal (model/options.sql, model/objects.sql) returns, rendered with plain
    Jinja: no dbt needed."""
    import jinja2

    class Returned(Exception):
        pass

    def _return(value):
        raise Returned(value)

    env = jinja2.Environment(extensions=["jinja2.ext.do"])
    env.globals["return"] = _return
    try:
        env.from_string((ROOT / path).read_text() + "{{ " + macro + "() }}").render(none=None, true=True, false=False)
    except Returned as returned:
        return returned.args[0]
    raise AssertionError(f"{macro}() returned nothing")


def declared_options() -> list[dict]:
    return _literal_macro("macros/vcmt/model/options.sql", "_options")


def declared_objects() -> list[dict]:
    return _literal_macro("macros/vcmt/model/objects.sql", "_object_roles")


def test_the_declared_objects_are_whole() -> None:
    """Each declared object names macros that exist and roles that are declared; swap and drop orders are
    orders."""
    objects = declared_objects()
    macros = _macros()
    roles = [o["role"] for o in objects]
    assert len(roles) >= 15 and len(set(roles)) == len(roles), roles
    for o in objects:
        for field in ("create", "select"):
            if field in o:
                assert o[field] in macros, f"{o['role']}: {field} macro {o[field]} does not exist"
        for field in ("from", "to", "local"):
            if field in o:
                assert o[field] in roles, f"{o['role']}: {field} {o[field]} is not a declared role"
        assert ("suffix" in o) != ("of" in o), f"{o['role']}: a name of its own (suffix) or another's (of), not both"
        assert set(o.get("of", [])) <= set(roles), o
    for order in ("swap", "drop"):
        ranks = sorted(o[order] for o in objects if order in o)
        assert ranks == list(range(1, len(ranks) + 1)), (order, ranks)


def test_the_lifecycle_spells_no_helper_role() -> None:
    """macros/vcmt/lifecycle/ builds, swaps, reconciles and repairs by looping over model/objects.sql: it names no
    role but the model's own two tables (the target, and the stage writers insert into)."""
    roles = {o["role"] for o in declared_objects()} - {"target", "stage"}
    spelled = {}
    for path in sorted((ROOT / "macros" / "vcmt" / "lifecycle").glob("*.sql")):
        text = re.sub(r"\{#.*?#\}", "", path.read_text(), flags=re.S)
        found = {r for r in roles if re.search(rf"'{r}'|\"{r}\"|\.{r}\b", text)}
        if found:
            spelled[path.name] = sorted(found)
    assert not spelled, f"lifecycle macros that spell a role (loop over model/objects.sql instead): {spelled}"


def test_design_objects_table_lists_the_declared_objects() -> None:
    """docs/design.md's Objects table has one row per declared object (a Distributed table shares its public
    name with the table it stands for on one node)."""
    section = (ROOT / "docs" / "design.md").read_text().split("\n## Objects", 1)[1].split("\n## ", 1)[0]
    listed = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            listed.add(re.findall(r"`([^`]+)`", line.split("|")[1])[0])
    suffix = {o["role"]: o.get("suffix") for o in declared_objects()}
    expected = {
        "m"
        + ("".join(suffix[r] for r in o["of"]) if "of" in o else o["suffix"])
        + ("_<n>" if o["kind"] == "load_table" else "")
        for o in declared_objects()
    }
    assert listed == expected, f"design.md Objects table: missing {expected - listed}, not declared {listed - expected}"


def _readme_config_table() -> list[tuple[str, str]]:
    section = (ROOT / "README.md").read_text().split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 3:
            rows.append((cells[0].strip("`"), cells[1]))
    return rows


def test_the_readme_configuration_table_is_the_declared_options() -> None:
    options = declared_options()
    assert len(options) >= 20, options
    declared = [(o["name"], o["shown"]) for o in options]
    assert _readme_config_table() == declared, (
        "README's Configuration reference table (key, default) differs from macros/vcmt/model/options.sql:\n"
        f"README:   {_readme_config_table()}\ndeclared: {declared}"
    )


def test_the_readme_names_the_options_that_need_a_full_refresh() -> None:
    section = (ROOT / "README.md").read_text().split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    sentence = re.search(r"An existing model keeps (.*?) as they were when its table was created", section, re.S)
    assert sentence, "README's Configuration reference lost its sentence on the options that need --full-refresh"
    named = re.findall(r"`([a-z_]+)`", sentence.group(1))
    assert named == [o["name"] for o in declared_options() if o.get("full_refresh")], named


def test_the_operations_page_lists_the_loads_columns() -> None:
    """docs/operations.md's `<model>__loads` table names the columns `_loads_fields()` declares, in order."""
    page = (ROOT / "docs" / "operations.md").read_text().split("### `<model>__loads`", 1)[1].split("\n### ", 1)[0]
    listed = re.findall(r"^\| `([a-z_]+)` \|", page, re.M)
    declared = [name for name, _type, _meaning in _literal_macro("macros/vcmt/load/report.sql", "_loads_fields")]
    assert listed == declared, f"docs/operations.md lists {listed}; macros/vcmt/load/report.sql declares {declared}"


def test_every_option_is_read_with_a_known_key() -> None:
    """Each option has a reader macro that exists, or a default/choices/expects the loop applies; no macro
    of the package reads a config key that is not declared."""
    macros = _macros()
    for option in declared_options():
        assert set(option) <= {
            "name",
            "required",
            "field",
            "default",
            "blank_is_unset",
            "dbt_fills",
            "shown",
            "choices",
            "expects",
            "read",
            "identity",
            "clause",
            "probe",
            "fix",
            "full_refresh",
        }, option
        if "read" in option:
            assert option["read"] in macros, f"{option['name']}: reader {option['read']} is no macro"
        if "probe" in option:
            assert "{}" in option["probe"] and "fix" in option, option
    names = {o["name"] for o in declared_options()}
    read = set()
    for path in (ROOT / "macros" / "vcmt").rglob("*.sql"):
        read |= set(re.findall(r"source\.get\('([a-z_]+)'", path.read_text()))
    assert read and read <= names, f"config keys read but not declared in options.sql: {read - names}"


# A read of a system table in SQL text: `from system.x`, `join system.x`, a table function's `, system.x)`, or
# `'system', 'x'` (cluster()'s arguments), a literal that starts with `system.x`. Comments ({# ... #}) and messages that name a table do not count.
SYSTEM_READ = re.compile(r"(?i)\b(?:from|join)\s+system\.\w+|,\s*system\.\w+\s*\)|'system',\s*'\w+'|['\"]system\.\w+")


def system_reads(text: str) -> list[str]:
    return SYSTEM_READ.findall(re.sub(r"\{#.*?#\}", "", text, flags=re.S))


def test_every_system_read_lives_in_the_engine_folder() -> None:
    engine = ROOT / "macros" / "vcmt" / "engine"
    assert len(system_reads("".join(p.read_text() for p in engine.glob("*.sql")))) >= 10
    outside = {
        str(p.relative_to(ROOT)): system_reads(p.read_text())
        for p in sorted((ROOT / "macros").rglob("*.sql"))
        if engine not in p.parents and system_reads(p.read_text())
    }
    assert not outside, f"system.* reads outside macros/vcmt/engine/ (move them into a named reader there): {outside}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).strip().replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {_anchor(h) for h in re.findall(r"^#+\s+(.*)$", text, re.M)} | set(
        re.findall(r'<a (?:name|id)="([^"]+)"', text)
    )


def _markdown_files() -> list[Path]:
    files = []
    for item in DOCS:
        path = ROOT / item
        files += sorted(path.rglob("*.md")) if path.is_dir() else [path]
    return files


def test_doc_links_resolve() -> None:
    """Every relative link in the docs names a file that exists, and a heading of it when it has an anchor."""
    files = _markdown_files()
    assert len(files) >= 8, files
    broken = []
    for doc in files:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (doc.parent / file_part).resolve() if file_part else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def _source_files(root: Path) -> Iterator[Path]:
    """The files under `root` a person writes, not those of git, an environment (.venv, .venv-dbt112), a cache, a
    build (build, *.egg-info), dbt (target, logs, dbt_packages) or a run (.local, work). Those folders are not
    entered at all: make test fills .venv-dbt112 while the tests run."""
    skipped = {".git", ".local", ".ruff_cache", ".pytest_cache", "build", "target", "logs", "work", "dbt_packages"}
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(
            d for d in subfolders if d not in skipped and not d.startswith(".venv") and not d.endswith(".egg-info")
        )
        for name in sorted(names):
            yield Path(folder) / name


def test_design_pointers_land_on_headings() -> None:
    """Code and docs point into docs/design.md by anchor; each anchor is a heading there."""
    anchors = _anchors(ROOT / "docs" / "design.md")
    broken = []
    for path in _source_files(ROOT):
        if path.suffix not in {".sql", ".py", ".md", ".yml"}:
            continue
        text = path.read_text(errors="ignore")
        # Any spelling of a design doc other than the repository's own (e.g. an upper-case brief kept elsewhere).
        elsewhere = {m for m in re.findall(r"(?i)\bdesign\.md\b", text) if m != "design.md"}
        assert not elsewhere, f"{path.relative_to(ROOT)} points to {elsewhere}; point to docs/design.md instead"
        broken += [
            f"{path.relative_to(ROOT)}: #{a}"
            for a in re.findall(r"design\.md#([A-Za-z0-9_-]+)", text)
            if a not in anchors
        ]
    assert not broken, f"pointers to docs/design.md sections that do not exist: {broken}"


def test_the_example_repeats_the_staging_contract() -> None:
    """The example project's yml tests and SQL staging take kinds and reasons from its vars, which must be
    the contract's (vcmt_staging.contract), in its order."""
    example_vars = yaml.safe_load((ROOT / "examples" / "cdc" / "dbt_project.yml").read_text())["vars"]
    assert tuple(example_vars["cdc_kinds"]) == contract.KINDS
    assert tuple(example_vars["cdc_reasons"]) == contract.REASONS
    # The SQL staging's reason codes go through cdc_reason(), which checks them against the vars.
    sql = (ROOT / "examples" / "cdc" / "macros" / "sql_staging" / "cdc_typed_lines.sql").read_text()
    spelled = re.findall(r"cdc_reason\('(\w+)'\)", sql)
    assert spelled == list(contract.SIMPLE_REASONS), spelled
    assert not re.search(r"then '(" + "|".join(contract.REASONS) + ")'", sql), "a reason spelled without cdc_reason()"


def _version_copies() -> dict[str, str]:
    """Every copy of the package's version (integration_tests/dbt_project.yml versions its own project)."""
    import tomllib

    copies = {
        path: yaml.safe_load((ROOT / path).read_text())["version"]
        for path in ("dbt_project.yml", "examples/cdc/dbt_project.yml")
    }
    copies["lab/pyproject.toml"] = tomllib.loads((ROOT / "lab" / "pyproject.toml").read_text())["project"]["version"]
    for adapter in ("chdb", "vcmt_spark"):
        path = f"dbt/adapters/{adapter}/__version__.py"
        found = re.findall(r'^version = "([^"]*)"$', (ROOT / path).read_text(), re.M)
        assert len(found) == 1, f'{path}: expected one line version = "x.y.z", found {found}'
        copies[path] = found[0]
    return copies


def test_one_version_number() -> None:
    """pyproject.toml holds the package's version; every copy repeats it, and CHANGELOG.md's newest released
    section (## [x.y.z] - YYYY-MM-DD, below ## Unreleased) is that version."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"pyproject.toml version is not x.y.z: {version!r}"
    differ = {path: v for path, v in _version_copies().items() if v != version}
    assert not differ, f"copies of the version that differ from pyproject.toml's {version}: {differ}"
    headings = re.findall(r"^## (.*)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    odd = [h for h in headings if h != "Unreleased" and not re.fullmatch(r"\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}", h)]
    assert not odd, f"CHANGELOG.md sections are '## Unreleased' or '## [x.y.z] - YYYY-MM-DD': {odd}"
    released = [h[1:].split("]")[0] for h in headings if h != "Unreleased"]
    assert released and released[0] == version, (
        f"CHANGELOG.md's newest released section is {released[:1]}, pyproject.toml's version is {version}: "
        f"move the Unreleased entries under '## [{version}] - <date>' when the version is set"
    )


# A Makefile recipe that runs a command as a module: `$(BIN)/python -m <module> $(ARGS)` (or $(SERVER_ARGS), ...).
MAKE_COMMAND = re.compile(r"^\t@.*?\$\(BIN\)/python -m ([a-z_][a-z0-9_.]*) \$\([A-Z_]*ARGS\)", re.M)


def test_every_command_the_makefile_runs_answers_help() -> None:
    """`make <target> ARGS=--help` prints the command's usage: the README and the Makefile offer it for each.
    `make bench ARGS=--help` failed with a TypeError (a help text with `%` in it, which argparse formats)."""
    modules = sorted(set(MAKE_COMMAND.findall((ROOT / "Makefile").read_text())))
    assert {"vcmt_lab.bench", "vcmt_lab.demo", "vcmt_lab.faults", "vcmt_lab.fuzz"} <= set(modules), modules
    procs = {
        m: subprocess.Popen(
            [sys.executable, "-m", m, "--help"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for m in modules
    }
    failed = []
    for m, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0 or not out.startswith("usage: "):
            failed.append(f"python -m {m} --help: exit {proc.returncode}\n{(out + err)[-1500:]}")
    assert not failed, "\n\n".join(failed)


def test_make_bench_help_runs_no_benchmark() -> None:
    """`make bench` runs three benchmarks; with ARGS=--help each prints its options and none runs (ARGS reached
    the first only, and the other two then ran whole)."""
    dry = subprocess.run(
        ["make", "-n", "bench", "ARGS=--help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    commands = [line for line in dry.splitlines() if " -m vcmt_lab.bench" in line]
    assert len(commands) == 3 and all(line.split()[-1] == "--help" for line in commands), dry
