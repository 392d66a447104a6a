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

# Background work runs in process groups of its own (`set -m`): a background job of a script started without job
# control ignores SIGINT. A Ctrl-C reaches this script and its foreground command (pytest in phase 1); the trap
# passes it on to every group still running and ends make test, in any phase. A process a test had paused
# (SIGSTOP: a holder of the lock stopped mid-load) keeps the Ctrl-C pending: SIGCONT lets it take it and end.
groups=()
in_group() { set -m; "$@" & groups+=($!); set +m; }
stop_groups() {
  for pid in "${groups[@]}"; do kill -INT -- "-$pid" 2>/dev/null; kill -CONT -- "-$pid" 2>/dev/null; done
  kill -CONT 0 2>/dev/null
}
trap 'stop_groups; exit 130' INT TERM

# How long a whole run's Spark server tests wait before they start (run_servers, below).
case "${VCMT_SERVERS_DELAY_S:-180}" in
  ''|*[!0-9]*) echo "make test: VCMT_SERVERS_DELAY_S must be whole seconds (e.g. 0 or 180); got '${VCMT_SERVERS_DELAY_S}'" >&2
    exit 2 ;;
esac

phase 1/4 "pytest (chDB + Spark, real engines)"
# The Spark server tests (a Spark Connect and a Thrift server, each with two executor JVMs) run
# beside the rest in their own pytest process: they mostly wait on those JVMs. Their output
# follows the main run's.
# Beside it, the dbt-core 1.12 environment for phase 2 (~40 s of pip on a fresh clone): every pinned package of
# constraints-dbt112.txt, without dependencies: dbt-core 1.12 runs without the experimental parser it asks for,
# whose wheel is built from outside the package registries. vcmt itself is installed into it in phase 2: that
# install writes the source tree's build folders, which a test's wheel build (tests/test_layout.py) writes too.
dbt112_log=$(mktemp)
install_dbt112() {
  test -x .venv-dbt112/bin/dbt || {
    python3 -m venv .venv-dbt112 &&
    .venv-dbt112/bin/python -m pip install --quiet --disable-pip-version-check "pip==24.3.1" &&
    .venv-dbt112/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r constraints-dbt112.txt; }
} > "$dbt112_log" 2>&1
in_group install_dbt112
dbt112_pid=$!
pytest_log=$(mktemp)
servers_log=$(mktemp)
servers_tmp=$(mktemp -d)
# The Spark server tests, in a whole run, start ${VCMT_SERVERS_DELAY_S:-180} s after the rest: its first modules (the cluster's
# and the lock's) keep both cores busy for about three minutes, then wait on leases and nodes, and the cores were
# 20-49 % idle from about 220 s to 560 s (vmstat, 2 idle cores, 2026-11-30) while these tests, started at once,
# had already ended. A run narrowed by PYTEST_ARGS starts them at once, and so does the end of the main pytest (a
# run that fails early does not wait).
pytest_done="$(mktemp -d)/done"
run_servers() {
  local waited=0
  if [ -z "${PYTEST_ARGS:-}" ]; then
    while [ "$waited" -lt "${VCMT_SERVERS_DELAY_S:-180}" ] && [ ! -e "$pytest_done" ]; do
      sleep 1 || return 130; waited=$((waited + 1))
    done
  fi
  python -m pytest -q -p no:cacheprovider --durations=5 --basetemp="$servers_tmp" ${PYTEST_ARGS:-} tests/spark_servers \
    > "$servers_log" 2>&1
}
in_group run_servers
servers_pid=$!
# The rest runs in ${PYTEST_WORKERS:-2} worker processes (pytest-xdist), a test module per worker at a time: most
# tests wait on one single-threaded dbt or chDB call, so two workers use the two cores. Each worker has its
# own chDB data directory and Spark session (tmp folders per worker), as one pytest process has. Modules go
# out longest first (tests/conftest.py, MODULE_SECONDS), not by number of tests: both workers end together.
python -m pytest -q -p no:cacheprovider --durations=15 -n "${PYTEST_WORKERS:-2}" --dist loadscope --no-loadscope-reorder \
  --ignore=tests/spark_servers ${PYTEST_ARGS:-} 2>&1 | tee "$pytest_log"
rc=${PIPESTATUS[0]}
touch "$pytest_done"
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

