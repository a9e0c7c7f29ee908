"""Fixtures for the OAuth tests: a protected MCP server with its authorization server, and the
headless browser that ``mcp-agent login`` opens."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers.oauth_protected import AutoApprove, build
from tests.tools.conftest import _Uvicorn

BROWSER = f"{sys.executable} {Path(__file__).resolve().parent / 'browser.py'}"
"""``$MCP_AGENT_BROWSER`` for the tests: follows the authorization redirect, no person."""


class _Late:
    """An ASGI app set once the port is known (the server's metadata names its own URL)."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


class Protected:
    """The running protected server: its URL (``/mcp``) and its authorization server."""

    def __init__(self) -> None:
        late = _Late()
        self.running = _Uvicorn(late)
        late.app, self.provider = build(self.running.port, AutoApprove())
        self.url = f"http://127.0.0.1:{self.running.port}/mcp"


@pytest.fixture
def protected() -> Iterator[Protected]:
    server = Protected()
    with server.running:
        yield server


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MCP_AGENT_BROWSER", BROWSER)
    return BROWSER
