"""Shared fixtures. Async tests run on asyncio through anyio's own pytest plugin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the suite's state (``open_agent`` records its tool servers' processes there,
    and caches their tool lists) out of the user's ``~/.local/state``; subprocesses inherit it.
    One folder per test, so that no test starts from another's cached tool lists."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MCP_AGENT_STATE_DIR", str(tmp_path_factory.mktemp("state")))
        yield
