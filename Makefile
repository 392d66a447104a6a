# The two commands a newcomer needs:
#   make demo   creates .venv if missing, installs everything, runs the CDC pipeline end to end
#   make test   runs pytest, dbt build of integration_tests on chdb, and sqlfluff lint
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.vcmt-installed
# dbt must not try to reach the network for usage stats or version checks.
export DO_NOT_TRACK := 1
export DBT_SEND_ANONYMOUS_USAGE_STATS := false
export DBT_VERSION_CHECK := false

.PHONY: demo test fuzz bench bench-staging lint venv java clean capture-fixtures

$(STAMP): pyproject.toml constraints.txt
	@echo "==> setting up $(VENV) (first run downloads about 600 MB of wheels)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade "pip==24.3.1"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt \
		-e ".[spark,dev]" --config-settings editable_mode=compat
	@touch $(STAMP)
	@echo "==> $(VENV) ready"

venv: $(STAMP)

java:
	@scripts/check_java.sh

demo: venv java
	@$(BIN)/python -m vcmt_tools.demo $(ARGS)

test: venv java
	@scripts/test.sh

fuzz: venv
	@$(BIN)/python -m vcmt_tools.fuzz $(ARGS)

# The ClickHouse benchmark (ARGS), then the Spark staging one (STAGING_ARGS; make bench-staging alone).
bench: venv java
	@$(BIN)/python -m vcmt_tools.bench $(ARGS)
	@$(BIN)/python -m vcmt_tools.bench.staging $(STAGING_ARGS)

# Spark staging throughput next to the ClickHouse apply (issue 15); ARGS="--sizes 50000 --landed ''" (--help).
bench-staging: venv java
	@$(BIN)/python -m vcmt_tools.bench.staging $(ARGS)

# Re-capture the real Debezium fixtures under integration_tests/fixtures/debezium
# (PostgreSQL + MariaDB on loopback, Debezium embedded engine). Not part of make test.
CAPTURE_VENV := .local/capture-venv
capture-fixtures: java
	@capture/servers.sh
	@test -x $(CAPTURE_VENV)/bin/python || $(PYTHON) -m venv $(CAPTURE_VENV)
	@$(CAPTURE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r capture/requirements.txt
	@$(CAPTURE_VENV)/bin/python capture/capture.py $(ARGS)

lint: venv
	@$(BIN)/sqlfluff lint models integration_tests/models
	@$(BIN)/ruff check .

clean:
	rm -rf .local integration_tests/.local target integration_tests/target logs integration_tests/logs .demo
