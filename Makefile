# Two commands for a newcomer: `make run` and `make test`. Each sets itself up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFIG ?= agent.json

.PHONY: run test bench lint clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/mcp-agent serve --config $(CONFIG)

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b" >&2; $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
