# atlas-dagster: `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
# The checkout is the demo's deployment directory: tenants.yaml here, state under .atlas/.
export ATLAS_HOME ?= $(CURDIR)
# make bench runs load and backfill; BENCH=load, backfill, small or fleet picks one, *_ARGS pass
# flags (e.g. BENCH_BACKFILL_ARGS="--days 3 --rows 50000" for a smoke run).
BENCH ?= load backfill
BENCH_LOAD_ARGS ?=
BENCH_BACKFILL_ARGS ?=
BENCH_SMALL_ARGS ?=
# Extra pytest arguments for test and test-fast (e.g. PYTEST_ARGS="-k wheel").
PYTEST_ARGS ?=
# make turns every failing status into 2: say it when pytest's was 5 (no tests collected).
PYTEST = $(BIN)/pytest -q $(PYTEST_ARGS)
NO_TESTS_IS_FAILURE = || { status=$$?; [ $$status -ne 5 ] || echo "pytest collected no tests: a failure" >&2; exit $$status; }
# make bench BENCH=fleet: sensors and gold automation at 40/100/200 tenants x 3 years on the real
# daemon (bench/bench_fleet.py; BENCH_FLEET_ARGS="--tenants 100 --reference 0" for one size), then
# the fleet backfill, status and verify on SQLite and PostgreSQL (bench/bench_fleet_backfill.py).
BENCH_FLEET_ARGS ?=
BENCH_FLEET_BACKFILL_ARGS ?=
# make bench BENCH=verify: verify of one tenant x 3 years (bench/bench_verify.py; e.g.
# BENCH_VERIFY_ARGS="--cli sqlite,postgres" to time the CLI end to end too).
BENCH_VERIFY_ARGS ?=
# make bench BENCH=report: every client's progress report, 100 tenants x 3 years (bench/bench_report.py).
BENCH_REPORT_ARGS ?=
# make bench BENCH=dry-run: backfill --dry-run's footer pass over a year, in bulk and per day
# (bench/bench_dry_run.py).
BENCH_DRY_RUN_ARGS ?=
# make bench BENCH=writers: each real writer's export through `atlas-dagster load`, and each tool's
# types' INSERT cost beside the bare engine (bench/bench_writers.py).
BENCH_WRITERS_ARGS ?=
# make bench BENCH=changes: finding re-delivered days over 1 and 3 years, beside the bare listing
# (bench/bench_changes.py; BENCH_CHANGES_ARGS="--s3" on the S3 test server too).
BENCH_CHANGES_ARGS ?=

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
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/check-imports

# Debian's chromium, postgresql and openjdk-17-jre-headless (pyspark's Java), installed with
# apt-get when missing (root) or named with the command to run (anyone else); .ci/run uses the
# same script.
system-deps:
	scripts/ensure-system-deps

# Everything: ruff, then every tier (browser, PostgreSQL, dagster dev end to end, the wheel).
test: install system-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/check-imports
	$(PYTEST) $(NO_TESTS_IS_FAILURE)

# The fast tier (pytest -m "not slow"): no browser, PostgreSQL or dagster dev (146 tests, ~2 min).
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/check-imports
	$(PYTEST) -m "not slow" $(NO_TESTS_IS_FAILURE)

bench: install
	$(if $(filter load,$(BENCH)),$(BIN)/python -m bench.bench_load $(BENCH_LOAD_ARGS))
	$(if $(filter backfill,$(BENCH)),$(BIN)/python -m bench.bench_backfill $(BENCH_BACKFILL_ARGS))
	$(if $(filter small,$(BENCH)),$(BIN)/python -m bench.bench_small $(BENCH_SMALL_ARGS))
	$(if $(filter fleet,$(BENCH)),$(BIN)/python -m bench.bench_fleet $(BENCH_FLEET_ARGS))
	$(if $(filter fleet,$(BENCH)),$(BIN)/python -m bench.bench_fleet_backfill $(BENCH_FLEET_BACKFILL_ARGS))
	$(if $(filter verify,$(BENCH)),$(BIN)/python -m bench.bench_verify $(BENCH_VERIFY_ARGS))
	$(if $(filter report,$(BENCH)),$(BIN)/python -m bench.bench_report $(BENCH_REPORT_ARGS))
	$(if $(filter writers,$(BENCH)),$(BIN)/python -m bench.bench_writers $(BENCH_WRITERS_ARGS))
	$(if $(filter dry-run,$(BENCH)),$(BIN)/python -m bench.bench_dry_run $(BENCH_DRY_RUN_ARGS))
	$(if $(filter changes,$(BENCH)),$(BIN)/python -m bench.bench_changes $(BENCH_CHANGES_ARGS))

clean:
	rm -rf .atlas .dagster_home
