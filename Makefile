# The two commands a newcomer needs:
#   make demo   creates .venv if missing, installs everything, runs the CDC pipeline end to end
#   make test   runs pytest, dbt build of integration_tests, and the linters
# The package is the repository root; examples/cdc/ is the reference pipeline; lab/ holds the demo,
# the tests' driver, the fuzz and the bench (installed beside the package, never shipped).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.vcmt-installed
# dbt must not try to reach the network for usage stats or version checks.
export DO_NOT_TRACK := 1
export DBT_SEND_ANONYMOUS_USAGE_STATS := false
export DBT_VERSION_CHECK := false

.DEFAULT_GOAL := help

.PHONY: help demo test fuzz faults swap-sweep bench bench-server bench-staging bench-operator bench-rows-read \
	bench-statements bench-downstream lint venv java clean capture-fixtures capture-lifecycle

help: ## this list (each target's `##` comment)
	@awk -F':.*## ' '/^[a-z0-9-]+:.*## / { printf "  make %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml lab/pyproject.toml constraints.txt
	@echo "==> setting up $(VENV) (first run downloads about 1.7 GB of wheels)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade "pip==24.3.1"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt \
		-e ".[spark]" -e ./lab --config-settings editable_mode=compat
	@touch $(STAMP)
	@echo "==> $(VENV) ready"

venv: $(STAMP) ## create .venv and install the pinned dependencies

# Spark needs Java 17: say how to get it instead of failing later (dbt/adapters/vcmt_spark/java.py).
java:
	@$(PYTHON) dbt/adapters/vcmt_spark/java.py

demo: venv java ## set up, then run the CDC pipeline end to end on the embedded engine (ARGS: --help)
	@$(BIN)/python -m vcmt_lab.demo $(ARGS)

test: venv java ## pytest, dbt build of integration_tests (chDB, a served node, dbt 1.12), linters
	@scripts/test.sh

fuzz: venv ## random change streams against the oracle (ARGS: --help)
	@$(BIN)/python -m vcmt_lab.fuzz $(ARGS)

# The load lock's fault-injection sweep: every statement of a load x pause/kill/cut x another load, on a
# served node over HTTP and native and on the two-node cluster (ARGS="--targets http native cluster");
# prints `N schedules, M exact` per target and in all (ARGS: --help).
faults: venv ## the load lock's fault-injection sweep (ARGS: --targets http native cluster; --help)
	@$(BIN)/python -m vcmt_lab.faults $(ARGS)

# A sharded --full-refresh losing either node of the two-shard lab cluster at each of its ON CLUSTER statements, then
# the next runs (make test runs one of these cases; about 45 s each); then a mend split again by a lost node and a split
# RENAME mended (their plans are checked on captures in tests/lifecycle).
swap-sweep: venv ## a sharded --full-refresh losing a node at each of its ON CLUSTER statements
	@VCMT_SWAP_SWEEP=1 $(BIN)/python -m pytest -q -p no:cacheprovider $(ARGS) \
		-m swap_sweep tests/materialization/test_sharded.py

# The ClickHouse benchmark (ARGS), its server leg (SERVER_ARGS; make bench-server alone), then the Spark
# staging one (STAGING_ARGS; make bench-staging alone). ARGS=--help prints the three's options and runs none.
HELP_ASKED = $(filter --help -h,$(ARGS))
bench: venv java ## every benchmark: ClickHouse, its server leg, Spark staging
	@$(BIN)/python -m vcmt_lab.bench $(ARGS)
	@$(BIN)/python -m vcmt_lab.bench.server $(if $(HELP_ASKED),--help,$(SERVER_ARGS))
	@$(BIN)/python -m vcmt_lab.bench.staging $(if $(HELP_ASKED),--help,$(STAGING_ARGS))

# One model loaded by dbt run on the embedded engine and on a served node (HTTP, native); ARGS (--help).
bench-server: venv ## one model by dbt run on chDB and on a served node (HTTP, native)
	@$(BIN)/python -m vcmt_lab.bench.server $(ARGS)

# Statements and SQL time of a dbt run of one vcmt_upsert model next to dbt-clickhouse's incremental (delete+insert),
# read from dbt's own log, and a project of 20 models of each kind with --threads 4; embedded and HTTP (ARGS: --help).
bench-statements: venv ## statements and SQL time of a run, next to an incremental model
	@$(BIN)/python -m vcmt_lab.bench.statements $(ARGS)

# Rows a batch's lookups read against the granules holding its keys, per partition layout (issue 41);
# rows, not time, so any machine will do; ARGS="--rows 10000000 --granularity 8192", "--engine http" for a served
# node (--help).
bench-rows-read: venv ## rows a batch's lookups read, per partition layout
	@$(BIN)/python -m vcmt_lab.bench.rows_read $(ARGS)

# What a change feed and an online aggregate cost a load, on the embedded engine; ARGS="--rows 1000000 --batch 100000"
# (--help).
bench-downstream: venv ## what a change feed and an online aggregate cost a load
	@$(BIN)/python -m vcmt_lab.bench.downstream $(ARGS)

# Spark staging throughput next to the ClickHouse apply (issue 15); ARGS="--sizes 50000 --landed ''" (--help).
bench-staging: venv java ## Spark staging throughput next to the ClickHouse apply
	@$(BIN)/python -m vcmt_lab.bench.staging $(ARGS)

# What a scheduled run costs on this machine (docs/operations.md): a warm vcmt-spark-server's staging runs with
# nothing new and with about 100 lines, the marts' runs, vcmt's fixed cost per model, Spark's start on
# method: session; ARGS="--runs 5 --lines 100" (--help).
bench-operator: venv java ## what a scheduled run costs: warm Spark server, marts, fixed cost per model
	@$(BIN)/python -m vcmt_lab.bench.operator $(ARGS)

# Re-capture the real Debezium fixtures under integration_tests/fixtures/debezium
# (PostgreSQL + MariaDB on loopback, Debezium embedded engine). Not part of make test.
CAPTURE_VENV := .local/capture-venv
capture-fixtures: java ## re-capture the Debezium fixtures (PostgreSQL, MariaDB on loopback)
	@lab/capture/servers.sh
	@test -x $(CAPTURE_VENV)/bin/python || $(PYTHON) -m venv $(CAPTURE_VENV)
	@$(CAPTURE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r lab/capture/requirements.txt
	@$(CAPTURE_VENV)/bin/python lab/capture/capture.py $(ARGS)

# The lifecycle's fast tests' fixtures (tests/lifecycle/captured): observations and statements of real runs on the
# embedded engine, a served node and the two-node cluster, interrupted swaps included; minutes, not part of make test
# (ARGS: --list, --only NAME...).
capture-lifecycle: venv ## re-capture tests/lifecycle/captured from real runs (ARGS: --list, --only NAME...)
	@$(BIN)/python -m vcmt_lab.lifecycle_capture $(ARGS)

lint: venv ## sqlfluff on the models, ruff check and ruff format --check on the Python
	@$(BIN)/sqlfluff lint examples/cdc/models integration_tests/models
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .

clean: ## remove every generated folder (.local, target, logs, ...)
	rm -rf .local target logs .demo integration_tests/.local integration_tests/target integration_tests/logs \
		examples/cdc/.local examples/cdc/target examples/cdc/logs examples/cdc/dbt_packages lab/bench/work
