"""W3C trace context across processes: callers' ``traceparent`` (MCP ``_meta``, MCP and REST HTTP
headers) continued by the run, and the run's context passed on to remote tool servers.

Real gateways under uvicorn on 127.0.0.1, the SDK's own MCP clients, real tool server processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace

from mcp_agent.config import parse_config
from mcp_agent.loop.agent import Agent
from mcp_agent.messages import ToolCall
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.hub import open_tool_hub
from tests.gateway.conftest import answer_of, running_gateway
from tests.gateway.test_mcp import connect

from .conftest import ROOT, TRACED, Spans, TracedServer, ids_of, names, seen_by, traceparent

HEADER_CLIENT = Path(__file__).with_name("_header_client.py")
TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
PARENT_ID = 0xB7AD6B7169203331


def run_span(spans: Spans) -> Any:
    return spans.one("invoke_agent mcp_agent")


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "legacy"), ("http", "modern")])
async def test_mcp_meta_traceparent_is_continued(spans: Spans, transport: str, era: str) -> None:
    """The SDK client puts its span's context in ``_meta``; the run nests under it."""
    tracer = trace.get_tracer("the-caller")
    async with running_gateway() as gateway, connect(gateway.url, transport, era) as client:
        with tracer.start_as_current_span("caller") as caller, anyio.fail_after(30):
            result = await client.call_tool("agent_query", {"query": "echo traced"})
    assert answer_of(result) == "echo said: traced"
    run = run_span(spans)
    assert run.context.trace_id == caller.get_span_context().trace_id
    chain = names(spans.ancestors(run))
    assert chain == ["tools/call agent_query", "MCP send tools/call agent_query", "caller"], chain
    assert sorted(names(spans.children(run))) == ["chat rule-model", "chat rule-model", "execute_tool echo"]


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_mcp_http_traceparent_header_is_continued(spans: Spans, transport: str) -> None:
    """A client that sends ``traceparent`` as an HTTP header and nothing in ``_meta``."""
    sent = traceparent(TRACE_ID, PARENT_ID)
    async with running_gateway() as gateway:
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [sys.executable, str(HEADER_CLIENT), gateway.url, transport, sent], cwd=ROOT, check=False
            )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().startswith("echo said: via headers")
    run = run_span(spans)
    assert run.context.trace_id == TRACE_ID
    [server_span] = spans.ancestors(run)
    assert server_span.name == "tools/call agent_query"
    assert server_span.parent.span_id == PARENT_ID and server_span.parent.is_remote


@pytest.mark.parametrize("stream", [False, True])
async def test_rest_traceparent_header_is_continued(spans: Spans, stream: bool) -> None:
    sent = traceparent(TRACE_ID, PARENT_ID)
    headers = {"traceparent": sent, "tracestate": "vendor=1"}
    if stream:
        headers["accept"] = "text/event-stream"
    async with running_gateway() as gateway, gateway.client() as http:
        response = await http.post("/api/v1/query", json={"query": "echo rest"}, headers=headers)
    assert response.status_code == 200 and "echo said: rest" in response.text
    run = run_span(spans)
    assert run.context.trace_id == TRACE_ID
    assert run.parent.span_id == PARENT_ID and run.parent.is_remote
    assert run.context.trace_state.get("vendor") == "1"
    assert {span.context.trace_id for span in spans.all()} == {TRACE_ID}


async def test_a_bad_or_missing_traceparent_starts_a_new_trace(spans: Spans) -> None:
    async with running_gateway() as gateway, gateway.client() as http:
        await http.post("/api/v1/query", json={"query": "one"}, headers={"traceparent": "00-nonsense-01"})
        await http.post("/api/v1/query", json={"query": "two"})
    runs = spans.named("invoke_agent mcp_agent")
    assert len(runs) == 2 and all(run.parent is None for run in runs)
    assert runs[0].context.trace_id != runs[1].context.trace_id


async def test_remote_and_stdio_tool_servers_get_the_run_context(
    spans: Spans, traced_server: TracedServer
) -> None:
    """Over HTTP and SSE the call carries a traceparent header and ``_meta``; over stdio ``_meta``."""
    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"},
            "mcpServers": {
                "remote": {"url": traced_server.url, "transport": traced_server.transport},
                "local": {"command": sys.executable, "args": [str(TRACED)]},
            },
        },
        environ={},
    )
    provider = ScriptedProvider(
        [
            tool_turn(ToolCall("c1", "remote__whoami", {}), ToolCall("c2", "local__whoami", {})),
            text_turn("done"),
        ]
    )
    with anyio.fail_after(60):
        async with open_tool_hub(config.servers()) as hub:
            assert {status.name: status.status for status in hub.status()} == {"remote": "up", "local": "up"}
            result = await Agent(provider, hub, config).query("who am i")
    assert result.ok, result.detail
    by_call = {m.tool_call_id: seen_by(m.content) for m in result.transcript if m.role == "tool"}
    run = run_span(spans)
    tool_spans = {
        span.attributes["gen_ai.tool.call.id"]: span for span in spans.named("execute_tool remote__whoami")
    }
    tool_spans |= {
        span.attributes["gen_ai.tool.call.id"]: span for span in spans.named("execute_tool local__whoami")
    }

    remote, local = by_call["c1"], by_call["c2"]
    assert local["header"] is None and local["meta"] is not None
    assert remote["header"] is not None and remote["meta"] is not None
    for call_id, seen in (("c1", remote), ("c2", local)):
        tool_span = tool_spans[call_id]
        below = {tool_span.context.span_id} | {span.context.span_id for span in spans.children(tool_span)}
        for value in (seen["meta"], seen["header"]):
            if value is None:
                continue
            trace_id, parent_id = ids_of(value)
            assert trace_id == run.context.trace_id
            assert parent_id in below  # the execute_tool span or the SDK's "MCP send" span under it
    remote_span = dict(tool_spans["c1"].attributes)
    assert remote_span["mcp.method.name"] == "tools/call"
    assert remote_span["network.transport"] == "tcp"
    assert remote_span["server.address"] == "127.0.0.1" and remote_span["server.port"] == traced_server.port
    assert remote_span["mcp.protocol.version"]
    assert (
        remote_span["mcp_agent.tool.server"] == "remote"
        and remote_span["mcp_agent.tool.mcp_name"] == "whoami"
    )
    local_span = dict(tool_spans["c2"].attributes)
    assert local_span["network.transport"] == "pipe" and local_span["mcp.method.name"] == "tools/call"
    assert "server.address" not in local_span


async def test_rest_answers_do_not_leak_trace_headers_into_results(spans: Spans) -> None:
    """The trace context is ours to continue, never part of what the model or caller sees."""
    async with running_gateway() as gateway, gateway.client() as http:
        response = await http.post(
            "/api/v1/query",
            json={"query": "history"},
            headers={"traceparent": traceparent(TRACE_ID, PARENT_ID)},
        )
    body = response.json()
    assert "traceparent" not in json.dumps(body) and f"{TRACE_ID:032x}" not in json.dumps(body)


def test_http_client_headers_hook_is_harmless_without_tracing() -> None:
    """``inject_trace_headers`` adds nothing when nothing is traced (a process of its own)."""
    import subprocess

    code = (
        "from mcp_agent.telemetry.base import inject_trace_headers\n"
        "headers = {}\n"
        "inject_trace_headers(headers)\n"
        "print(headers)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == "{}", done.stderr
