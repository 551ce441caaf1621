# Set-up and the two entry points of the README. `make demo` and `make test` each create the virtual
# environment (.venv) from pyproject.toml on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the test suite runs on pytest-xdist workers, one file per worker at a time (module fixtures and JAX
# compilations stay shared within a file), in collection order (tests/conftest.py puts the longest files
# first); TEST_WORKERS=0 runs it in one process. The 25 slowest tests are listed at the end, to keep the
# run within its time budget.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

.PHONY: demo test test-slow lint wheel-check benchmarks clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(VENV)/.core $@

demo: $(VENV)/.core
	$(BIN)/dpposterior demo

test: $(VENV)/.dev
	$(BIN)/python -m pytest $(PYTEST_PARALLEL)

test-slow: $(VENV)/.dev
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) -m slow

# static checks (settings in pyproject.toml [tool.ruff] and [tool.mypy]): lint, the formatter's check
# and the type check of src
lint: $(VENV)/.dev
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/python -m mypy

# the package as users install it: a wheel, installed (not editable) into a fresh virtual environment,
# `dpposterior --version` and its vendored data checked from outside the checkout (.ci/wheel_check)
wheel-check: | $(BIN)/python
	.ci/wheel_check $(BIN)/python

clean:
	rm -rf $(VENV) demo-output .pytest_cache .hypothesis
