"""Pure parts of the traces (``telemetry.py``): span attributes by the OpenTelemetry GenAI semantic
conventions, and the conversation as the conventions' message JSON, with secrets redacted.

Nothing here imports OpenTelemetry: every function returns plain values (attribute dicts whose
values are str, bool, int, float or lists of str), so all of it is table-tested without the SDK.

- ``provider_name``: ``gen_ai.provider.name`` from the wire API and the endpoint's host (a
  well-known value for the hosted APIs, else the API's flavour: ``openai`` for Chat Completions);
- ``server_of``: ``server.address`` and ``server.port`` of a URL;
- ``input_messages`` / ``output_messages`` / ``system_instructions``: the opt-in content
  attributes (``telemetry.captureContent``), as JSON text, each text part redacted;
- ``redacted_json``: any JSON value as JSON text with every string redacted.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ._redact import redact_text
from .messages import Message, ToolCall, Turn

HOSTED: tuple[tuple[str, str], ...] = (
    ("api.anthropic.com", "anthropic"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("openai.azure.com", "azure.ai.openai"),
    ("api.openai.com", "openai"),
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.moonshot.ai", "moonshot_ai"),
    ("api.cohere.com", "cohere"),
)
"""Host suffix → the conventions' well-known ``gen_ai.provider.name``."""

API_FLAVOUR = {"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}
"""Our wire APIs → the provider name whose telemetry flavour they follow."""

MAX_TEXT_CHARS = 16_000
"""A content part longer than this is cut (with a note): spans are not transcripts."""


@functools.lru_cache(maxsize=256)
@functools.lru_cache(maxsize=256)
def provider_name(api: str | None, url: str | None) -> str:
    """``gen_ai.provider.name`` for a call to ``url`` over the ``api`` wire format.

    A hosted API gets its well-known value (``api.groq.com`` → ``groq``); any other server
    (Ollama, vLLM, llama.cpp, LM Studio) the flavour of the API it speaks, as the conventions
    advise for servers reached through another provider's API: ``openai`` for Chat Completions.
    """
    host = (urlsplit(url).hostname or "").lower() if url else ""
    for suffix, name in HOSTED:
        if host == suffix or host.endswith("." + suffix):
            return name
    return API_FLAVOUR.get(api or "openai", api or "openai")


def server_of(url: str | None) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of ``url`` (the scheme's default port when it has none)."""
    return dict(_server_of(url))


@functools.lru_cache(maxsize=256)
def _server_of(url: str | None) -> tuple[tuple[str, Any], ...]:
    return tuple(_parse_server(url).items())


def _parse_server(url: str | None) -> dict[str, Any]:
    if not url:
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return {}
    if not parts.hostname:
        return {}
    attributes: dict[str, Any] = {"server.address": parts.hostname}
    if port:
        attributes["server.port"] = port
    return attributes


def error_type(exc: BaseException | None, fallback: str = "_OTHER") -> str:
    """A low-cardinality ``error.type``: the HTTP status when there is one, else the class name."""
    if exc is None:
        return fallback
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        return str(status)
    return type(exc).__name__


def redacted_text(text: str) -> str:
    """``text`` redacted and cut to ``MAX_TEXT_CHARS`` (with a note of what was cut)."""
    text = redact_text(text)
    if len(text) > MAX_TEXT_CHARS:
        return f"{text[:MAX_TEXT_CHARS]}… [{len(text) - MAX_TEXT_CHARS} characters cut]"
    return text


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redacted_text(value)
    if isinstance(value, Mapping):
        return {str(key): _redact_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(item) for item in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def redacted_json(value: Any) -> str:
    """``value`` as compact JSON text, every string in it redacted and cut to ``MAX_TEXT_CHARS``."""
    return _dumps(_redact_value(value))


def _call_part(call: ToolCall) -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": call.id,
        "name": call.name,
        "arguments": _redact_value(dict(call.arguments)),
    }


def message_parts(message: Message) -> list[dict[str, Any]]:
    """The parts of one message in the conventions' shape (text, tool_call, tool_call_response)."""
    if message.role == "tool":
        return [
            {
                "type": "tool_call_response",
                "id": message.tool_call_id or "",
                "result": redacted_text(message.content),
            }
        ]
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "content": redacted_text(message.content)})
    parts.extend(_call_part(call) for call in message.tool_calls)
    return parts


def input_messages(messages: Sequence[Message]) -> str:
    """``gen_ai.input.messages``: the chat history sent, system messages left out (they are
    ``gen_ai.system_instructions``)."""
    shown = [{"role": m.role, "parts": message_parts(m)} for m in messages if m.role != "system"]
    return _dumps(shown)


def system_instructions(messages: Sequence[Message]) -> str | None:
    """``gen_ai.system_instructions``: the system messages' text parts, or None without any."""
    parts = [
        {"type": "text", "content": redacted_text(m.content)}
        for m in messages
        if m.role == "system" and m.content
    ]
    return _dumps(parts) if parts else None


def output_messages(turn: Turn) -> str:
    """``gen_ai.output.messages``: the model's one answer (its text and tool calls)."""
    parts: list[dict[str, Any]] = []
    if turn.content:
        parts.append({"type": "text", "content": redacted_text(turn.content)})
    parts.extend(_call_part(call) for call in turn.tool_calls)
    message = {"role": "assistant", "parts": parts, "finish_reason": turn.finish_reason or "stop"}
    return _dumps([message])


def text_messages(role: str, text: str) -> str:
    """One message of one text part, as the conventions' message JSON (the run's query, its answer)."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": redacted_text(text)}]}
    if role == "assistant":
        message["finish_reason"] = "stop"
    return _dumps([message])
