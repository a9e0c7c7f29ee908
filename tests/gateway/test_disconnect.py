"""A client that goes away, however it goes, cancels its run within about a second, inner tool
calls included: the SSE stream closed, the HTTP request aborted, the session deleted."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx

from mcp_agent.gateway.resumable import RESUME_GRACE_SECONDS, RESUME_RETRY_MS

from .conftest import Running, eventually, running_gateway

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
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "agent_query", "arguments": {"query": "sleep 20"}},
}
STREAMABLE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def open_session(http: httpx.AsyncClient) -> dict[str, str]:
    opened = await http.post("/mcp", json=INIT, headers=STREAMABLE)
    headers = {
        **STREAMABLE,
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


async def cancelled_soon(gateway: Running) -> None:
    """The inner tool call is cancelled and the run ends ``cancelled``: well within a second
    after the client left (a generous bound here: this is no timing test)."""
    await eventually(lambda: gateway.tools.cancelled == [20.0], timeout=5)
    metrics = gateway.app.service.metrics
    await eventually(lambda: metrics.queries["cancelled"] == 1 and metrics.in_flight == 0, timeout=5)


async def test_aborting_a_streamable_http_request_cancels_its_run() -> None:
    """A client that aborted its request left the run going (a 20 s tool ran to the end)."""
    async with running_gateway() as gateway, httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        headers = await open_session(http)
        async with http.stream("POST", "/mcp", json=CALL, headers=headers) as response:
            assert response.status_code == 200
            await eventually(lambda: gateway.tools.sleeping.is_set())
        # the response stream is closed here, the session stays open
        await cancelled_soon(gateway)


async def test_deleting_the_session_cancels_its_run() -> None:
    async with running_gateway() as gateway, httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        headers = await open_session(http)
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                async with http.stream("POST", "/mcp", json=CALL, headers=headers) as response:
                    async for _ in response.aiter_bytes():
                        pass

            tg.start_soon(call)
            await eventually(lambda: gateway.tools.sleeping.is_set())
            assert (await http.delete("/mcp", headers=headers)).status_code == 200
            await cancelled_soon(gateway)
            tg.cancel_scope.cancel()


async def test_closing_the_sse_stream_cancels_its_run() -> None:
    async with running_gateway() as gateway, httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        async with http.stream("GET", "/sse") as stream:
            lines = stream.aiter_lines()
            endpoint = ""
            async for line in lines:
                if line.startswith("data: "):
                    endpoint = line[6:]
                    break
            assert (await http.post(endpoint, json=INIT)).status_code == 202
            await http.post(endpoint, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert (await http.post(endpoint, json=CALL)).status_code == 202
            await eventually(lambda: gateway.tools.sleeping.is_set())
        await cancelled_soon(gateway)


async def test_a_modern_client_that_closes_its_request_cancels_its_run() -> None:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    call: dict[str, Any] = {**CALL, "params": {**CALL["params"], "_meta": envelope}}
    headers = {
        **STREAMABLE,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "agent_query",
    }
    async with running_gateway() as gateway, httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        async with anyio.create_task_group() as tg:  # (the SDK sends no headers for the first 15 s)
            tg.start_soon(lambda: http.post("/mcp", content=json.dumps(call), headers=headers))
            await eventually(lambda: gateway.tools.sleeping.is_set())
            tg.cancel_scope.cancel()  # the client gives up: its connection closes
        await cancelled_soon(gateway)


async def test_a_client_that_resumes_its_stream_in_time_keeps_its_run_and_gets_the_answer() -> None:
    """MCP 1.x clients (langchain-mcp-adapters) wait forever on a broken stream unless its events
    carry ids they can resume from: events have ids, and a resumed stream brings the answer.

    Such a client waits the priming event's ``retry`` before it resumes (1 s without one: the
    whole grace, so its run was cancelled just before it came back); this one waits it too.
    """
    call = {**CALL, "params": {"name": "agent_query", "arguments": {"query": "sleep 1.5"}}}
    async with running_gateway() as gateway, httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        headers = await open_session(http)
        last_id, retry = "", ""
        async with http.stream("POST", "/mcp", json=call, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("retry: "):
                    retry = line[7:]
                if line.startswith("id: "):
                    last_id = line[4:]
                if line == "" and last_id:
                    break
        assert last_id  # the priming event has an id at once
        assert retry == str(RESUME_RETRY_MS) and RESUME_RETRY_MS / 1000 <= RESUME_GRACE_SECONDS / 4
        await anyio.sleep(RESUME_RETRY_MS / 1000)  # as the MCP 1.x client does
        events = ""
        async with http.stream("GET", "/mcp", headers={**headers, "last-event-id": last_id}) as resumed:
            assert resumed.status_code == 200
            async for line in resumed.aiter_lines():
                events += line + "\n"
                if '"result"' in line:
                    break
        assert "sleep said: slept" in events
        assert gateway.tools.cancelled == []  # resumed within the grace: not cancelled
        assert gateway.app.service.metrics.queries["success"] == 1


async def test_a_request_that_reuses_the_id_of_one_in_flight_is_refused_and_the_first_is_answered() -> None:
    """The second request took over the first one's response stream: the first never got an answer."""
    async with running_gateway() as gateway, httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        headers = await open_session(http)
        call = {**CALL, "id": 7, "params": {**CALL["params"], "arguments": {"query": "sleep 1"}}}
        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as tg:

            async def first() -> None:
                answers.append(await http.post("/mcp", json=call, headers=headers))

            tg.start_soon(first)
            await eventually(lambda: gateway.tools.sleeping.is_set())
            second = await http.post("/mcp", json=call, headers=headers)
            assert second.status_code == 400
            error = second.json()
            assert error["id"] == 7 and error["error"]["code"] == -32600
            assert "id 7 is still in flight" in error["error"]["message"]
        [answer] = answers
        assert answer.status_code == 200 and '"id":7' in answer.text and "sleep said: slept" in answer.text
        # the id is free again once its request was answered
        echo = {**call, "params": {**call["params"], "arguments": {"query": "echo hi"}}}
        again = await http.post("/mcp", json=echo, headers=headers)
        assert again.status_code == 200 and '"id":7' in again.text
