# atlas-dagster: `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
# The checkout is the demo's deployment directory: tenants.yaml here, state under .atlas/.
export ATLAS_HOME ?= $(CURDIR)
# make bench runs both benchmarks; BENCH=load or BENCH=backfill picks one, *_ARGS pass flags
# (e.g. BENCH_BACKFILL_ARGS="--days 3 --rows 50000" for a smoke run).
BENCH ?= load backfill
BENCH_LOAD_ARGS ?=
BENCH_BACKFILL_ARGS ?=
# Extra pytest arguments for test and test-fast (e.g. PYTEST_ARGS="-k wheel").
PYTEST_ARGS ?=
# make turns every failing status into 2: say it when pytest's was 5 (no tests collected).
PYTEST = $(BIN)/pytest -q $(PYTEST_ARGS)
NO_TESTS_IS_FAILURE = || { status=$$?; [ $$status -ne 5 ] || echo "pytest collected no tests: a failure" >&2; exit $$status; }

.PHONY: install system-deps demo dev test test-fast lint bench clean

$(BIN)/atlas-dagster: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/atlas-dagster

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

# Demo exports, the schema, a raw backfill through a real webserver and daemon (newest day
# first), gold filled in by automation, then the status table. Reuses `make dev` if it runs.
demo: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/atlas-dagster demo

# The Dagster UI and daemon on http://127.0.0.1:3000, on the same embedded state.
dev: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

lint: install
	$(BIN)/ruff check .

# Debian's chromium and postgresql, installed with apt-get when missing (root) or named with the
# command to run (anyone else); .ci/run uses the same script.
system-deps:
	scripts/ensure-system-deps

# Everything: ruff, then every tier (browser, PostgreSQL, dagster dev end to end, the wheel).
test: install system-deps
	$(BIN)/ruff check .
	$(PYTEST) $(NO_TESTS_IS_FAILURE)

# The fast tier (pytest -m "not slow"): under a minute, no browser, PostgreSQL or dagster dev.
test-fast: install
	$(BIN)/ruff check .
	$(PYTEST) -m "not slow" $(NO_TESTS_IS_FAILURE)

bench: install
	$(if $(filter load,$(BENCH)),$(BIN)/python -m bench.bench_load $(BENCH_LOAD_ARGS))
	$(if $(filter backfill,$(BENCH)),$(BIN)/python -m bench.bench_backfill $(BENCH_BACKFILL_ARGS))

clean:
	rm -rf .atlas .dagster_home
