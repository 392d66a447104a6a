#!/usr/bin/env bash
# make test: pytest, dbt build of integration_tests on chdb, sqlfluff lint, ruff.
# Prints a progress line per phase and one summary line at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export PATH="$PWD/$BIN:$PATH"
start=$(date +%s)
failed=()
results=()

phase() { printf '\n==> [%s] %s\n' "$1" "$2"; }

phase 1/4 "pytest (chDB + Spark, real engines)"
pytest_log=$(mktemp)
python -m pytest -q -p no:cacheprovider --durations=15 ${PYTEST_ARGS:-} 2>&1 | tee "$pytest_log"
rc=${PIPESTATUS[0]}
pytest_line=$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$pytest_log" | tail -n1 | tr -d '=' | xargs)
if [ "$rc" -eq 5 ]; then
  failed+=("pytest collected no tests"); results+=("pytest: no tests")
elif [ "$rc" -ne 0 ]; then
  failed+=("pytest"); results+=("pytest: ${pytest_line:-exit $rc}")
else
  results+=("pytest: ${pytest_line}")
fi

phase 2/4 "dbt build of integration_tests on chdb"
(
  cd integration_tests &&
  rm -rf .local/chdb &&
  dbt deps --quiet &&
  dbt seed --target chdb --full-refresh &&
  dbt build --target chdb
) 2>&1 | tee "$pytest_log.dbt"
rc=${PIPESTATUS[0]}
dbt_line=$(grep -E 'Done\. PASS=' "$pytest_log.dbt" | tail -n1 | sed 's/.*Done\. //')
if [ "$rc" -ne 0 ]; then failed+=("dbt build"); fi
results+=("dbt build: ${dbt_line:-exit $rc}")

phase 3/4 "sqlfluff lint (models)"
if sqlfluff lint models integration_tests/models --disable-progress-bar; then
  results+=("sqlfluff: clean")
else
  failed+=("sqlfluff"); results+=("sqlfluff: violations")
fi

phase 4/4 "ruff"
if ruff check . ; then results+=("ruff: clean"); else failed+=("ruff"); results+=("ruff: violations"); fi

elapsed=$(( $(date +%s) - start ))
summary=$(printf '%s; ' "${results[@]}"); summary=${summary%; }
if [ ${#failed[@]} -eq 0 ]; then
  echo; echo "make test: OK in ${elapsed}s — ${summary}"
  exit 0
fi
echo; echo "make test: FAILED (${failed[*]}) in ${elapsed}s — ${summary}"
exit 1
