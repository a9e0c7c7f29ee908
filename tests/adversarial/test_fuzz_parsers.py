"""Fuzzing the parsers that read what others write: the config loader, the SSE decoder, the three
providers' stream folders and the text tool-call extractor. Each either succeeds or raises its
own classified error (``ConfigError``, ``ProviderError``); nothing else escapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_agent.config import load_config, parse_config
from mcp_agent.exceptions import ConfigError, ProviderError
from mcp_agent.messages import ToolSpec
from mcp_agent.providers.anthropic._wire import StreamState
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.gemini._wire import ResponseState
from mcp_agent.providers.http.answers import iter_sse
from mcp_agent.providers.openai._wire import ChunkAccumulator, finish_turn
from mcp_agent.providers.textcalls import extract_tool_calls

from ._table import record

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=25,
)
TOOLS = [
    ToolSpec(name="get_weather", description="w", parameters={"type": "object", "properties": {"city": {}}}),
    ToolSpec(name="echo__echo", description="e", parameters={"type": "object", "properties": {"text": {}}}),
]


def maybe(keys: dict[str, Any]) -> Any:
    """A dict whose keys are the given strategies, each present or not (a plausible shape)."""
    return st.fixed_dictionaries({}, optional=keys)


# ------------------------------------------------------------------------------------- config

SECTIONS = {
    "llm": maybe(
        {k: SCALARS | JSON_VALUES for k in ("endpoint", "model", "provider", "stream", "maxRetries")}
    ),
    "limits": maybe({k: SCALARS for k in ("maxRounds", "maxTokens", "timeoutSeconds", "earlyStop", "x")}),
    "mcpServers": st.dictionaries(
        ANY_TEXT,
        maybe({k: SCALARS | JSON_VALUES for k in ("command", "args", "env", "url", "transport", "disabled")}),
        max_size=3,
    ),
    "gateway": maybe(
        {k: SCALARS | JSON_VALUES for k in ("host", "port", "authToken", "callers", "maxConcurrentQueries")}
    ),
    "approvals": maybe({k: SCALARS | JSON_VALUES for k in ("require", "timeoutSeconds", "maxPending")}),
    "sessions": maybe({k: SCALARS for k in ("ttlSeconds", "maxSessions")}),
    "serversDir": SCALARS,
    "systemPrompt": SCALARS,
}


@FUZZ
@given(data=st.one_of(maybe(SECTIONS), JSON_VALUES))
def test_config_objects(data: Any) -> None:
    try:
        parse_config(data, environ={"X": "1"})
        record("config object", "valid")
    except ConfigError as exc:
        assert exc.message
        record("config object", "ConfigError")


@FUZZ
@given(raw=st.one_of(st.binary(max_size=300), st.builds(lambda v: json.dumps(v).encode(), JSON_VALUES)))
def test_config_files(tmp_path_factory: Any, raw: bytes) -> None:
    path = Path(tmp_path_factory.mktemp("config")) / "agent.json"
    path.write_bytes(raw)
    try:
        load_config(path, environ={})
        record("config file bytes", "valid")
    except ConfigError:
        record("config file bytes", "ConfigError")


# ------------------------------------------------------------------------------------- streams

SSE_PIECES = st.lists(
    st.one_of(
        st.sampled_from(
            ["data: ", "event: ", "id: ", "retry: ", ":", "\n", "\r\n", "\r", "[DONE]", "{", "}"]
        ),
        ANY_TEXT,
        st.binary(max_size=20),
    ),
    max_size=40,
)


@FUZZ
@given(pieces=SSE_PIECES)
def test_sse_decoder(pieces: list[str | bytes]) -> None:
    chunks = [piece.encode("utf-8", "surrogatepass") if isinstance(piece, str) else piece for piece in pieces]
    try:
        events = list(iter_sse(chunks))
        record("SSE byte stream", f"{min(len(events), 3)}{'+' if len(events) >= 3 else ''} events")
    except ProviderError:
        record("SSE byte stream", "ProviderError")


OPENAI_CALL = maybe(
    {
        "index": st.integers(-2, 3) | SCALARS,
        "id": SCALARS,
        "type": SCALARS,
        "function": maybe(
            {"name": st.sampled_from(["get_weather", "echo__echo", "x"]) | SCALARS, "arguments": SCALARS}
        ),
    }
)
OPENAI_CHUNK = maybe(
    {
        "id": SCALARS,
        "choices": st.lists(
            maybe(
                {
                    "index": SCALARS,
                    "delta": maybe(
                        {
                            "content": SCALARS,
                            "reasoning_content": SCALARS,
                            "tool_calls": st.lists(OPENAI_CALL, max_size=3) | SCALARS,
                            "function_call": maybe({"name": SCALARS, "arguments": SCALARS}),
                        }
                    )
                    | SCALARS,
                    "message": JSON_VALUES,
                    "finish_reason": SCALARS,
                }
            )
            | SCALARS,
            max_size=2,
        )
        | SCALARS,
        "usage": maybe({k: SCALARS for k in ("prompt_tokens", "completion_tokens", "total_tokens")})
        | SCALARS,
        "error": JSON_VALUES,
    }
)


@FUZZ
@given(chunks=st.lists(OPENAI_CHUNK, max_size=8))
def test_openai_stream_chunks(chunks: list[Any]) -> None:
    acc = ChunkAccumulator()
    try:
        for chunk in chunks:
            acc.feed(chunk)
        acc.flush()
        turn = finish_turn(acc, ModelRequest(messages=(), tools=TOOLS))
        assert all(call.name in {"get_weather", "echo__echo", "x"} or call.name for call in turn.tool_calls)
        record("OpenAI stream chunks", f"turn with {min(len(turn.tool_calls), 2)} calls")
    except ProviderError:
        record("OpenAI stream chunks", "ProviderError")


ANTHROPIC_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
                "ping",
                "error",
                None,
                "other",
            ]
        ),
        maybe(
            {
                "type": SCALARS,
                "index": st.integers(-1, 3) | SCALARS,
                "message": JSON_VALUES,
                "content_block": maybe(
                    {
                        "type": st.sampled_from(["text", "tool_use", "thinking"]) | SCALARS,
                        "id": SCALARS,
                        "name": SCALARS,
                        "input": JSON_VALUES,
                        "text": SCALARS,
                    }
                ),
                "delta": maybe(
                    {
                        "type": st.sampled_from(["text_delta", "input_json_delta", "thinking_delta"])
                        | SCALARS,
                        "text": SCALARS,
                        "partial_json": SCALARS,
                        "stop_reason": SCALARS,
                    }
                ),
                "usage": JSON_VALUES,
                "error": JSON_VALUES,
            }
        ),
    ),
    max_size=10,
)


@FUZZ
@given(events=ANTHROPIC_EVENTS)
def test_anthropic_stream_events(events: list[tuple[str | None, Any]]) -> None:
    state = StreamState()
    try:
        for event, data in events:
            state.feed(event, data)
        state.turn()
        record("Anthropic stream events", "turn")
    except ProviderError:
        record("Anthropic stream events", "ProviderError")


GEMINI_CHUNK = maybe(
    {
        "candidates": st.lists(
            maybe(
                {
                    "content": maybe(
                        {
                            "parts": st.lists(
                                maybe(
                                    {
                                        "text": SCALARS,
                                        "thought": SCALARS,
                                        "thoughtSignature": SCALARS,
                                        "functionCall": maybe(
                                            {"name": SCALARS, "args": JSON_VALUES, "id": SCALARS}
                                        ),
                                    }
                                )
                                | SCALARS,
                                max_size=3,
                            )
                            | SCALARS,
                            "role": SCALARS,
                        }
                    )
                    | SCALARS,
                    "finishReason": SCALARS,
                }
            )
            | SCALARS,
            max_size=2,
        )
        | SCALARS,
        "usageMetadata": JSON_VALUES,
        "error": JSON_VALUES,
    }
)


@FUZZ
@given(chunks=st.lists(st.one_of(GEMINI_CHUNK, JSON_VALUES), max_size=6))
def test_gemini_stream_chunks(chunks: list[Any]) -> None:
    state = ResponseState()
    try:
        for chunk in chunks:
            state.feed(chunk)
        state.turn()
        record("Gemini stream chunks", "turn")
    except ProviderError:
        record("Gemini stream chunks", "ProviderError")


@FUZZ
@given(text=st.text(st.characters(codec=None, exclude_categories=()), max_size=400))
def test_text_tool_calls(text: str) -> None:
    result = extract_tool_calls(text, TOOLS)
    assert {call.name for call in result.calls} <= {"get_weather", "echo__echo"}
    record("text tool calls", f"{min(len(result.calls), 2)} calls")
