"""``llm.toolChoice``: ``required`` for the first round only, sent where the server takes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_agent.config import LLMConfig, parse_config
from mcp_agent.exceptions import ConfigError
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.result import TerminationReason
from mcp_agent.loop.run import run
from mcp_agent.messages import Message, ToolCall, ToolSpec
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.factory import open_provider
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.providers.openai._wire import build_chat_body
from mcp_agent.providers.servers.endpoints import capabilities_for
from tests.fakes.model_server import FakeModelServer, Reply
from tests.fakes.openai_shapes import Call, llamacpp_stream
from tests.fakes.server_shapes import llamacpp_routes
from tests.loop._helpers import echo_tools

pytestmark = pytest.mark.anyio

TOOLS = (ToolSpec("echo", "Echo text", {"type": "object", "properties": {"text": {"type": "string"}}}),)


def body(kind: str, choice: str) -> dict[str, object]:
    request = ModelRequest((Message.user("hi"),), TOOLS, tool_choice=choice)  # type: ignore[arg-type]
    return build_chat_body(request, model="m", caps=capabilities_for(kind), stream=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "choice", "sent"),
    [
        ("llamacpp", "auto", "auto"),
        ("llamacpp", "required", "required"),
        ("llamacpp", "none", "none"),
        ("openai", "required", "required"),
        ("lmstudio", "required", "required"),
        ("llama-cpp-python", "required", "auto"),  # its chatml-function-calling asserts "auto"
        ("llama-cpp-python", "none", "none"),
        ("ollama", "required", None),  # Ollama reads no tool_choice
        ("unknown", "required", None),
    ],
)
def test_tool_choice_is_sent_where_the_server_takes_it(kind: str, choice: str, sent: str | None) -> None:
    assert body(kind, choice).get("tool_choice") == sent


def test_no_tools_no_tool_choice() -> None:
    request = ModelRequest((Message.user("hi"),), (), tool_choice="required")
    assert "tool_choice" not in build_chat_body(
        request, model="m", caps=capabilities_for("openai"), stream=False
    )


def test_the_config_key() -> None:
    assert LLMConfig().tool_choice == "auto"
    assert parse_config({"llm": {"toolChoice": "required"}}).llm.tool_choice == "required"
    with pytest.raises(ConfigError, match="toolChoice"):
        parse_config({"llm": {"toolChoice": "always"}})


@pytest.mark.parametrize(("configured", "later"), [("required", "auto"), ("none", "none"), ("auto", "auto")])
async def test_required_holds_for_the_first_round_only(configured: str, later: str) -> None:
    provider = ScriptedProvider(
        [
            tool_turn(ToolCall("c1", "echo", {"text": "a"})),
            tool_turn(ToolCall("c2", "echo", {"text": "b"})),
            text_turn("done"),
        ]
    )
    result = await run("go", provider=provider, tools=echo_tools(), tool_choice=configured)  # type: ignore[arg-type]
    assert result.termination_reason is TerminationReason.SUCCESS
    assert [request.tool_choice for request in provider.requests] == [configured, later, later]


async def test_the_first_request_on_the_wire_says_required(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.routes.update(llamacpp_routes())
    model_server.enqueue(
        Reply.sse(llamacpp_stream(calls=[Call("echo", {"text": "hi"})])),
        Reply.sse(llamacpp_stream(content="said hi")),
    )
    config = parse_config(
        {"llm": {"endpoint": model_server.base_url, "model": "smollm2", "toolChoice": "required"}}
    )
    async with open_provider(config.llm, state_dir=tmp_path) as provider:
        result = await Agent(provider, echo_tools(), config).query("say hi")
    assert result.answer == "said hi"
    assert [request.json["tool_choice"] for request in model_server.requests] == ["required", "auto"]


@pytest.mark.parametrize(
    ("choice", "thinking", "sent"),
    [
        ("auto", None, None),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        ("required", 2048, None),
    ],  # Anthropic refuses forced tool use with extended thinking
)
def test_anthropic_tool_choice(choice: str, thinking: int | None, sent: object) -> None:
    from mcp_agent.providers.anthropic._wire import build_request

    request = ModelRequest((Message.user("hi"),), TOOLS, tool_choice=choice)  # type: ignore[arg-type]
    body = build_request(request, model="claude-x", stream=False, thinking_budget=thinking)
    assert body.get("tool_choice") == sent


@pytest.mark.parametrize(("choice", "mode"), [("auto", None), ("required", "ANY"), ("none", "NONE")])
def test_gemini_tool_choice(choice: str, mode: str | None) -> None:
    from mcp_agent.providers.gemini._wire import build_request

    request = ModelRequest((Message.user("hi"),), TOOLS, tool_choice=choice)  # type: ignore[arg-type]
    body = build_request(request)
    assert (body.get("toolConfig") or {}).get("functionCallingConfig", {}).get("mode") == mode
