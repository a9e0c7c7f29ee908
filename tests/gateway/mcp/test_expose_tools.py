"""exposeTools: inner tools listed under their exposed names, called through the loop's guards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import MCPError

from ..conftest import Running, eventually, make_config, running_gateway
from .test_server import connect


@pytest.fixture
async def exposed() -> AsyncIterator[Running]:
    config = make_config(limits={"toolTimeoutSeconds": 1, "maxResultChars": 50}, expose_tools=True)
    async with running_gateway(config) as gateway:
        yield gateway


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "modern")])
async def test_inner_tools_are_listed_and_called(exposed: Running, transport: str, era: str) -> None:
    async with connect(exposed.url, transport, era) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["agent_query", "echo", "sleep", "write_file"]
        result = await client.call_tool("echo", {"text": "direct"})
    assert not result.is_error and result.content[0].text == "direct"
    metrics = exposed.app.service.metrics
    assert metrics.tool_calls[("echo", "ok")] == 1


async def test_arguments_are_validated(exposed: Running) -> None:
    async with connect(exposed.url, "http", "legacy") as client:
        missing = await client.call_tool("echo", {})
        wrong = await client.call_tool("echo", {"text": ["not", "a", "string"]})
    assert missing.is_error and "text" in missing.content[0].text
    assert wrong.is_error and "text" in wrong.content[0].text
    assert exposed.tools.source.calls == []  # the tool never ran
    assert exposed.app.service.metrics.tool_calls[("echo", "invalid_arguments")] == 2


async def test_results_are_truncated(exposed: Running) -> None:
    async with connect(exposed.url, "http", "modern") as client:
        result = await client.call_tool("echo", {"text": "x" * 500})
    text = result.content[0].text
    assert text.startswith("x" * 50) and "x" * 51 not in text  # cut to maxResultChars, with a note


async def test_calls_time_out(exposed: Running) -> None:
    async with connect(exposed.url, "http", "modern") as client:
        with anyio.fail_after(15):
            result = await client.call_tool("sleep", {"seconds": 30})
    assert result.is_error and "timed out" in result.content[0].text
    assert exposed.app.service.metrics.tool_calls[("sleep", "error")] == 1


@pytest.mark.parametrize("approved", [True, False])
async def test_calls_wait_for_approval(exposed: Running, approved: bool) -> None:
    results: list[Any] = []
    async with (
        connect(exposed.url, "sse", "legacy") as client,
        exposed.client() as http,
        anyio.create_task_group() as tg,
    ):

        async def call() -> None:
            results.append(await client.call_tool("write_file", {"text": "guarded"}))

        tg.start_soon(call)
        pending: list[Any] = []

        async def waiting() -> bool:
            pending[:] = (await http.get("/api/v1/approvals")).json()["pending"]
            return bool(pending)

        await eventually(waiting)
        assert exposed.tools.written == []
        response = await http.post(f"/api/v1/approvals/{pending[0]['id']}", json={"approved": approved})
        assert response.status_code == 200
    [result] = results
    if approved:
        assert result.content[0].text == "written" and exposed.tools.written == ["guarded"]
    else:
        assert result.is_error and result.content[0].text.startswith("[DENIED:")
        assert exposed.tools.written == []


async def test_unknown_inner_tool(exposed: Running) -> None:
    async with connect(exposed.url, "http", "modern") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("nope", {})
    assert (raised.value.code, raised.value.message) == (-32602, "Unknown tool: nope")


async def test_exposed_calls_take_query_slots() -> None:
    """100 exposed calls once ran at once under maxConcurrentQueries 2: now they queue for slots."""
    config = make_config(
        limits={"toolTimeoutSeconds": 30},
        expose_tools=True,
        max_concurrent_queries=2,
        max_queued_queries=100,
    )
    async with running_gateway(config) as gateway:
        running = [0]
        most = [0]

        async def sleep(seconds: float) -> str:
            running[0] += 1
            most[0] = max(most[0], running[0])
            try:
                await anyio.sleep(seconds)
            finally:
                running[0] -= 1
            return "slept"

        gateway.tools.source.add(
            "nap",
            sleep,
            parameters={"type": "object", "properties": {"seconds": {"type": "number"}}},
            server="mem",
        )
        results: list[Any] = []
        async with connect(gateway.url, "http", "legacy") as client, anyio.create_task_group() as tg:
            for _ in range(12):

                async def call() -> None:
                    results.append(await client.call_tool("nap", {"seconds": 0.05}))

                tg.start_soon(call)
        assert [r.content[0].text for r in results] == ["slept"] * 12
        assert most[0] == 2


async def test_waiting_approvals_are_capped() -> None:
    """300 approvals once waited for one caller; beyond approvals.maxPending the call is denied at once."""
    config = make_config(expose_tools=True, max_concurrent_queries=10)
    config = config.model_copy(
        update={"approvals": config.approvals.model_copy(update={"max_pending": 3, "timeout_seconds": 30})}
    )
    async with running_gateway(config) as gateway:
        results: list[Any] = []
        async with (
            connect(gateway.url, "http", "legacy") as client,
            gateway.client() as http,
            anyio.create_task_group() as tg,
        ):
            for index in range(6):

                async def call(index: int = index) -> None:
                    results.append(await client.call_tool("write_file", {"text": f"w{index}"}))

                tg.start_soon(call)
            await eventually(lambda: len(results) == 3)  # the three beyond the cap, at once
            assert all("too many approvals are waiting" in r.content[0].text for r in results)
            pending = (await http.get("/api/v1/approvals")).json()["pending"]
            assert len(pending) == 3
            for item in pending:
                await http.post(f"/api/v1/approvals/{item['id']}", json={"approved": False})
        assert len(results) == 6 and gateway.tools.written == []
