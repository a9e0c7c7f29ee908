"""The lean HTTP/1.1 transport of the raw calls (``tools/server/lean_http.py``).

Its happy path runs in every raw-call test (``test_raw_call.py``: JSON and SSE answers, error
statuses, redirects, timeouts, a server dying, the body cap). Here: when it may be used at all,
and what it does with a connection that went wrong, each against a real socket on 127.0.0.1
served by a scripted HTTP/1.1 server in this process (``Scripted``): one behaviour per request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import pytest

from mcp_agent.tools.server.lean_http import LeanTransport, usable
from mcp_agent.tools.server.raw_call import RawCaller

Behaviour = Callable[[anyio.abc.SocketStream], Awaitable[bool]]
"""Answers one request on the stream; True: keep the connection for the next request."""


def _answer(body: bytes, *, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + extra
        + b"content-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


async def _read_request(stream: anyio.abc.SocketStream) -> bytes:
    """One whole request (head and a ``content-length`` body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        body += await stream.receive()
    return head


class Scripted:
    """An HTTP/1.1 server answering its requests in turn with ``behaviours``; counts connections."""

    def __init__(self, behaviours: list[Behaviour]) -> None:
        self.behaviours = list(behaviours)
        self.connections = 0
        self.closed = 0
        self.closing = anyio.Event()
        self.heads: list[bytes] = []

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        try:
            async with stream:
                while self.behaviours:
                    try:
                        self.heads.append(await _read_request(stream))
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                    if not await self.behaviours.pop(0)(stream):
                        return
        finally:
            self.closed += 1
            self.closing.set()


@asynccontextmanager
async def serving(behaviours: list[Behaviour]) -> AsyncIterator[tuple[Scripted, str]]:
    server = Scripted(behaviours)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, server.handle)
        yield server, f"http://127.0.0.1:{port}/mcp"
        tg.cancel_scope.cancel()


def answer(body: bytes) -> Behaviour:
    async def behave(stream: anyio.abc.SocketStream) -> bool:
        await stream.send(_answer(body))
        return True

    return behave


def answer_then_close(body: bytes) -> Behaviour:
    """Answers with keep-alive headers, then closes the connection (an idle timeout)."""

    async def behave(stream: anyio.abc.SocketStream) -> bool:
        await stream.send(_answer(body))
        return False

    return behave


def cut_in_body() -> Behaviour:
    """Announces ten bytes, sends three, and closes."""

    async def behave(stream: anyio.abc.SocketStream) -> bool:
        await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        return False

    return behave


def silent() -> Behaviour:
    async def behave(stream: anyio.abc.SocketStream) -> bool:
        await anyio.sleep_forever()
        return False

    return behave


async def post(transport: LeanTransport, url: str) -> httpx2.Response:
    """A POST that carries no timeouts of its own, so the transport's apply."""
    async with httpx2.AsyncClient() as http:
        request = http.build_request("POST", url, json={"n": 1})
    del request.extensions["timeout"]  # the client's default (5 s) would win over the transport's
    return await transport.handle_async_request(request)


async def body_of(transport: LeanTransport, url: str) -> bytes:
    response = await post(transport, url)
    try:
        return await response.aread()
    finally:
        await response.aclose()


TIMEOUT = httpx2.Timeout(10.0)


def test_used_only_where_the_clients_layers_have_nothing_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    plain = httpx2.AsyncClient()
    assert usable(plain, "http://127.0.0.1:1/mcp")
    assert not usable(plain, "https://127.0.0.1:1/mcp")
    assert usable(
        httpx2.AsyncClient(auth=("user", "secret")), "http://127.0.0.1:1/mcp"
    )  # the flow runs around it
    with_cookie = httpx2.AsyncClient()
    with_cookie.cookies.set("session", "1")
    assert not usable(with_cookie, "http://127.0.0.1:1/mcp")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    assert not usable(httpx2.AsyncClient(), "http://127.0.0.1:1/mcp")
    assert usable(httpx2.AsyncClient(trust_env=False), "http://127.0.0.1:1/mcp")


