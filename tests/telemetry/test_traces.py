"""The span tree of a run (``telemetry.py``): names, parents, GenAI attributes, statuses, content.

The Agent runs in-process on a scripted provider and in-memory tools; the SDK's in-memory
exporter collects the spans (``conftest.spans``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from mcp_agent.config import AgentConfig, parse_config
from mcp_agent.exceptions import ProviderHTTPError
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.approvals import ApprovalQueue
from mcp_agent.messages import ToolCall, Usage
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.telemetry.base import NO_TRACE, TraceSettings
from mcp_agent.telemetry.setup import start_trace
from mcp_agent.tools.memory import MemoryToolSource

from .conftest import Spans, names

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def config(**telemetry: Any) -> AgentConfig:
    return parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:11434/v1", "model": "qwen3:8b"},
            "limits": {"maxRounds": 3},
            "approvals": {"require": ["mem__write"], "timeoutSeconds": 30},
            "gateway": {"description": "Answers questions."},
            "telemetry": telemetry,
        },
        environ={},
    )


def tools() -> MemoryToolSource:
    source = MemoryToolSource()

    async def echo(text: str) -> str:
        return text

    def fail(text: str) -> str:
        raise RuntimeError(f"no luck with {text}")

    source.add("mem__echo", echo, description="Echo the text.", parameters=TEXT, server="mem")
    source.add("mem__fail", fail, description="Always fails.", parameters=TEXT, server="mem")
    source.add("mem__write", echo, description="Write.", parameters=TEXT, server="mem")
    return source


USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)


async def test_one_span_tree_per_run(spans: Spans) -> None:
    provider = ScriptedProvider(
        [
            tool_turn(ToolCall("call_1", "mem__echo", {"text": "hi"}), usage=USAGE),
            text_turn("echo said hi", usage=USAGE),
        ]
    )
    agent = Agent(provider, tools(), config())
    result = await agent.query("say hi", session_id="conv-1")
    assert result.ok

    run = spans.one("invoke_agent mcp_agent")
    chats = spans.named("chat qwen3:8b")
    [tool] = spans.named("execute_tool mem__echo")
    assert len(chats) == 2
    assert sorted(names(spans.children(run))) == ["chat qwen3:8b", "chat qwen3:8b", "execute_tool mem__echo"]
    assert {span.context.trace_id for span in spans.all()} == {run.context.trace_id}
    assert run.kind is SpanKind.INTERNAL and tool.kind is SpanKind.INTERNAL
    assert all(chat.kind is SpanKind.CLIENT for chat in chats)

    attributes = dict(run.attributes)
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.agent.name"] == "mcp_agent"
    assert attributes["gen_ai.agent.description"] == "Answers questions."
    assert attributes["gen_ai.request.model"] == "qwen3:8b"
    assert attributes["gen_ai.conversation.id"] == "conv-1"
    assert attributes["mcp_agent.run.id"] == result.run_id
    assert attributes["mcp_agent.termination_reason"] == "success"
    assert attributes["mcp_agent.rounds"] == 2
    assert attributes["mcp_agent.tool_calls"] == 1
    assert attributes["gen_ai.usage.input_tokens"] == 20
    assert attributes["gen_ai.usage.output_tokens"] == 10
    assert "server.address" not in attributes  # an in-process agent: the model server is on chat spans
    assert run.status.status_code is StatusCode.UNSET

    first = dict(min(chats, key=lambda span: span.start_time).attributes)
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "qwen3:8b"
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first["gen_ai.usage.input_tokens"] == 10 and first["gen_ai.usage.output_tokens"] == 5
    assert first["gen_ai.conversation.id"] == "conv-1"
    assert first["mcp_agent.round"] == 1
    assert first["server.address"] == "127.0.0.1" and first["server.port"] == 11434

    called = dict(tool.attributes)
    assert called["gen_ai.operation.name"] == "execute_tool"
    assert called["gen_ai.tool.name"] == "mem__echo"
    assert called["gen_ai.tool.call.id"] == "call_1"
    assert called["gen_ai.tool.description"] == "Echo the text."
    assert called["mcp_agent.tool.server"] == "mem"
    assert called["mcp_agent.tool.is_error"] is False
    assert called["mcp_agent.tool.verdict"] == "run"
    assert called["mcp_agent.tool.duration_ms"] >= 0
    assert "mcp.method.name" not in called  # an in-process tool, not an MCP call
    assert tool.status.status_code is StatusCode.UNSET
    # no content unless telemetry.captureContent
    for span in spans.all():
        assert not {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"} & set(
            span.attributes
        )


async def test_errors_set_span_status(spans: Spans) -> None:
    failing = ProviderHTTPError("rate limited", status=503)
    provider = ScriptedProvider([tool_turn(ToolCall("call_1", "mem__fail", {"text": "x"})), failing])
    agent = Agent(provider, tools(), config())
    result = await agent.query("go")
    assert result.termination_reason.value == "llm_error"

    run = spans.one("invoke_agent mcp_agent")
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes["error.type"] == "llm_error"
    assert "rate limited" in (run.status.description or "")
    assert "gen_ai.conversation.id" not in run.attributes  # a run without a session

    failed_chat = max(spans.named("chat qwen3:8b"), key=lambda span: span.start_time)
    assert failed_chat.status.status_code is StatusCode.ERROR
    assert failed_chat.attributes["error.type"] == "503"

    tool = spans.one("execute_tool mem__fail")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes["error.type"] == "tool_error"
    assert tool.attributes["mcp_agent.tool.is_error"] is True


async def test_refused_calls_have_spans_with_their_verdict(spans: Spans) -> None:
    provider = ScriptedProvider(
        [tool_turn(ToolCall("c1", "nope", {}), ToolCall("c2", "mem__echo", {"wrong": 1})), text_turn("ok")]
    )
    await Agent(provider, tools(), config()).query("go")
    unknown = spans.one("execute_tool nope")
    assert unknown.attributes["mcp_agent.tool.verdict"] == "unknown_tool"
    assert unknown.attributes["error.type"] == "unknown_tool"
    assert "mcp.method.name" not in unknown.attributes  # no server has it
    invalid = spans.one("execute_tool mem__echo")
    assert invalid.attributes["error.type"] == "invalid_arguments"
    assert invalid.status.status_code is StatusCode.ERROR


async def test_a_run_cut_off_by_its_deadline_ends_its_spans(spans: Spans) -> None:
    provider = ScriptedProvider([text_turn("late")], delay=30)
    data = config().model_copy(update={"limits": config().limits.model_copy(update={"timeout_seconds": 0.3})})
    with anyio.fail_after(20):
        result = await Agent(provider, tools(), data).query("go")
    assert result.termination_reason.value == "timeout"
    run = spans.one("invoke_agent mcp_agent")
    assert run.attributes["error.type"] == "timeout"
    chat = spans.one("chat qwen3:8b")
    assert chat.attributes["error.type"] == "timeout" and chat.status.status_code is StatusCode.ERROR
    assert chat.parent.span_id == run.context.span_id


async def test_approval_wait_is_inside_the_tool_span(spans: Spans) -> None:
    queue = ApprovalQueue(30)
    provider = ScriptedProvider(
        [tool_turn(ToolCall("c1", "mem__write", {"text": "x"})), text_turn("written")]
    )
    agent = Agent(provider, tools(), config(), approvals=queue)
    async with anyio.create_task_group() as tg:

        async def approve() -> None:
            while not await queue.pending():
                await anyio.sleep(0.01)
            await queue.resolve((await queue.pending())[0].id, True)

        tg.start_soon(approve)
        with anyio.fail_after(20):
            result = await agent.query("write")
    assert result.ok
    tool = spans.one("execute_tool mem__write")
    assert [event.name for event in tool.events] == ["approval_requested", "approval_resolved"]
    assert tool.events[1].attributes["mcp_agent.approval.approved"] is True


async def test_content_only_when_asked_and_redacted(spans: Spans) -> None:
    provider = ScriptedProvider(
        [
            tool_turn(ToolCall("c1", "mem__echo", {"text": f"key={SECRET}"})),
            text_turn(f"the key is {SECRET}"),
        ]
    )
    agent = Agent(provider, tools(), config(captureContent=True))
    await agent.query(f"use {SECRET}")
    everything = json.dumps([dict(span.attributes) for span in spans.all()])
    assert SECRET not in everything
    run = spans.one("invoke_agent mcp_agent")
    assert json.loads(run.attributes["gen_ai.input.messages"])[0]["role"] == "user"
    output = json.loads(run.attributes["gen_ai.output.messages"])
    assert output[0]["parts"][0]["content"].startswith("the key is ")
    first = min(spans.named("chat qwen3:8b"), key=lambda span: span.start_time)
    sent = json.loads(first.attributes["gen_ai.input.messages"])
    assert [message["role"] for message in sent] == ["user"]
    assert json.loads(first.attributes["gen_ai.system_instructions"])[0]["type"] == "text"
    answered = json.loads(first.attributes["gen_ai.output.messages"])
    assert answered[0]["parts"][0]["type"] == "tool_call" and answered[0]["parts"][0]["name"] == "mem__echo"
    tool = spans.one("execute_tool mem__echo")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"text": "key=***"}
    assert tool.attributes["gen_ai.tool.call.result"] == "key=***"


async def test_disabled_means_no_spans(spans: Spans) -> None:
    provider = ScriptedProvider([text_turn("hi")])
    await Agent(provider, tools(), config(enabled=False)).query("go")
    assert spans.all() == []
    assert start_trace(run_id="r", settings=TraceSettings(enabled=False)) is NO_TRACE


async def test_direct_tool_calls_get_a_tool_span(spans: Spans) -> None:
    agent = Agent(ScriptedProvider(), tools(), config())
    result = await agent.call_tool("mem__echo", {"text": "direct"}, session_id="s")
    assert result.text == "direct"
    [span] = spans.all()
    assert span.name == "execute_tool mem__echo"
    assert span.attributes["gen_ai.conversation.id"] == "s"


def test_without_a_provider_nothing_is_traced() -> None:
    """The no-op path, in a process of its own: no TracerProvider, so start_trace is NO_TRACE."""
    import subprocess
    import sys

    code = (
        "from mcp_agent.telemetry.base import NO_TRACE, tracer\n"
        "from mcp_agent.telemetry.setup import start_trace\n"
        "assert tracer() is None\n"
        "assert start_trace(run_id='r') is NO_TRACE\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("enabled", [True, False])
def test_settings_from_config(enabled: bool) -> None:
    settings = TraceSettings.from_config(config(enabled=enabled, captureContent=True))
    assert settings.enabled is enabled and settings.capture_content
    assert settings.request_model == "qwen3:8b" and settings.agent_description == "Answers questions."


async def test_a_broken_exporter_never_breaks_a_run(spans: Spans, caplog: pytest.LogCaptureFixture) -> None:
    from .conftest import _installed_switch

    class Broken:
        def export(self, batch: Any) -> None:
            raise RuntimeError("the collector is on fire")

    caplog.set_level(logging.DEBUG, logger="mcp_agent.telemetry.base")  # a warning once, then debug
    switch = _installed_switch()
    switch.target = Broken()
    provider = ScriptedProvider([tool_turn(ToolCall("c1", "mem__echo", {"text": "x"})), text_turn("fine")])
    result = await Agent(provider, tools(), config()).query("go", session_id="s")
    assert result.ok and result.answer == "fine"
    assert "tracing:" in caplog.text and "the run goes on" in caplog.text
