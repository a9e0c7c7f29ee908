"""Shared fixtures. Async tests run on asyncio through anyio's own pytest plugin."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
