"""Slow and idle connections, the connection cap, and the cap on open MCP sessions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import CallerConfig

from .conftest import Running, eventually, make_config, running_gateway, sse_events

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
STREAMABLE = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def raw(port: int) -> AsyncIterator[anyio.abc.SocketStream]:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        yield stream


async def read_all(stream: anyio.abc.SocketStream, bound: float = 10) -> bytes:
    """Everything until the server closes (bounded: a "does not hang" limit)."""
    data = b""
    with anyio.fail_after(bound):
        try:
            while True:
                data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
            return data


def open_connections(gateway: Running) -> int:
    return gateway.app.drain.open_requests()


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n",  # half the headers (slowloris)
        b"POST /api/v1/query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"query":',  # a body that never completes
    ],
    ids=["silent", "half-headers", "half-body"],
)
async def test_a_request_that_does_not_arrive_in_time_is_closed_with_408(sent: bytes) -> None:
    async with running_gateway(make_config(read_timeout_seconds=0.5)) as gateway, raw(gateway.port) as stream:
        if sent:
            await stream.send(sent)
        answer = await read_all(stream)
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout")
        assert b"gateway.readTimeoutSeconds" in answer
        assert gateway.model.calls == 0


async def test_a_slowloris_drip_does_not_reset_the_deadline() -> None:
    async with running_gateway(make_config(read_timeout_seconds=0.6)) as gateway, raw(gateway.port) as stream:
        closed = False
        with anyio.fail_after(10):
            for byte in b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\nX-Drip: " + b"a" * 200:
                try:
                    await stream.send(bytes([byte]))
                except (anyio.BrokenResourceError, ConnectionResetError, OSError):
                    closed = True
                    break
                await anyio.sleep(0.05)
        if not closed:
            assert (await read_all(stream)).startswith(b"HTTP/1.1 408")


async def test_long_responses_and_keep_alive_are_not_cut_by_the_read_deadline() -> None:
    async with running_gateway(make_config(read_timeout_seconds=0.3)) as gateway, gateway.client() as http:
        # a stream that lasts longer than the read deadline keeps delivering
        events: list[str] = []
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                async with http.stream("GET", "/api/v1/events") as response:
                    async for kind, _ in sse_events(response):
                        events.append(kind)

            tg.start_soon(listen)
            await eventually(lambda: gateway.app.service.bus.listeners == 1)
            await anyio.sleep(0.8)
            answer = await http.post("/api/v1/query", json={"query": "hello"})
            assert answer.json()["answer"] == "answer: hello"
            await eventually(lambda: "run_ended" in events)
            tg.cancel_scope.cancel()
        # a kept-alive connection used again after a pause shorter than uvicorn's keep-alive
        await anyio.sleep(0.5)
        assert (await http.get("/api/v1/health")).status_code == 200


async def test_connections_beyond_the_cap_get_503_at_once() -> None:
    async with running_gateway(make_config(max_connections=4, read_timeout_seconds=30)) as gateway:
        held = [await anyio.connect_tcp("127.0.0.1", gateway.port) for _ in range(4)]
        try:
            async with raw(gateway.port) as extra:
                answer = await read_all(extra)
            assert answer.startswith(b"HTTP/1.1 503")
            assert b"gateway.maxConnections" in answer
        finally:
            for stream in held:
                await stream.aclose()
        async with gateway.client() as http:  # room again once they are gone
            await eventually(lambda: _health_ok(gateway))
            assert (await http.get("/api/v1/health")).status_code == 200


async def _health_ok(gateway: Running) -> bool:
    try:
        async with gateway.client() as http:
            return (await http.get("/api/v1/health")).status_code == 200
    except httpx.HTTPError:
        return False


async def test_many_half_open_sockets_do_not_starve_health() -> None:
    """500 half-sent requests once held their sockets for 70 s and starved health."""
    async with running_gateway(make_config(read_timeout_seconds=1)) as gateway:
        streams = []
        try:
            for _ in range(200):
                stream = await anyio.connect_tcp("127.0.0.1", gateway.port)
                await stream.send(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n")
                streams.append(stream)
            async with gateway.client() as http:
                assert (await http.get("/api/v1/health")).status_code == 200

            async def all_closed() -> bool:
                for stream in streams:
                    with anyio.move_on_after(0.01):
                        try:
                            await stream.receive()
                        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
                            continue
                    return False
                return True

            await eventually(all_closed, timeout=15)
        finally:
            for stream in streams:
                await stream.aclose()


# ---------------------------------------------------------------------------------------------- MCP sessions


async def open_http_session(http: httpx.AsyncClient, headers: dict[str, str] | None = None) -> httpx.Response:
    return await http.post("/mcp", json=INIT, headers={**STREAMABLE, **(headers or {})})


async def test_open_mcp_sessions_are_capped_with_a_clear_answer() -> None:
    """One client once opened 10,000 sessions and locked every other client out for 30 minutes."""
    async with running_gateway(make_config(max_mcp_sessions=3)) as gateway, gateway.client() as http:
        opened = [await open_http_session(http) for _ in range(2)]
        assert all(response.status_code == 200 for response in opened)
        async with http.stream("GET", "/sse") as sse:  # an SSE connection counts too
            assert sse.status_code == 200
            refused = await open_http_session(http)
            assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
            assert (
                "too many open MCP sessions (3, gateway.maxMcpSessions)" in refused.json()["error"]["message"]
            )
            async with http.stream("GET", "/mcp/sse") as second:
                assert second.status_code == 429
        # closing one makes room
        await http.delete("/mcp", headers={"mcp-session-id": opened[0].headers["mcp-session-id"]})
        await eventually(lambda: sum(gateway.app.mcp_sessions.open_sessions().values()) == 1)
        assert (await open_http_session(http)).status_code == 200
        # a 2026-era request opens no session: never refused by the cap
        modern = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
            headers={**STREAMABLE, "mcp-protocol-version": "2026-07-28"},
        )
        assert modern.status_code != 429


async def test_a_new_client_gets_in_by_closing_the_session_idle_the_longest() -> None:
    """With one caller, a client that opened every session locked all others out for 30 minutes."""
    async with running_gateway(make_config(max_mcp_sessions=3)) as gateway, gateway.client() as http:
        limits = gateway.app.mcp_sessions
        hoarded = [(await open_http_session(http)).headers["mcp-session-id"] for _ in range(3)]
        # nothing has been idle long enough yet: refused, saying so
        refused = await open_http_session(http)
        assert refused.status_code == 429 and "none idle" in refused.json()["error"]["message"]
        limits.evict_after_idle = 0.3
        await anyio.sleep(0.4)
        # the first session is used again (a ping): the second is now the one idle the longest
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        headers = {**STREAMABLE, "mcp-session-id": hoarded[0], "mcp-protocol-version": "2025-11-25"}
        assert (await http.post("/mcp", json=ping, headers=headers)).status_code == 200
        newcomer = await open_http_session(http)
        assert newcomer.status_code == 200
        assert sum(limits.open_sessions().values()) == 3
        headers["mcp-session-id"] = hoarded[1]
        assert (await http.post("/mcp", json=ping, headers=headers)).status_code == 404  # it was closed
        headers["mcp-session-id"] = hoarded[0]
        assert (await http.post("/mcp", json=ping, headers=headers)).status_code == 200  # it was not
        # a session busy with a request (an open GET stream) is never closed to make room
        async with http.stream("GET", "/mcp", headers={**headers, "Accept": "text/event-stream"}) as held:
            assert held.status_code == 200
            await anyio.sleep(0.4)
            third = await open_http_session(http)  # closes hoarded[2], idle; never hoarded[0]
            assert third.status_code == 200
            headers["mcp-session-id"] = hoarded[2]
            assert (await http.post("/mcp", json=ping, headers=headers)).status_code == 404


async def test_each_caller_holds_at_most_its_share_of_mcp_sessions() -> None:
    callers = {"alice": CallerConfig(token="A" * 20), "bob": CallerConfig(token="B" * 20)}
    config = make_config(callers=callers, max_mcp_sessions=4)  # share: 3 each
    alice, bob = {"Authorization": "Bearer " + "A" * 20}, {"Authorization": "Bearer " + "B" * 20}
    async with running_gateway(config) as gateway, gateway.client() as http:
        assert [(await open_http_session(http, alice)).status_code for _ in range(3)] == [200] * 3
        refused = await open_http_session(http, alice)
        assert refused.status_code == 429 and "caller 'alice' holds 3" in refused.json()["error"]["message"]
        assert (await open_http_session(http, bob)).status_code == 200  # bob is not locked out
        counts: Any = gateway.app.mcp_sessions.open_sessions()
        assert counts == {"alice": 3, "bob": 1}


def test_the_sdk_bookkeeping_the_cap_reads_is_still_there() -> None:
    """``http_sessions_by_caller`` reads two private dicts of the SDK's session manager."""
    from mcp.server import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=Server("x"))
    assert isinstance(manager._server_instances, dict)
    assert isinstance(manager._session_owners, dict)
