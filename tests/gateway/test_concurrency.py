"""Many clients at once, each with its own answer; full slots queue, then "busy"."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from .conftest import Running, answer_of, eventually, make_config, running_gateway
from .mcp.test_server import connect


async def test_fifty_concurrent_clients_each_get_their_own_answer() -> None:
    async with running_gateway(make_config(max_concurrent_queries=64)) as gateway:
        await _fifty(gateway)


async def _fifty(gateway: Running) -> None:
    answers: dict[int, str] = {}

    async def one(index: int) -> None:
        transport, era = [("http", "modern"), ("http", "legacy"), ("sse", "legacy"), ("sse", "modern")][
            index % 4
        ]
        async with connect(gateway.url, transport, era) as client:
            result = await client.call_tool("agent_query", {"query": f"echo client-{index}"})
            answers[index] = answer_of(result)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for index in range(50):
                tg.start_soon(one, index)
    assert answers == {index: f"echo said: client-{index}" for index in range(50)}
    assert gateway.app.service.metrics.queries["success"] == 50


@pytest.mark.parametrize("surface", ["mcp", "rest"])
async def test_full_slots_queue_then_busy_when_the_queue_is_full(surface: str) -> None:
    config = make_config(max_concurrent_queries=2, max_queued_queries=1, queue_timeout_seconds=30)
    async with running_gateway(config) as gateway:
        service = gateway.app.service
        async with gateway.client() as http, anyio.create_task_group() as tg:
            queued: list[Any] = []

            async def slow() -> None:
                await http.post("/api/v1/query", json={"query": "sleep 30"})

            async def waits() -> None:
                queued.append((await http.post("/api/v1/query", json={"query": "patient"})).json())

            tg.start_soon(slow)
            tg.start_soon(slow)
            await eventually(lambda: service.in_flight == 2)
            tg.start_soon(waits)
            await eventually(lambda: service.admissions.queued == 1)
            if surface == "rest":
                response = await http.post("/api/v1/query", json={"query": "hello"})
                assert response.status_code == 429
                assert response.headers["retry-after"] == "2"
                assert response.json()["error"]["type"] == "busy"
                assert "2 queries are running and 1 waiting" in response.json()["error"]["message"]
            else:
                async with connect(gateway.url, "http", "modern") as client:
                    result = await client.call_tool("agent_query", {"query": "hello"})
                assert result.is_error
                assert result.content[0].text.startswith("busy: 2 queries are running and 1 waiting")
            # the slow queries block neither health, tools nor approvals
            assert (await http.get("/api/v1/health")).status_code == 200
            assert (await http.get("/api/v1/approvals")).status_code == 200
            assert (await http.get("/api/v1/tools")).status_code == 200
            assert service.metrics.rejected["busy"] == 1
            assert queued == []  # still waiting for a slot
            for cancel in list(service._running):  # end the slow ones: the queued query gets a slot
                cancel.set()
            await eventually(lambda: len(queued) == 1)
            assert queued[0]["answer"] == "answer: patient"
            tg.cancel_scope.cancel()
        await eventually(lambda: service.in_flight == 0)


async def test_a_queued_query_is_busy_after_the_queue_timeout() -> None:
    config = make_config(max_concurrent_queries=1, max_queued_queries=4, queue_timeout_seconds=0.3)
    async with running_gateway(config) as gateway:
        service = gateway.app.service
        async with gateway.client() as http, anyio.create_task_group() as tg:

            async def slow() -> None:
                await http.post("/api/v1/query", json={"query": "sleep 30"})

            tg.start_soon(slow)
            await eventually(lambda: service.in_flight == 1)
            response = await http.post("/api/v1/query", json={"query": "hello"})
            assert response.status_code == 429
            assert "stayed taken for 0.3 s" in response.json()["error"]["message"]
            assert service.admissions.queued == 0
            tg.cancel_scope.cancel()


async def test_starting_gateway_answers_503_and_agent_query_waits() -> None:
    from contextlib import asynccontextmanager

    from mcp_agent.loop.agent import Agent

    from .conftest import HubLike, RuleModel, Tools

    release = anyio.Event()

    @asynccontextmanager
    async def slow_factory(config: Any, *, state: Any) -> Any:
        await release.wait()  # tool servers still starting
        yield Agent(RuleModel(), HubLike(Tools().source), config)

    from mcp_agent.gateway.app import create_app
    from mcp_agent.gateway.serve import bind_socket, serve_app

    config = make_config()
    app = create_app(config, factory=slow_factory)
    sock = bind_socket("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop, ready = anyio.Event(), anyio.Event()
    import httpx

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: serve_app(app, sock, stop=stop, handle_signals=False, on_ready=lambda h, p: ready.set())
        )
        with anyio.fail_after(10):
            await ready.wait()
        async with httpx.AsyncClient(base_url=url) as http:
            health = await http.get("/api/v1/health")
            assert health.status_code == 503 and health.json()["status"] == "starting"
            response = await http.post("/api/v1/query", json={"query": "hi"})
            assert response.status_code == 503 and response.json()["error"]["type"] == "starting"
            assert response.headers["retry-after"] == "2"
            assert (await http.get("/api/v1/tools")).status_code == 503
            answers: list[str] = []

            async def ask() -> None:
                async with connect(url, "http", "legacy") as client:
                    result = await client.call_tool("agent_query", {"query": "patience"})
                    answers.append(answer_of(result))

            tg.start_soon(ask)
            await anyio.sleep(0.3)
            assert answers == []
            release.set()
            await eventually(lambda: answers == ["answer: patience"])
            assert (await http.get("/api/v1/health")).json()["status"] == "ok"
        stop.set()
