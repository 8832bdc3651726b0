# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# pytest-xdist workers, one more than this 2-core machine's cores: the fast tiers wait on many
# short subprocesses, and the end-to-end tests on real programs' sleeps, schedulers and locks
# (at 2 workers the cores sat ~45% idle; at 3 the tier took 912 s instead of 1293 s here, and
# its measurements are paired and interleaved, so a loaded machine does not bias a verdict).
# 0 runs serially (e.g. to debug one test).
TEST_WORKERS ?= 3
E2E_WORKERS ?= 3
# A module's tests that share an expensive fixture run on one worker (xdist_group); the work is
# handed out longest first, in the order tests/conftest.py gives it (tests/schedule.py).
XDIST = --dist loadgroup --no-loadscope-reorder

.PHONY: demo test test-e2e test-all lint typecheck bench bench-suite clean venv

venv: $(STAMP)

# Re-install only when the project metadata or the native trace reader changes.
# pip byte-compiles what it installs (about half of the install's time here): kept, because with
# PYTHONDONTWRITEBYTECODE set (as on these machines) an uncompiled venv compiles every module
# again in every process that imports it (end-to-end tier 905 s -> 1132 s when tried).
$(STAMP): pyproject.toml setup.py tools/trace/_fastscan.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "[1/2] upgrading pip in $(VENV)"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@rm -f tools/trace/_fastscan*.so  # a failed (optional) rebuild must not leave a stale extension
	@echo "[2/2] installing dftune and its dependencies into $(VENV): LangGraph, chromadb, SciPy,"
	@echo "      DuckDB, dftracer and the test tools (77 s measured on a fresh 2-core machine with no pip"
	@echo "      cache, 2026-12-05; minutes more on a busy machine or a far package index; a line"
	@echo "      every 20 s; the whole pip output is kept in $(VENV)/install.log)"
	@start=$$(date +%s); \
	$(BIN)/python -m pip install --progress-bar off -e '.[dev]' > $(VENV)/install.log 2>&1 & pid=$$!; \
	n=0; while kill -0 $$pid 2>/dev/null; do \
		sleep 1; n=$$((n + 1)); [ $$((n % 20)) -eq 0 ] || continue; \
		echo "      $$(( $$(date +%s) - start )) s: $$(grep -c '^Collecting' $(VENV)/install.log) package(s) resolved," \
		     "$$(grep -ci '^ *Downloading' $(VENV)/install.log) downloaded"; \
	done; \
	wait $$pid || { tail -n 40 $(VENV)/install.log; echo "pip install failed (whole log: $(VENV)/install.log)"; exit 1; }; \
	echo "      done in $$(( $$(date +%s) - start )) s: $$(grep -c '^Collecting' $(VENV)/install.log) package(s) (log: $(VENV)/install.log)"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m dftune.demo

# The fast tiers: unit (pure functions, the CLI through typer's runner) and graph (fake model,
# fresh checkpointer). The end-to-end tier (real dftracer, real programs, Slurm, Dask, MPI,
# Chromium) is `make test-e2e`; `make test-all` runs every tier.
test: $(STAMP)
	$(BIN)/python -m pytest -m "not e2e" -n $(TEST_WORKERS) $(XDIST) $(PYTEST_ARGS)

test-e2e: $(STAMP)
	$(BIN)/python -m pytest -m e2e -n $(E2E_WORKERS) $(XDIST) $(PYTEST_ARGS)

test-all: $(STAMP)
	$(BIN)/python -m pytest -n $(E2E_WORKERS) $(XDIST) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tests/layers.py

# The checkout is the package: link it as build/typecheck/dftune so mypy resolves dftune.*.
typecheck: $(STAMP)
	@mkdir -p build/typecheck && ln -sfn ../.. build/typecheck/dftune
	$(BIN)/mypy -p dftune

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_analyze.py

# How long each test tier takes here, and its slowest tests (benchmarks/README.md)
bench-suite: $(STAMP)
	$(BIN)/python benchmarks/bench_suite.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
