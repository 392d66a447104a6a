"""The pinned pandas is one every component supports (issue 13).

chDB pulls pandas in. PySpark warns that it does not support pandas >= 3, and
pandas 3 segfaults when first imported while freezegun is active (dbt's
sample-mode tests freeze time). constraints.txt pins pandas 2.2.3, which
PySpark accepts without a warning; a fresh interpreter checks it so the
import order of this test session does not matter.
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import warnings
warnings.simplefilter("error")
import pandas
from pyspark.sql.pandas.utils import require_minimum_pandas_version
require_minimum_pandas_version()
print(pandas.__version__)
"""


def test_pandas_is_supported_by_pyspark_without_warning():
    """PySpark's own pandas check passes with warnings turned into errors."""
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    major = int(proc.stdout.strip().split(".")[0])
    assert major == 2, proc.stdout
