"""Where the lab finds the repository's shelves: the package, the example project, the lab itself."""

from pathlib import Path

LAB_ROOT = Path(__file__).resolve().parents[1]
REPO_ROOT = LAB_ROOT.parent
# The reference CDC pipeline: its own dbt project, installing the package with `local:`.
EXAMPLE_ROOT = REPO_ROOT / "examples" / "cdc"
# The package's own dbt project that proves the generic tests.
INTEGRATION_ROOT = REPO_ROOT / "integration_tests"
BENCH_ROOT = LAB_ROOT / "bench"
