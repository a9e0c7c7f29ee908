"""The pure parts of the traces (``telemetry/spans.py``), table-tested without the SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_agent.exceptions import ProviderConnectionError, ProviderHTTPError
from mcp_agent.messages import Message, ToolCall, Turn
from mcp_agent.telemetry import spans as attrs

SECRET = "sk-ant-abcdefghijklmnopqrstuvwxyz0123"


@pytest.mark.parametrize(
    ("api", "url", "name"),
    [
        (None, "http://localhost:11434/v1", "openai"),
        ("openai", "http://127.0.0.1:8080/v1", "openai"),
        ("anthropic", "https://api.anthropic.com/v1", "anthropic"),
        (None, "https://api.anthropic.com/v1", "anthropic"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta", "gcp.gemini"),
        ("gemini", "http://127.0.0.1:9/v1beta", "gcp.gemini"),
        ("openai", "https://api.groq.com/openai/v1", "groq"),
        ("openai", "https://my-deploy.openai.azure.com/openai", "azure.ai.openai"),
        ("openai", "https://api.deepseek.com/v1", "deepseek"),
        ("openai", "https://api.openai.com/v1", "openai"),
        ("openai", "https://notapi.openai.com.evil.example/v1", "openai"),
        (None, None, "openai"),
    ],
)
def test_provider_name(api: str | None, url: str | None, name: str) -> None:
    assert attrs.provider_name(api, url) == name


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:11434/v1", {"server.address": "127.0.0.1", "server.port": 11434}),
        ("https://api.openai.com/v1", {"server.address": "api.openai.com", "server.port": 443}),
        ("http://user:pw@host/x?key=1", {"server.address": "host", "server.port": 80}),
        ("http://[::1]:8000/mcp", {"server.address": "::1", "server.port": 8000}),
        ("not a url", {}),
        ("http://host:99999/", {}),
        (None, {}),
    ],
)
def test_server_of(url: str | None, expected: dict[str, Any]) -> None:
    assert attrs.server_of(url) == expected


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ProviderHTTPError("x", status=429), "429"),
        (ProviderConnectionError("refused"), "ProviderConnectionError"),
        (None, "_OTHER"),
    ],
)
def test_error_type(exc: BaseException | None, expected: str) -> None:
    assert attrs.error_type(exc) == expected


def test_messages_in_the_conventions_shape_with_secrets_redacted() -> None:
    call = ToolCall("c1", "fs__read", {"path": "/etc", "token": f"Bearer {SECRET}"})
    messages = [
        Message.system(f"You are helpful. key={SECRET}"),
        Message.user("read it"),
        Message.assistant("", [call]),
        Message.tool(call, f"contents with {SECRET}"),
    ]
    sent = json.loads(attrs.input_messages(messages))
    assert [message["role"] for message in sent] == ["user", "assistant", "tool"]
    assert sent[0]["parts"] == [{"type": "text", "content": "read it"}]
    assert sent[1]["parts"][0]["type"] == "tool_call" and sent[1]["parts"][0]["id"] == "c1"
    assert sent[2]["parts"][0]["type"] == "tool_call_response" and sent[2]["parts"][0]["id"] == "c1"
    system = json.loads(attrs.system_instructions(messages) or "[]")
    assert system[0]["content"].startswith("You are helpful.")
    everything = attrs.input_messages(messages) + (attrs.system_instructions(messages) or "")
    assert SECRET not in everything
    assert attrs.system_instructions([Message.user("x")]) is None


def test_output_messages_and_long_text_is_cut() -> None:
    turn = Turn(content="x" * (attrs.MAX_TEXT_CHARS + 10), finish_reason="length")
    [message] = json.loads(attrs.output_messages(turn))
    assert message["role"] == "assistant" and message["finish_reason"] == "length"
    assert message["parts"][0]["content"].endswith("[10 characters cut]")


def test_redacted_json_reaches_nested_strings() -> None:
    value = {"a": [f"x {SECRET}", {"b": SECRET}], "n": 3, "raw": b"bytes"}
    text = attrs.redacted_json(value)
    assert SECRET not in text and json.loads(text)["n"] == 3
