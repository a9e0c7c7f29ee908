# Two commands for a newcomer: `make run` and `make test`. Each sets itself up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFIG ?= agent.json

.PHONY: run test test-bundled-latest bench lint clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/mcp-agent serve --config $(CONFIG)

test: $(STAMP)
	$(BIN)/python -m pytest -q

# The bundled servers against the newest versions pip resolves today (not what .venv happened to
# get): a throwaway venv, made anew each time, catches a dependency that a new release dropped.
VENV_LATEST := .venv-latest
test-bundled-latest:
	rm -rf $(VENV_LATEST)
	$(PYTHON) -m venv $(VENV_LATEST)
	$(VENV_LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_LATEST)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[test]'
	@$(VENV_LATEST)/bin/python -m pip list --format=freeze 2>/dev/null \
		| grep -iE '^(mcp|httpx|anyio|pydantic|psutil|trafilatura|justext|lxml|lxml.html.clean)==' >&2 || true
	$(VENV_LATEST)/bin/python -m pytest -q tests/test_bundled_servers.py tests/bundled

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b" >&2; $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) $(VENV_LATEST) .pytest_cache build *.egg-info
