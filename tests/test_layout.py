"""The repository's own rules, checked on its files: public macros are
dispatched and documented, README "Layout" matches the tree, and every
pointer into docs/design.md lands on a heading."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MACRO = re.compile(r"\{%-?\s*macro\s+([A-Za-z_][A-Za-z0-9_]*)\s*\((.*?)\)\s*-?%\}(.*?)\{%-?\s*endmacro", re.S)


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
    assert len(public) >= 10, f"the scan found too few macros: {sorted(public)}"
    undocumented = public - _documented()
    assert not undocumented, f"public macros missing from a macros yml (document them or prefix _): {sorted(undocumented)}"
    not_dispatched = sorted(n for n in public if f"adapter.dispatch('{n}', 'vcmt')" not in macros[n])
    assert not not_dispatched, f"public macros that are not dispatched: {not_dispatched}"
    stale = {n for n in _documented() - set(macros) if f"default__{n}" not in macros}
    assert not stale, f"macros yml documents macros that do not exist: {sorted(stale)}"


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
    # A short name after a comma continues the previous entry's folder (`vcmt_tools/cdc/, demo.py`).
    resolved, folder = [], ""
    for item in paths:
        path = item if "/" in item.rstrip("/") or (ROOT / item).exists() else folder + item
        folder = path.rstrip("/").rsplit("/", 1)[0] + "/" if "/" in path.rstrip("/") else ""
        resolved.append(path.rstrip("/"))
    missing = [p for p in resolved if not (ROOT / p).exists()]
    assert not missing, f"README Layout names paths that do not exist: {missing}"
    unlisted = [
        f"{top}/{p.name}"
        for top in ("macros", "vcmt_tools", "models", "dbt/adapters")
        for p in sorted((ROOT / top).iterdir())
        if p.is_dir() and not p.name.startswith(("_", ".")) and not any((r + "/").startswith(f"{top}/{p.name}/") for r in resolved)
    ]
    assert not unlisted, f"folders missing from README Layout: {unlisted}"


def test_design_pointers_land_on_headings() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 _-]", "", h.lower()).strip().replace(" ", "-")
               for h in re.findall(r"^#+\s+(.*)$", design, re.M)}
    anchors |= set(re.findall(r'<a (?:name|id)="([^"]+)"', design))
    broken = []
    for path in ROOT.rglob("*"):
        if path.suffix not in {".sql", ".py", ".md", ".yml"} or any(p in path.parts for p in (".venv", ".git", ".local", "target", "work")):
            continue
        text = path.read_text(errors="ignore")
        # Any spelling of a design doc other than the repository's own (e.g. an upper-case brief kept elsewhere).
        elsewhere = {m for m in re.findall(r"(?i)\bdesign\.md\b", text) if m != "design.md"}
        assert not elsewhere, f"{path.relative_to(ROOT)} points to {elsewhere}; point to docs/design.md instead"
        broken += [f"{path.relative_to(ROOT)}: #{a}" for a in re.findall(r"design\.md#([A-Za-z0-9_-]+)", text) if a not in anchors]
    assert not broken, f"pointers to docs/design.md sections that do not exist: {broken}"


def test_installed_packages_name_every_source_folder() -> None:
    """pyproject.toml lists the packages (setuptools' finder loops on dbt deps' link): each folder of Python
    code under dbt/ and vcmt_tools/, and the folders above it, and nothing else."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    code = {path.parent.relative_to(ROOT) for top in ("dbt", "vcmt_tools") for path in (ROOT / top).rglob("*.py")}
    packages = {".".join(folder.parts[:n]) for folder in code for n in range(1, len(folder.parts) + 1)}
    assert len(packages) >= 10, f"the scan found too few packages: {sorted(packages)}"
    assert listed == packages, (f"pyproject.toml [tool.setuptools] packages: add {sorted(packages - listed)}, "
                                f"drop {sorted(listed - packages)}")