async def test_a_connection_is_kept_and_reused() -> None:
    async with serving([answer(b"1"), answer(b"2"), answer(b"3")]) as (server, url):
        transport = LeanTransport(TIMEOUT)
        assert [await body_of(transport, url) for _ in range(3)] == [b"1", b"2", b"3"]
        await transport.aclose()
    assert server.connections == 1
    head = server.heads[0].lower()
    assert b"host: 127.0.0.1:" in head and b"content-length: 7" in head and head.startswith(b"post /mcp ")


async def test_a_connection_the_server_closed_is_not_reused() -> None:
    async with serving([answer_then_close(b"1"), answer(b"2")]) as (server, url):
        transport = LeanTransport(TIMEOUT)
        assert await body_of(transport, url) == b"1"
        await server.closing.wait()  # the server closed its side: the connection is idle and dead
        assert await body_of(transport, url) == b"2"
        await transport.aclose()
    assert server.connections == 2


async def test_a_response_closed_before_its_end_loses_its_connection() -> None:
    async with serving([answer(b"unread body"), answer(b"2")]) as (server, url):
        transport = LeanTransport(TIMEOUT)
        response = await post(transport, url)
        await response.aclose()  # nothing of the body read: its bytes are still on the connection
        assert await body_of(transport, url) == b"2"
        await transport.aclose()
    assert server.connections == 2


async def test_a_body_cut_short_fails_and_the_next_request_gets_a_new_connection() -> None:
    async with serving([cut_in_body(), answer(b"2")]) as (server, url):
        transport = LeanTransport(TIMEOUT)
        with pytest.raises(httpx2.RemoteProtocolError):
            await body_of(transport, url)
        assert await body_of(transport, url) == b"2"
        await transport.aclose()
    assert server.connections == 2


async def test_no_server_is_a_connect_error() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    transport = LeanTransport(TIMEOUT)
    with pytest.raises(httpx2.ConnectError):
        await body_of(transport, f"http://127.0.0.1:{port}/mcp")


async def test_a_silent_server_is_a_read_timeout() -> None:
    async with serving([silent()]) as (_, url):
        transport = LeanTransport(httpx2.Timeout(10.0, read=0.2))
        with pytest.raises(httpx2.ReadTimeout):
            await body_of(transport, url)
        await transport.aclose()


async def test_requests_past_max_connections_wait_for_a_slot() -> None:
    async with serving([answer(b"1"), answer(b"2")]) as (server, url):
        transport = LeanTransport(httpx2.Timeout(10.0, pool=0.2), max_connections=1)
        first = await post(transport, url)  # holds the only slot until its body is closed
        with pytest.raises(httpx2.PoolTimeout):
            await body_of(transport, url)
        assert await first.aread() == b"1"
        await first.aclose()
        assert await body_of(transport, url) == b"2"
        await transport.aclose()
    assert server.connections == 1


async def test_a_cancelled_request_gives_its_slot_back() -> None:
    async with serving([silent(), answer(b"2")]) as (server, url):
        transport = LeanTransport(httpx2.Timeout(10.0, pool=5.0), max_connections=1)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(body_of, transport, url)
                while not server.heads:  # the request arrived: it waits for its answer now
                    await anyio.sleep(0.01)
                scope.cancel()
        assert await body_of(transport, url) == b"2"
        await transport.aclose()
    assert server.connections == 2


async def test_a_closed_transport_refuses() -> None:
    transport = LeanTransport(TIMEOUT)
    await transport.aclose()
    with pytest.raises(httpx2.ConnectError):
        await body_of(transport, "http://127.0.0.1:1/mcp")


