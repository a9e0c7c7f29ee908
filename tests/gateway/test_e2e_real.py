"""The gateway over the real Agent: open_agent, the fake model server, real stdio tool servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from mcp_agent.config import load_config
from tests.fakes.model_server import FakeModelServer, running_model_server

from .conftest import Running, answer_of, eventually, running_gateway
from .e2e import rule_reply, write_config
from .mcp.test_server import connect


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        server.handler = rule_reply
        yield server


@pytest.fixture(scope="module")
async def real_gateway(
    model_server: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Running, Path]]:
    folder = tmp_path_factory.mktemp("real")
    record = folder / "slow.log"
    config = load_config(write_config(folder, model_server.base_url, record))
    from mcp_agent.assembly import open_agent

    async with running_gateway(config, factory=open_agent) as gateway:
        yield gateway, record


async def test_real_agent_end_to_end(real_gateway: tuple[Running, Path]) -> None:
    gateway, _ = real_gateway
    async with connect(gateway.url, "http", "legacy") as client:
        [tool] = (await client.list_tools()).tools
        assert "echo (echo, add)" in tool.description and "slow (sleep, ping)" in tool.description
        result = await client.call_tool("agent_query", {"query": "echo real"})
    assert answer_of(result) == "echo__echo said: real"
    async with gateway.client() as http:
        health = (await http.get("/api/v1/health")).json()
    assert health["servers_up"] == 2 and health["tool_count"] == 4


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "legacy"), ("http", "modern")])
async def test_cancel_mid_run_reaches_the_inner_tool(
    real_gateway: tuple[Running, Path], transport: str, era: str
) -> None:
    gateway, record = real_gateway
    metrics = gateway.app.service.metrics
    cancelled = metrics.queries["cancelled"]
    record.write_text("")
    async with connect(gateway.url, transport, era) as client:
        with anyio.move_on_after(30) as scope:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await client.call_tool("agent_query", {"query": "sleep 30"})

                tg.start_soon(call)
                await eventually(lambda: record.exists() and "started" in record.read_text(), timeout=20)
                tg.cancel_scope.cancel()  # the client gives up: notifications/cancelled (or the stream closes)
        assert not scope.cancelled_caught
        with anyio.fail_after(5):  # "within a second"; generous bound
            await eventually(lambda: metrics.queries["cancelled"] == cancelled + 1)
        await eventually(lambda: "cancelled" in record.read_text().split(), timeout=10)
        assert metrics.in_flight == 0
        # the gateway and the slow server stay usable
        result = await client.call_tool("agent_query", {"query": "echo after"})
        assert answer_of(result) == "echo__echo said: after"
