# measuredb: `make run` starts the platform, `make test` runs the whole suite.
# Needs only Python >= 3.11 and make; everything else is installed into .venv.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install timescaledb citus run test test-timescaledb test-citus test-fast test-reliability schema bench bench-scale lint typecheck fmt lock clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml requirements.lock requirements-dev.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "measuredb needs Python >= 3.11 (set PYTHON=python3.x)")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

install: $(STAMP) ## create .venv and install the pinned dependencies

# TimescaleDB is in no package registry: its build for the embedded PostgreSQL 18 comes from
# TIMESCALEDB_DIR (a folder with the tarball and its `install` script; README "TimescaleDB").
TIMESCALEDB_DIR ?= ../shared/timescaledb
timescaledb: $(STAMP) ## install TimescaleDB into the embedded PostgreSQL (from TIMESCALEDB_DIR)
	@test -x "$(TIMESCALEDB_DIR)/install" || { echo "make timescaledb: no TimescaleDB build at $(TIMESCALEDB_DIR) (set TIMESCALEDB_DIR to a folder with its install script)" >&2; exit 2; }
	PYTHON=$(BIN)/python "$(TIMESCALEDB_DIR)/install"

run: $(STAMP) ## start PostgreSQL (embedded unless DATABASE_URL), schema, collector and API
	$(BIN)/measuredb run

test: $(STAMP) ## the whole test suite against a real PostgreSQL (embedded unless DATABASE_URL)
	$(BIN)/python -m pytest -n 2 --dist loadfile -q

test-timescaledb: timescaledb ## the whole test suite again on TimescaleDB (embedded server preloading it)
	MEASUREDB_TIMESCALEDB=on $(BIN)/python -m pytest -n 2 --dist loadfile -q

# Citus, like TimescaleDB, comes from a folder with its build and `install` script (CITUS_DIR).
CITUS_DIR ?= ../shared/citus
citus: $(STAMP) ## install Citus into the embedded PostgreSQL (from CITUS_DIR)
	@test -x "$(CITUS_DIR)/install" || { echo "make citus: no Citus build at $(CITUS_DIR) (set CITUS_DIR to a folder with its install script)" >&2; exit 2; }
	PYTHON=$(BIN)/python "$(CITUS_DIR)/install"

test-citus: citus ## the Citus tests: a coordinator and two workers from the wheel (tests/citus)
	$(BIN)/python -m pytest -n 0 -q tests/citus

test-reliability: $(STAMP) ## the reliability suite alone (part of make test): outages, kill -9, hostile bodies, files, settings
	$(BIN)/python -m pytest -n 2 --dist loadfile -q -m reliability

test-fast: $(STAMP) ## the tests that need no database
	$(BIN)/python -m pytest -q -m "not db"

schema: $(STAMP) ## apply schema/ to the database
	$(BIN)/measuredb schema apply

bench: $(STAMP) ## run the benchmarks and append the figures to bench/RESULTS.md
	$(BIN)/python bench/run.py

bench-scale: $(STAMP) ## a ref16 day end to end, ingest vs raw COPY, bytes per value (both engines) -> bench/RESULTS.md
	$(BIN)/python bench/run.py bench_scale

lint: $(STAMP) ## static checks: ruff (complexity included), the type check, the import contracts (pyproject.toml), and the dashboards are what dashboards/build.py makes
	$(BIN)/python -m ruff check cli api collector core tests bench dashboards
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python dashboards/build.py --check

typecheck: $(STAMP) ## the type check alone (mypy over core, collector, api, cli; [tool.mypy] in pyproject.toml)
	$(BIN)/mypy

lock: ## re-pin requirements.lock (what the product needs) and requirements-dev.lock (tests, lint) from .venv
	rm -rf build/lock && mkdir -p build/lock && $(PYTHON) -m venv build/lock/venv
	$(BIN)/python -m pip freeze --all --exclude-editable | grep -viE "^(measuredb|pip)( @|==)" | sort -f > build/lock/all.txt
	build/lock/venv/bin/python -m pip install --quiet --disable-pip-version-check -c build/lock/all.txt ".[parquet]"
	build/lock/venv/bin/python -m pip freeze --all --exclude-editable | grep -viE "^(measuredb|pip|setuptools|wheel)( @|==)" | sort -f > build/lock/product.txt
	{ echo "# Exact pins of what the product needs (the image installs only these); make lock regenerates it."; cat build/lock/product.txt; } > requirements.lock
	{ echo "# Exact pins of the test and lint tools, on top of requirements.lock (make install adds them;"; echo "# the image does not); make lock regenerates it."; grep -vxiFf build/lock/product.txt build/lock/all.txt; } > requirements-dev.lock
	rm -rf build

clean: ## remove .venv (keeps the data in .data)
	rm -rf $(VENV) build *.egg-info
