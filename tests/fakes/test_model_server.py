"""The fake model server itself (``tests/fakes/model_server.py``): the provider tests build on it."""

from __future__ import annotations

import anyio
import httpx
import pytest

from mcp_agent.providers.http.answers import aiter_sse
from tests.fakes.model_server import Delay, FakeModelServer, Reply, sse_event


async def test_fake_server_replays_json_and_records(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(Reply.json({"ok": True}, status=201, headers={"x-request-id": "req_9"}))
    response = await http_client.post(
        model_server.base_url + "/chat/completions?a=1",
        json={"model": "m"},
        headers={"Authorization": "Bearer k"},
    )
    assert (response.status_code, response.json(), response.headers["x-request-id"]) == (
        201,
        {"ok": True},
        "req_9",
    )
    request = model_server.last
    assert (request.method, request.path, request.query, request.json) == (
        "POST",
        "/v1/chat/completions",
        "a=1",
        {"model": "m"},
    )
    assert request.headers["authorization"] == "Bearer k"


async def test_fake_server_streams_sse_and_keeps_the_connection(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(
        Reply.sse([{"a": 1}, Delay(0.01), sse_event({"b": 2}, event="x", newline="\r\n"), b": ping\n\n"]),
        Reply.sse([{"c": 3}], done=False),
    )
    for expected in (
        [("message", '{"a": 1}'), ("x", '{"b": 2}'), ("message", "[DONE]")],
        [("message", '{"c": 3}')],
    ):
        async with http_client.stream("POST", model_server.url + "/x", json={}) as response:
            assert response.headers["content-type"] == "text/event-stream"
            assert [(e.event, e.data) async for e in aiter_sse(response.aiter_bytes())] == expected
    assert model_server.connections == 1


async def test_fake_server_abrupt_close_and_drop(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(Reply.sse([{"a": 1}, {"b": 2}], abort_after=1), Reply(drop=True))
    got = []
    with pytest.raises(httpx.RemoteProtocolError):
        async with http_client.stream("POST", model_server.url, json={}) as response:
            async for event in aiter_sse(response.aiter_bytes()):
                got.append(event.data)
    assert got == ['{"a": 1}']
    with pytest.raises(httpx.RemoteProtocolError):
        await http_client.post(model_server.url, json={})


async def test_fake_server_handler_and_default(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    assert (await http_client.get(model_server.url)).status_code == 500
    model_server.handler = lambda request: Reply.json({"path": request.path})
    assert (await http_client.get(model_server.url + "/v1/models")).json() == {"path": "/v1/models"}


async def test_fake_server_sees_the_client_go(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(Reply.sse([{"a": 1}, Delay(0.3), {"b": 2}, Delay(0.3), {"c": 3}]))
    with anyio.fail_after(20):
        async with http_client.stream("POST", model_server.url, json={}) as response:
            async for _ in aiter_sse(response.aiter_bytes()):
                break
        while model_server.disconnects == 0:
            await anyio.sleep(0.05)
