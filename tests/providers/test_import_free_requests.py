"""A model request searches for no module: every import its HTTP stack makes per request is one
that is there (a missing one is searched for on sys.path again on every attempt, ~60 µs each;
httpcore imports sniffio on every request and connection step, hence the dependency)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import httpx
import pytest

from tests.fakes import openai_shapes as shapes
from tests.fakes.model_server import FakeModelServer, Reply
from tests.providers.conftest import SleepRecorder
from tests.providers.openai.test_provider import REQUEST, make


class Searches:
    """A finder first on ``sys.meta_path`` that notes each module searched for and finds none."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        self.names.append(fullname)
        return None


@pytest.fixture
def searches() -> Iterator[Searches]:
    finder = Searches()
    sys.meta_path.insert(0, finder)
    try:
        yield finder
    finally:
        sys.meta_path.remove(finder)


async def test_model_requests_search_for_no_module(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder, searches: Searches
) -> None:
    provider = make(model_server, http_client, sleeps, stream=False)
    model_server.enqueue(*(Reply.json(shapes.completion(content=f"Hi {n}.")) for n in range(3)))
    assert (await provider.complete(REQUEST)).content == "Hi 0."  # the first: imports on first use
    searches.names.clear()
    for n in (1, 2):
        assert (await provider.complete(REQUEST)).content == f"Hi {n}."
    assert searches.names == []
