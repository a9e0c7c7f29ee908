"""AgentDojo is installed by ``make test`` (``pip install --no-deps agentdojo`` plus what its suites
import; see the Makefile). Without it these tests skip, saying so, except under CI=true, where
they fail."""

from __future__ import annotations

import importlib.util

from tests._missing import missing

if importlib.util.find_spec("agentdojo") is None:
    missing("AgentDojo is not installed: run `make test` (or `make agentdojo`)", module_level=True)
