"""agent_query end to end over SSE and Streamable HTTP, with the SDK's own clients, both eras."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import jsonschema
import mcp_types as types
import pytest
from mcp import Client, ClientSession, MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from mcp_agent.loop.result import RESULT_SCHEMA

from ..conftest import Running, answer_of, eventually, make_config, running_gateway

TRANSPORTS = ["sse", "sse_alias", "http"]
ERAS = ["legacy", "modern"]


@asynccontextmanager
async def transport_for(
    url: str, transport: str, headers: dict[str, str] | None = None
) -> AsyncIterator[Any]:
    """The SDK's client transport; the Streamable HTTP one gets an httpx2 client that is closed after."""
    if transport in ("sse", "sse_alias"):
        path = "/sse" if transport == "sse" else "/mcp/sse"
        async with sse_client(f"{url}{path}", headers=headers, timeout=30) as streams:
            yield streams
        return
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=httpx2.Timeout(30, read=60)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as streams,
    ):
        yield streams


@asynccontextmanager
async def connect(
    url: str,
    transport: str,
    era: str,
    *,
    headers: dict[str, str] | None = None,
    message_handler: Any = None,
    elicitation_callback: Any = None,
) -> AsyncIterator[Any]:
    """A legacy ``ClientSession`` (2025 handshake) or a 2026 ``mcp.Client``, over ``transport``."""
    if era == "legacy":
        async with (
            transport_for(url, transport, headers) as (read, write),
            ClientSession(
                read, write, message_handler=message_handler, elicitation_callback=elicitation_callback
            ) as session,
        ):
            init = await session.initialize()
            assert init.protocol_version == "2025-11-25"
            assert init.capabilities.tools is not None and init.capabilities.tools.list_changed
            yield session
    else:
        async with Client(
            transport_for(url, transport, headers),
            message_handler=message_handler,
            elicitation_callback=elicitation_callback,
        ) as client:
            assert client.protocol_version == "2026-07-28"
            yield client


class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, message))


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_agent_query_end_to_end(gateway: Running, transport: str, era: str) -> None:
    with anyio.fail_after(20):
        async with connect(gateway.url, transport, era) as client:
            listed = await client.list_tools()
            [tool] = listed.tools
            assert tool.name == "agent_query"
            assert tool.output_schema == RESULT_SCHEMA
            assert tool.input_schema["required"] == ["query"]
            assert tool.description.startswith("Test agent.")
            assert "mem (echo, sleep, write_file)" in tool.description

            progress = Progress()
            result = await client.call_tool("agent_query", {"query": "echo hi"}, progress_callback=progress)
            assert not result.is_error
            assert answer_of(result) == "echo said: hi"
            jsonschema.validate(result.structured_content, RESULT_SCHEMA)
            assert result.structured_content["termination_reason"] == "success"
            assert result.structured_content["tool_calls"][0]["name"] == "echo"
            await eventually(lambda: len(progress.seen) >= 4)
    values = [value for value, _ in progress.seen]
    assert values == sorted(values) and len(set(values)) == len(values)
    messages = [message or "" for _, message in progress.seen]
    assert messages[0] == "round 1/4: asking the model"
    assert messages[1] == "round 1/4: calling echo"
    assert messages[2].startswith("round 1/4: echo ok (")
    assert messages[3] == "round 2/4: asking the model"
    assert len(messages) == 4


@pytest.mark.parametrize("era", ERAS)
async def test_stateless_streamable_http(era: str) -> None:
    async with running_gateway(stateless=True) as gateway:
        assert gateway.app.session_manager.stateless
        with anyio.fail_after(20):
            async with connect(gateway.url, "http", era) as client:
                progress = Progress()
                result = await client.call_tool(
                    "agent_query", {"query": "echo x"}, progress_callback=progress
                )
                assert answer_of(result) == "echo said: x"
                await eventually(lambda: len(progress.seen) == 4)


async def test_no_progress_without_a_token(gateway: Running) -> None:
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    async with connect(gateway.url, "sse", "legacy", message_handler=on_message) as client:
        result = await client.call_tool("agent_query", {"query": "echo quiet"})
        assert answer_of(result) == "echo said: quiet"
        await anyio.sleep(0.1)
    assert not [n for n in notes if isinstance(n, types.ProgressNotification)]


