"""Start-up failure and graceful shutdown of the app, in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx

from .conftest import eventually, running_gateway, sse_events
from .test_mcp import connect


async def test_an_agent_that_fails_to_start_is_reported() -> None:
    @asynccontextmanager
    async def broken(config: Any) -> AsyncIterator[Any]:
        raise RuntimeError("model client could not be built")
        yield  # pragma: no cover

    async with running_gateway(factory=broken) as gateway:
        async with gateway.client() as http:
            health = await http.get("/api/v1/health")
            assert health.status_code == 503
            assert health.json()["status"] == "failed"
            assert "model client could not be built" in health.json()["error"]
            query = await http.post("/api/v1/query", json={"query": "hi"})
            assert query.status_code == 503 and query.json()["error"]["type"] == "failed"
        async with connect(gateway.url, "http", "legacy") as client:
            [tool] = (await client.list_tools()).tools  # still listed, with no tools inside
            assert "no tools at the moment" in tool.description
            result = await client.call_tool("agent_query", {"query": "hi"})
        assert result.is_error and result.content[0].text.startswith("Agent unavailable (failed):")


async def test_shutdown_cancels_queries_ends_streams_and_refuses_new_work() -> None:
    async with running_gateway() as gateway:
        app = gateway.app
        answers: list[Any] = []
        events: list[str] = []
        stream_ended = anyio.Event()
        async with gateway.client() as http, anyio.create_task_group() as tg:

            async def listen() -> None:
                async with http.stream("GET", "/api/v1/events") as response:
                    async for kind, _ in sse_events(response):
                        events.append(kind)
                stream_ended.set()

            async def mcp_query() -> None:
                async with connect(gateway.url, "sse", "legacy") as client:
                    answers.append(await client.call_tool("agent_query", {"query": "sleep 60"}))

            tg.start_soon(listen)
            await eventually(lambda: app.service.bus.listeners == 1)
            tg.start_soon(mcp_query)
            await eventually(lambda: gateway.tools.sleeping.is_set())
            with anyio.fail_after(10):
                await app.shutdown()
                await stream_ended.wait()
            await eventually(lambda: len(answers) == 1)
            refused = await http.get("/api/v1/health")
            assert refused.status_code == 503
            assert refused.json()["error"]["type"] == "shutting_down"
        [result] = answers
        assert result.is_error
        assert result.content[0].text.startswith(
            "Agent terminated (cancelled): cancelled: the gateway is shutting down"
        )
        assert events[-1] == "run_ended"
        assert gateway.tools.cancelled == [60.0]
        assert app.drain.open_requests() == 0


async def test_open_mcp_streams_do_not_hold_shutdown() -> None:
    async with (
        running_gateway() as gateway,
        connect(gateway.url, "sse", "legacy") as sse_client,
        connect(gateway.url, "http", "legacy") as http_client,
    ):
        await sse_client.list_tools()
        await http_client.list_tools()
        await anyio.sleep(0.2)  # the Streamable HTTP client opens its GET stream
        assert gateway.app.drain.open_requests(streams=True) >= 1
        with anyio.fail_after(5):
            await gateway.app.shutdown()
        await eventually(lambda: gateway.app.drain.open_requests() == 0)
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{gateway.url}/api/v1/tools")).status_code == 503