def rpc_answer(*, cookie: bool) -> Behaviour:
    """A JSON-RPC ``tools/call`` result (id 1, then 2, ...), with a ``Set-Cookie`` when asked."""
    count = [0]

    async def behave(stream: anyio.abc.SocketStream) -> bool:
        count[0] += 1
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": count[0],
                "result": {"content": [{"type": "text", "text": "ok"}], "resultType": "complete"},
            }
        ).encode()
        await stream.send(_answer(body, extra=b"set-cookie: session=s1; Path=/\r\n" if cookie else b""))
        return True

    return behave


def raw_caller(http: httpx2.AsyncClient, url: str) -> RawCaller:
    async def ignore(_: Any) -> None:
        return None

    return RawCaller(
        server="srv",
        url=url,
        http=http,
        version="2026-07-28",
        client_info=types.Implementation(name="test", version="0"),
        capabilities={},
        log_level=None,
        max_event_size=None,
        known_tools={},
        repair=lambda result: result,
        on_log=ignore,
        on_message=ignore,
        ended=anyio.Event(),
    )


async def test_a_cookie_the_server_sets_is_kept_and_later_calls_carry_it() -> None:
    """A lean answer's ``Set-Cookie`` goes into the client's jar; the next call goes the client's
    way, which sends it (the lean transport keeps no cookies)."""
    second = rpc_answer(cookie=False)
    async with serving([rpc_answer(cookie=True), second]) as (server, url):
        async with httpx2.AsyncClient(trust_env=False) as http:
            caller = raw_caller(http, url)
            for _ in range(2):
                result = await caller.call_tool("echo", {})
                assert isinstance(result, types.CallToolResult)
            await caller.aclose()
        assert http.cookies.get("session") == "s1"
    assert b"cookie: session=s1" not in server.heads[0].lower()
    assert b"cookie: session=s1" in server.heads[1].lower()


def unauthorized() -> Behaviour:
    """A 401 with a body, keeping the connection."""

    async def behave(stream: anyio.abc.SocketStream) -> bool:
        body = b'{"error": "invalid_token"}'
        await stream.send(
            b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\ncontent-length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        return True

    return behave


class RetryingAuth(httpx2.Auth):
    """Sends a stale token; on a 401, one retry with a fresh one (as a refresh would)."""

    async def async_auth_flow(self, request: httpx2.Request) -> Any:
        request.headers["Authorization"] = "Bearer stale"
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = "Bearer fresh"
            yield request


def refusing_transport(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError("the call went through the client's own transport")


async def test_the_clients_auth_runs_its_flow_around_the_lean_transport() -> None:
    """A client with auth (a remote server's OAuth client) still takes the lean way: its flow's
    requests go on the kept connection, the 401 read to its end before the retry."""
    async with serving([unauthorized(), rpc_answer(cookie=False)]) as (server, url):
        transport = httpx2.MockTransport(refusing_transport)
        async with httpx2.AsyncClient(auth=RetryingAuth(), transport=transport, trust_env=False) as http:
            caller = raw_caller(http, url)
            result = await caller.call_tool("echo", {})
            await caller.aclose()
        assert isinstance(result, types.CallToolResult) and result.content[0].text == "ok"  # type: ignore[union-attr]
    assert [head.lower().split(b"authorization: ")[1].split(b"\r\n")[0] for head in server.heads] == [
        b"bearer stale",
        b"bearer fresh",
    ]
    assert server.connections == 1


async def test_credentials_in_the_url_do_not_replace_what_the_clients_auth_set() -> None:
    """A client with auth of its own (``oauth`` configured) and a URL with credentials in it: the
    flow's header goes out, not HTTP Basic from the URL (as the client's own ``send`` does)."""
    async with serving([rpc_answer(cookie=False)]) as (server, url):
        with_credentials = url.replace("http://", "http://user:secret@", 1)
        async with httpx2.AsyncClient(auth=RetryingAuth(), trust_env=False) as http:
            caller = raw_caller(http, with_credentials)
            result = await caller.call_tool("echo", {})
            await caller.aclose()
        assert isinstance(result, types.CallToolResult)
    assert b"authorization: bearer stale" in server.heads[0].lower()