@pytest.mark.parametrize(
    ("query", "reason", "text"),
    [
        ("rounds", "max_rounds", "Agent terminated (max_rounds): reached max rounds (4)"),
        ("empty", "empty_response", "Agent terminated (empty_response): empty response from the model"),
    ],
)
async def test_non_success_endings_are_errors(gateway: Running, query: str, reason: str, text: str) -> None:
    async with connect(gateway.url, "http", "modern") as client:
        result = await client.call_tool("agent_query", {"query": query})
    assert result.is_error
    assert result.content[0].text.startswith(text)
    jsonschema.validate(result.structured_content, RESULT_SCHEMA)
    assert result.structured_content["termination_reason"] == reason
    async with httpx2.AsyncClient() as http:
        metrics = (await http.get(f"{gateway.url}/metrics")).text
    [queries] = [
        family for family in text_string_to_metric_families(metrics) if family.name == "mcp_agent_queries"
    ]
    assert {sample.labels["termination_reason"]: sample.value for sample in queries.samples}[reason] == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "'query' is required"),
        ({"query": 7}, "'query' must be a string"),
        ({"query": "q", "limits": {"bogus": 1}}, "limits.bogus: unknown key"),
        ({"query": "q", "limits": {"maxRounds": "two"}}, "limits.maxRounds: Input should be a valid integer"),
        ({"query": "q", "session_id": ["x"]}, "'session_id' must be a string"),
        ({"query": "q" * 101}, "the limit is 100 (gateway.maxQueryChars)"),
    ],
)
async def test_bad_arguments_are_clear_tool_errors(
    capped: Running, arguments: dict[str, Any], message: str
) -> None:
    gateway = capped
    rejected = gateway.app.service.metrics.rejected["invalid"]
    async with connect(gateway.url, "sse", "legacy") as client:
        [tool] = (await client.list_tools()).tools
        assert tool.input_schema["properties"]["query"]["maxLength"] == 100
        result = await client.call_tool("agent_query", arguments)
    assert result.is_error
    assert result.content[0].text.startswith("Invalid agent_query arguments: ")
    assert message in result.content[0].text
    assert gateway.model.calls == 0
    assert gateway.app.service.metrics.rejected["invalid"] == rejected + 1


@pytest.fixture(scope="module")
async def capped() -> AsyncIterator[Running]:
    async with running_gateway(make_config(max_query_chars=100)) as gateway:
        yield gateway


async def test_unknown_tool(gateway: Running) -> None:
    """An unknown tool is a protocol error (-32602), as the specification's tools page has it."""
    async with connect(gateway.url, "http", "legacy") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("mem__echo", {"text": "x"})  # exposeTools is off
    assert (raised.value.code, raised.value.message) == (-32602, "Unknown tool: mem__echo")


async def test_client_limits_only_tighten(gateway: Running) -> None:
    async with connect(gateway.url, "http", "modern") as client:
        tighter = await client.call_tool("agent_query", {"query": "rounds", "limits": {"maxRounds": 2}})
        looser = await client.call_tool("agent_query", {"query": "rounds", "limits": {"maxRounds": 50}})
    assert tighter.structured_content["rounds"] == 2
    assert looser.structured_content["rounds"] == 4


async def test_sessions_carry_context_and_are_isolated(gateway: Running) -> None:
    async with connect(gateway.url, "sse", "legacy") as one, connect(gateway.url, "http", "modern") as two:
        first_a = await one.call_tool("agent_query", {"query": "first in a"})
        first_b = await two.call_tool("agent_query", {"query": "first in b"})
        a, b = first_a.structured_content["session_id"], first_b.structured_content["session_id"]
        again = await two.call_tool("agent_query", {"query": "history", "session_id": a})
        other = await one.call_tool("agent_query", {"query": "history", "session_id": b})
        alone = await one.call_tool("agent_query", {"query": "history"})
    assert a != b and len(a) >= 20  # issued by the gateway, unguessable
    assert answer_of(again) == "seen: first in a | history"
    assert again.structured_content["session_id"] == a
    assert answer_of(other) == "seen: first in b | history"
    assert answer_of(alone) == "seen: history"
    assert alone.structured_content["session_id"] not in (a, b)


async def test_a_session_id_the_gateway_never_issued_is_refused(gateway: Running) -> None:
    async with connect(gateway.url, "http", "legacy") as client:
        result = await client.call_tool("agent_query", {"query": "history", "session_id": "guessed"})
    assert result.is_error
    assert "unknown session_id 'guessed'" in result.content[0].text
    assert gateway.app.service.metrics.in_flight == 0  # the slot was given back


@pytest.mark.parametrize("transport", ["sse", "http"])
async def test_tools_list_changed_reaches_legacy_clients(gateway: Running, transport: str) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(gateway.url, transport, "legacy", message_handler=on_message) as client:
        await client.list_tools()
        if transport == "http":  # stateful Streamable HTTP: the standalone GET stream carries it
            await anyio.sleep(0.2)
        gateway.tools.source.add("clock", lambda: "noon", description="The time.", server="time")
        gateway.hub.changed()
        with anyio.fail_after(10):
            await changed.wait()
        [tool] = (await client.list_tools()).tools
        assert "time (clock)" in tool.description


async def test_tools_list_changed_reaches_2026_listeners(gateway: Running) -> None:
    async with connect(gateway.url, "http", "modern") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            gateway.tools.source.add("clock", lambda: "noon", server="time")
            gateway.hub.changed()
            with anyio.fail_after(10):
                async for _event in subscription:
                    break
        [tool] = (await client.list_tools(cache_mode="bypass")).tools
        assert "time (clock)" in tool.description


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_every_handshake_version_is_negotiated(shared_gateway: Running, version: str) -> None:
    """A raw client offering an older protocol version gets exactly that version back."""
    async with shared_gateway.client() as http:
        response = await http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            },
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert response.status_code == 200
        session_id = response.headers["mcp-session-id"]
        assert len(session_id) >= 32 and session_id.isalnum()  # unguessable (uuid4 hex)
        data = next(line[6:] for line in response.text.splitlines() if line.startswith("data: ") and line[6:])
        assert json.loads(data)["result"]["protocolVersion"] == version
        await http.delete("/mcp", headers={"mcp-session-id": session_id, "mcp-protocol-version": version})
