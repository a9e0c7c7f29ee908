"""AgentDojo is installed by ``make test`` (``pip install --no-deps agentdojo`` plus what its suites
import; see the Makefile). Without it these tests skip, saying so, except under CI=true, where
they fail."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("agentdojo") is None:
    message = "AgentDojo is not installed: run `make test` (or `make agentdojo`)"
    if os.environ.get("CI") == "true":
        raise RuntimeError(message)
    pytest.skip(message, allow_module_level=True)
