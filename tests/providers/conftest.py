"""Fixtures for provider tests: the fake model server, an HTTP client, a no-wait sleep."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from mcp_agent.providers.http.lean import ModelClient, lean_transport
from tests.fakes.model_server import FakeModelServer, running_model_server


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    """A fake model server on a free 127.0.0.1 port, fresh for each test."""
    with running_model_server() as server:
        yield server


_SSL = ssl.create_default_context()  # building one per client costs ~150 ms


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    """One pooled client, as the factory builds it (short timeouts: the server is local), so its
    ``http://`` requests go over the lean transport, straight from ``post_stream``
    (``providers/http/lean.py``); its failures are compared with httpx's default transport in
    ``http/test_lean.py``."""
    timeout, limits = httpx.Timeout(10.0), httpx.Limits()
    lean = lean_transport("http://127.0.0.1", trust_env=False, timeout=timeout, limits=limits)
    async with ModelClient(timeout=timeout, trust_env=False, verify=_SSL, lean=lean) as client:
        yield client


class SleepRecorder:
    """An injectable sleep that records the delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()
