# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test test-e2e test-all lint typecheck bench bench-suite clean venv

venv: $(STAMP)

# Re-install only when the project metadata or the native trace reader changes.
$(STAMP): pyproject.toml setup.py tools/trace/_fastscan.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@rm -f tools/trace/_fastscan*.so  # a failed (optional) rebuild must not leave a stale extension
	@echo "installing dftune and its dependencies into $(VENV) (log: $(VENV)/install.log)"
	@$(BIN)/python -m pip install --quiet -e '.[dev]' > $(VENV)/install.log 2>&1 \
		|| { cat $(VENV)/install.log; echo "pip install failed (log: $(VENV)/install.log)"; exit 1; }
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m dftune.demo

# The fast tiers: unit (pure functions, the CLI through typer's runner) and graph (fake model,
# fresh checkpointer). The end-to-end tier (real dftracer, real programs, Slurm, Dask, MPI,
# Chromium) is `make test-e2e`; `make test-all` runs every tier.
test: $(STAMP)
	$(BIN)/python -m pytest -m "not e2e" $(PYTEST_ARGS)

test-e2e: $(STAMP)
	$(BIN)/python -m pytest -m e2e $(PYTEST_ARGS)

test-all: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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
