"""BFCL is installed by ``make test`` (``pip install --no-deps bfcl-eval`` plus what its checkers
import; see the Makefile). Without it these tests skip, saying so, except under CI=true, where
they fail."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("bfcl_eval") is None:
    message = "BFCL is not installed: run `make test`"
    if os.environ.get("CI") == "true":
        raise RuntimeError(message)
    pytest.skip(message, allow_module_level=True)
