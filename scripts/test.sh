#!/usr/bin/env bash
# make test: pytest, dbt build of integration_tests on chdb and on a served node (dbt-core 1.11), on chdb with
# dbt-core 1.12, sqlfluff lint, ruff check and ruff format --check.
# Prints a progress line per phase and one summary line at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export PATH="$PWD/$BIN:$PATH"
start=$(date +%s)
failed=()
results=()

phase() { printf '\n==> [%s] %s\n' "$1" "$2"; }

phase 1/5 "pytest (chDB + Spark, real engines)"
# The Spark server tests (a Spark Connect and a Thrift server, each with two executor JVMs) run
# beside the rest in their own pytest process: they mostly wait on those JVMs. Their output
# follows the main run's.
pytest_log=$(mktemp)
servers_log=$(mktemp)
servers_tmp=$(mktemp -d)
python -m pytest -q -p no:cacheprovider --durations=5 --basetemp="$servers_tmp" ${PYTEST_ARGS:-} tests/spark_servers \
  > "$servers_log" 2>&1 &
servers_pid=$!
# The rest runs in ${PYTEST_WORKERS:-2} worker processes (pytest-xdist), a test module per worker at a time: most
# tests wait on one single-threaded dbt or chDB call, so two workers use the two cores. Each worker has its
# own chDB data directory and Spark session (tmp folders per worker), as one pytest process has. Modules go
# out longest first (tests/conftest.py, MODULE_SECONDS), not by number of tests: both workers end together.
python -m pytest -q -p no:cacheprovider --durations=15 -n "${PYTEST_WORKERS:-2}" --dist loadscope --no-loadscope-reorder \
  --ignore=tests/spark_servers ${PYTEST_ARGS:-} 2>&1 | tee "$pytest_log"
rc=${PIPESTATUS[0]}
wait "$servers_pid"; servers_rc=$?
echo "--- Spark server tests (ran beside the above):"
cat "$servers_log"
summary_of() {
  local line; line=$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$1" | tail -n1 | tr -d '=' | xargs)
  echo "${line:-none selected}"
}
pytest_line="$(summary_of "$pytest_log"); servers: $(summary_of "$servers_log")"
# A selection in PYTEST_ARGS (e.g. -k name) may match tests of one run only: the other collecting nothing is fine.
if [ -n "${PYTEST_ARGS:-}" ] && [ "$rc" -ne 5 ] && [ "$servers_rc" -eq 5 ]; then servers_rc=0; fi
if [ -n "${PYTEST_ARGS:-}" ] && [ "$servers_rc" -ne 5 ] && [ "$rc" -eq 5 ]; then rc=0; fi
if [ "$rc" -eq 5 ] || [ "$servers_rc" -eq 5 ]; then
  failed+=("pytest collected no tests"); results+=("pytest: no tests")
elif [ "$rc" -ne 0 ] || [ "$servers_rc" -ne 0 ]; then
  failed+=("pytest"); results+=("pytest: ${pytest_line}")
else
  results+=("pytest: ${pytest_line}")
fi

# integration_tests' seeds, models, unit and generic tests, built from scratch on one target. With DBT_FLAGS=1 (one
# leg: each dbt command costs ~20 s here) the vcmt_upsert models and their downstream models are first built with
# --empty (objects built, no event loaded, tests read no row), and dbt show then previews a model whose
# relationships test it runs too.
dbt_build() {
  local target=$1; shift
  local empty="" show=""
  if [ "${DBT_FLAGS:-}" = 1 ]; then
    empty="dbt build --target $target --empty --select it_fct_orders+ && "
    show=" && dbt show --target $target --select it_fct_orders --limit 3"
  fi
  (
    cd integration_tests &&
    rm -rf .local/chdb .local/served_node &&
    dbt deps --quiet &&
    "$@" sh -c "dbt seed --target $target --full-refresh && ${empty}dbt build --target $target${show}"
  ) 2>&1 | tee "$pytest_log.dbt"
  local rc=${PIPESTATUS[0]}
  local line; line=$(grep -E 'Done\. PASS=' "$pytest_log.dbt" | tail -n1 | sed 's/.*Done\. //')
  if [ "$rc" -ne 0 ]; then failed+=("dbt build on $target"); fi
  results+=("dbt build on $target: ${line:-exit $rc}")
}

phase 2/5 "dbt build of integration_tests on chdb, then on a served node over HTTP"
DBT_FLAGS=1 dbt_build chdb env
# A ClickHouse node on 127.0.0.1 for the build's lifetime; profiles.yml's clickhouse target reads its port.
dbt_build clickhouse python -m vcmt_lab.clickhouse_server run .local/served_node --

phase 3/5 "dbt build of integration_tests on chdb with dbt-core 1.12 (.venv-dbt112)"
# Every pinned package of constraints-dbt112.txt, without dependencies: dbt-core 1.12 runs without the
# experimental parser it asks for, whose wheel is built from outside the package registries.
if { test -x .venv-dbt112/bin/dbt || {
       python3 -m venv .venv-dbt112 &&
       .venv-dbt112/bin/python -m pip install --quiet --disable-pip-version-check "pip==24.3.1" &&
       .venv-dbt112/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r constraints-dbt112.txt; }; } &&
   .venv-dbt112/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e . \
     --config-settings editable_mode=compat; then
  dbt_build chdb env PATH="$PWD/.venv-dbt112/bin:$PATH"
  results[${#results[@]}-1]="${results[${#results[@]}-1]/dbt build on chdb/dbt build on chdb with dbt-core 1.12}"
else
  failed+=("dbt-core 1.12 install"); results+=("dbt-core 1.12: install failed")
fi

phase 4/5 "sqlfluff lint (models)"
if sqlfluff lint examples/cdc/models integration_tests/models --disable-progress-bar; then
  results+=("sqlfluff: clean")
else
  failed+=("sqlfluff"); results+=("sqlfluff: violations")
fi

phase 5/5 "ruff (lint, then format: \`ruff format .\` applies it)"
if ruff check . && ruff format --check . ; then results+=("ruff: clean"); else failed+=("ruff"); results+=("ruff: violations"); fi

elapsed=$(( $(date +%s) - start ))
summary=$(printf '%s; ' "${results[@]}"); summary=${summary%; }
if [ ${#failed[@]} -eq 0 ]; then
  echo; echo "make test: OK in ${elapsed}s — ${summary}"
  exit 0
fi
echo; echo "make test: FAILED (${failed[*]}) in ${elapsed}s — ${summary}"
exit 1
