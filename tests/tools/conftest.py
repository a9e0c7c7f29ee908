"""Fixtures for the tool-server tests: fixture servers as configs, remote servers, process checks."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from mcp_agent.config import StdioServerConfig
from mcp_agent.tools.server.connection import RestartPolicy

SERVERS = Path(__file__).resolve().parent.parent / "servers"

FAST_RESTARTS = RestartPolicy(first_delay=0.05, max_delay=0.2, max_restarts=5, window_seconds=300)
"""Restart quickly in tests; the budget is the real one."""


def server(script: str, **options: Any) -> StdioServerConfig:
    """A stdio config running ``tests/servers/<script>`` with this interpreter."""
    return StdioServerConfig(command=sys.executable, args=[str(SERVERS / script)], **options)


def alive(pids: Iterable[int]) -> list[int]:
    """The pids that still run. Zombies count as gone: their parent (PID 1 here) reaps them."""
    running = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
        except psutil.NoSuchProcess:
            pass
    return running


def children_of_us() -> set[int]:
    """Pids of every live descendant of this test process."""
    return {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}


class _Uvicorn:
    """uvicorn serving an ASGI app in a thread, on a free 127.0.0.1 port."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(
            app, interface="asgi3", log_level="warning", lifespan="on", timeout_graceful_shutdown=1
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> _Uvicorn:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                break
            threading.Event().wait(0.01)
        else:
            raise RuntimeError("uvicorn did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Shut the server down (idempotent)."""
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


class Remote:
    """A running remote echo server: its URL and the Authorization headers it received."""

    def __init__(self, app: Any, path: str) -> None:
        self.authorizations: list[str] = []
        self._app = app
        self.running = _Uvicorn(self._record)
        self.url = f"http://127.0.0.1:{self.running.port}{path}"

    async def _record(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for key, value in scope["headers"]:
                if key == b"authorization":
                    self.authorizations.append(value.decode())
        await self._app(scope, receive, send)


@pytest.fixture
def http_echo() -> Iterator[Remote]:
    """A fresh echo server (tests/servers/echo.py) over Streamable HTTP at ``/mcp``."""
    from tests.servers.echo import build

    remote = Remote(build().streamable_http_app(), "/mcp")
    with remote.running:
        yield remote


@pytest.fixture
def sse_echo() -> Iterator[Remote]:
    """A fresh echo server (tests/servers/echo.py) over SSE at ``/sse``."""
    from tests.servers.echo import build

    remote = Remote(build().sse_app(), "/sse")
    with remote.running:
        yield remote
