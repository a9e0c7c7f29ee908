"""What a test does when something it needs is not installed: it skips, saying how to install it,
except under ``CI=true``, where it fails (CI must run every tier, not skip one)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(why: str, *, module_level: bool = False) -> NoReturn:
    """Skip with ``why`` (at module level too, with ``module_level``); fail with it under CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI=true: this must run, not skip)", pytrace=False)
    pytest.skip(why, allow_module_level=module_level)