# integration_tests' seeds, models, unit and generic tests, built from scratch on three legs at once, each in its
# own process group (so a Ctrl-C of make test stops it) with its own chDB folder, target and log folders under
# integration_tests/.local/legs/<leg>: chdb and a served node over HTTP on dbt-core 1.11, and chdb on dbt-core 1.12.
# They start once pytest has ended (each dbt command costs ~20 s of one core; after each other they took ~95 s).
# On the chdb leg the vcmt_upsert models and their downstream models are first built with --empty (objects built,
# no event loaded, tests read no row), and dbt show then previews a model whose relationships test it runs too.
legs_dir=$(mktemp -d)
leg_names=(); leg_labels=(); leg_pids=()
start_leg() {  # start_leg <leg> <target> <label> <command prefix...>
  local leg=$1 target=$2 label=$3; shift 3
  local empty="" show=""
  if [ "$leg" = chdb ]; then
    empty="dbt build --target $target --empty --select it_fct_orders+ && "
    show=" && dbt show --target $target --select it_fct_orders --limit 3"
  fi
  in_group run_leg "$leg" "$target" "$empty" "$show" "$@"
  leg_pids+=($!)
  leg_names+=("$leg"); leg_labels+=("$label")
}
run_leg() {  # run_leg <leg> <target> <--empty build> <dbt show> <command prefix...>, in the leg's own group
  local leg=$1 target=$2 empty=$3 show=$4; shift 4
  (
    cd integration_tests &&
    rm -rf ".local/legs/$leg" &&
    export DBT_TARGET_PATH=".local/legs/$leg/target" DBT_LOG_PATH=".local/legs/$leg/logs" \
      VCMT_CHDB_PATH=".local/legs/$leg/chdb" &&
    "$@" sh -c "dbt seed --target $target --full-refresh && ${empty}dbt build --target $target${show}"
  ) > "$legs_dir/$leg.log" 2>&1
}

phase 2/4 "dbt build of integration_tests: on chdb and on a served node over HTTP (dbt-core 1.11), on chdb with dbt-core 1.12, at once"
wait "$dbt112_pid" &&
  .venv-dbt112/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e . \
    --config-settings editable_mode=compat >> "$dbt112_log" 2>&1
dbt112_rc=$?
cat "$dbt112_log"
# Each dbt-core installs the package (into the one dbt_packages folder) before any leg starts.
(cd integration_tests && dbt deps --quiet) || failed+=("dbt deps")
if [ "$dbt112_rc" -eq 0 ] && (cd integration_tests && PATH="$PWD/../.venv-dbt112/bin:$PATH" dbt deps --quiet); then
  dbt112_ready=1
else
  dbt112_ready=0; failed+=("dbt-core 1.12 install"); results+=("dbt-core 1.12: install failed")
fi
start_leg chdb chdb "dbt build on chdb" env
# A ClickHouse node on 127.0.0.1 for the leg's lifetime; profiles.yml's clickhouse target reads its port.
start_leg clickhouse clickhouse "dbt build on clickhouse" python -m vcmt_lab.clickhouse_server run .local/legs/clickhouse/node --
if [ "$dbt112_ready" = 1 ]; then
  start_leg chdb112 chdb "dbt build on chdb with dbt-core 1.12" env PATH="$PWD/.venv-dbt112/bin:$PATH"
fi
for i in "${!leg_pids[@]}"; do
  wait "${leg_pids[$i]}"; rc=$?
  echo "--- ${leg_labels[$i]}:"
  cat "$legs_dir/${leg_names[$i]}.log"
  line=$(grep -E 'Done\. PASS=' "$legs_dir/${leg_names[$i]}.log" | tail -n1 | sed 's/.*Done\. //')
  if [ "$rc" -ne 0 ]; then failed+=("${leg_labels[$i]}"); fi
  results+=("${leg_labels[$i]}: ${line:-exit $rc}")
done

phase 3/4 "sqlfluff lint (models)"
if sqlfluff lint examples/cdc/models integration_tests/models --disable-progress-bar; then
  results+=("sqlfluff: clean")
else
  failed+=("sqlfluff"); results+=("sqlfluff: violations")
fi

phase 4/4 "ruff (lint, then format: \`ruff format .\` applies it)"
if ruff check . && ruff format --check . ; then results+=("ruff: clean"); else failed+=("ruff"); results+=("ruff: violations"); fi

elapsed=$(( $(date +%s) - start ))
summary=$(printf '%s; ' "${results[@]}"); summary=${summary%; }
if [ ${#failed[@]} -eq 0 ]; then
  echo; echo "make test: OK in ${elapsed}s — ${summary}"
  exit 0
fi
echo; echo "make test: FAILED (${failed[*]}) in ${elapsed}s — ${summary}"
exit 1
