# Two entry points: `make run` (the daemon against the local sandbox until real tokens are
# configured) and `make test` (lint, types and the test suite). Both create the virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?=
# Test processes: the suite mostly waits on real processes and sockets, so one per core halves
# its time (pytest-xdist; `TEST_WORKERS=0 make test` runs it in one process).
TEST_WORKERS ?= auto

.PHONY: run test lint venv clean system-deps

$(BIN)/bot: pyproject.toml scripts/install-venv
	sh scripts/install-venv $(VENV) -e '.[dev]'
	touch $(BIN)/bot

venv: $(BIN)/bot

run: venv
ifeq ($(CONFIG),)
	$(BIN)/bot sandbox
else
	$(BIN)/bot run -c $(CONFIG)
endif

lint: venv
	$(BIN)/ruff check bot bot_sandbox tests bench
	$(BIN)/ruff format --check bot bot_sandbox tests bench
	$(BIN)/mypy --strict bot bot_sandbox
	$(BIN)/lint-imports

system-deps:
	sh scripts/system-deps

test: lint system-deps
	$(BIN)/pytest -n $(TEST_WORKERS) --durations=15

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
