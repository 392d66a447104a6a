"""The 0.3 names of vcmt's Python modules, kept so that a 0.3 project runs unchanged until 0.5.

`vcmt_tools.staging` is now `vcmt_staging` (what a staging model imports) and the commands' modules are in
`vcmt_cli`. Importing an old name gives the module under its new name (the same object, so state such as
`collecting_summaries` is shared) and warns once, naming the new import. RENAMED is the one list of old names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# Old module name -> new one; a submodule of an old name maps to the same submodule of the new one.
RENAMED = {
    "vcmt_tools.staging": "vcmt_staging",
    "vcmt_tools.stage_writer": "vcmt_cli.load_stage",
    "vcmt_tools.spark_server": "vcmt_cli.spark_server",
    "vcmt_tools.processes": "vcmt_cli.processes",
    "vcmt_tools.dbt_invoke": "vcmt_cli.dbt_invoke",
}


def new_name(old: str) -> str | None:
    for before, after in RENAMED.items():
        if old == before or old.startswith(before + "."):
            return after + old[len(before) :]
    return None


class _Renamed(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name and loads it as the module of the new name (imported, not copied)."""

    def find_spec(self, fullname, path=None, target=None):
        new = new_name(fullname)
        if new is None or importlib.util.find_spec(new) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = _warn(spec.name)
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # the import system sets the old name's spec on the module
        return module

    def exec_module(self, module) -> None:
        """The new module ran when it was imported; it keeps its own spec."""
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, fullname):
        """`python -m vcmt_tools.stage_writer` (runpy) runs the new module's code."""
        new = _warn(fullname)
        return importlib.util.find_spec(new).loader.get_code(new)

    def is_package(self, fullname) -> bool:
        return importlib.util.find_spec(new_name(fullname)).submodule_search_locations is not None


def _warn(old: str) -> str:
    new = new_name(old)
    warnings.warn(
        f"`{old}` is now `{new}`: import `{new}` (vcmt 0.4 renamed vcmt_tools; the old name goes in 0.5)",
        FutureWarning,
        stacklevel=3,
    )
    return new


# Once, even when this module is reloaded (a reload defines another _Renamed class).
if not any(type(finder).__qualname__ == "_Renamed" and type(finder).__module__ == __name__ for finder in sys.meta_path):
    sys.meta_path.insert(0, _Renamed())
