"""Spark needs Java 17 or later: find the `java` Spark would start and say what is wrong, before it fails.

Spark's launcher runs `$JAVA_HOME/bin/java` when JAVA_HOME is set, else the
`java` on PATH; without a usable one, PySpark fails with a traceback ending
in JAVA_GATEWAY_EXITED. Run as a script (`python3 dbt/adapters/vcmt_spark/java.py`,
standard library only) it is the same check for a shell: `make` runs it before
the demo, the tests and the fixture capture, with or without `.venv`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache

MIN_JAVA = 17
INSTALL_HINT = (
    f"install a Java {MIN_JAVA} runtime (Debian and Ubuntu: "
    f"apt-get install openjdk-{MIN_JAVA}-jre-headless), or point JAVA_HOME at one"
)


def java_major(version_text: str) -> int | None:
    """The major version in `java -version`'s output (`1.8.0_392` is 8), None if it has none."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if not m:
        return None
    return int(m[2] or 0) if m[1] == "1" else int(m[1])


def version_line(version_text: str) -> str:
    """The line of `java -version`'s output that names the version (`... version "17.0.15" ...`, as java_major
    reads it): a JVM started with JAVA_TOOL_OPTIONS set first says "Picked up JAVA_TOOL_OPTIONS: ...", whose
    options may themselves name a version."""
    lines = version_text.strip().splitlines()
    return next((line for line in lines if 'version "' in line), lines[0] if lines else "no version")


@cache
def java_problem() -> str | None:
    """What keeps Spark from starting a JVM here, in one sentence with the fix; None when Java is fine."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on PATH"
        return f"Spark needs Java {MIN_JAVA} or later, and {where}: {INSTALL_HINT}."
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"Spark needs Java {MIN_JAVA} or later, and `{java} -version` failed ({e}): {INSTALL_HINT}."
    text = out.stderr or out.stdout
    major = java_major(text)
    if major is None or major < MIN_JAVA:
        return f"Spark needs Java {MIN_JAVA} or later, and {java} is {version_line(text)!r}: {INSTALL_HINT}."
    return None


if __name__ == "__main__":
    problem = java_problem()
    if problem:
        print(f"vcmt: {problem}", file=sys.stderr)
    sys.exit(1 if problem else 0)
