"""The state backends the contract suite runs against.

``BACKENDS`` maps a name to a factory of ``Backend``; the ``backend`` fixture is parametrised
over it. A backend needing a server (Redis) adds its own entry, whose factory may
``pytest.skip`` when the server is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from mcp_agent.state import State, StateLimits, open_state
from tests.scale.infra import RedisServer

LIMITS = StateLimits(lease_seconds=3)
"""The contract suite's limits: a short lease, so a lapsed lease is seen soon."""


@dataclass
class Backend:
    """One backend under test.

    Attributes:
        name: ``memory``, ``sqlite``, ``redis``.
        url: the ``state.url`` every ``open`` shares.
        shared: several States opened on ``url`` see the same data (replicas); memory's do not.
    """

    name: str
    url: str
    shared: bool
    opened: list[State] = field(default_factory=list)

    async def open(self, *, replica: str | None = None, **limits: Any) -> State:
        state = await open_state(self.url, limits=replace(LIMITS, **limits), replica=replica)
        self.opened.append(state)
        return state

    async def close_all(self) -> None:
        for state in reversed(self.opened):
            await state.aclose()


def _memory(tmp_path: Path) -> Backend:
    return Backend("memory", "memory://", shared=False)


def _sqlite(tmp_path: Path) -> Backend:
    return Backend("sqlite", f"sqlite:///{tmp_path}/state.db", shared=True)


@dataclass
class RedisBackend(Backend):
    """A ``redis-server`` of the test's own (``tests/scale/infra.py``), stopped with the states."""

    server: RedisServer | None = None

    async def close_all(self) -> None:
        try:
            await super().close_all()
        finally:
            if self.server is not None:
                self.server.stop()


def _redis(tmp_path: Path) -> Backend:
    server = RedisServer(tmp_path, persist=False)  # skips (fails under CI=true) without redis-server
    server.start()
    return RedisBackend("redis", server.url, shared=True, server=server)


BACKENDS: dict[str, Callable[[Path], Backend | Awaitable[Backend]]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "redis": _redis,
}


@pytest.fixture(params=sorted(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = BACKENDS[request.param](tmp_path)
    found = made if isinstance(made, Backend) else await made
    try:
        yield found
    finally:
        await found.close_all()


@pytest.fixture
async def state(backend: Backend) -> State:
    return await backend.open()
