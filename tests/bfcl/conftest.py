"""BFCL is installed by ``make test`` (``pip install --no-deps bfcl-eval`` plus what its checkers
import; see the Makefile). Without it these tests skip, saying so, except under CI=true, where
they fail."""

from __future__ import annotations

import importlib.util

from tests._missing import missing

if importlib.util.find_spec("bfcl_eval") is None:
    missing("BFCL is not installed: run `make test`", module_level=True)
