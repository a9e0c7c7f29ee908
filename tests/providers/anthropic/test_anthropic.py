"""Anthropic Messages: the pure wire module, then the HTTP provider against the fake model server."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import Limits, LLMConfig
from mcp_agent.exceptions import (
    ContextLengthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
)
from mcp_agent.loop.run import run
from mcp_agent.messages import Delta, Message, ToolCall, ToolSpec, Turn, Usage
from mcp_agent.providers.anthropic import AnthropicProvider
from mcp_agent.providers.anthropic import _wire as wire
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.factory import build_client, create_provider, open_provider
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.servers.endpoints import resolve_endpoint
from mcp_agent.providers.turns import finish_turn
from mcp_agent.tools.memory import MemoryToolSource
from tests.fakes import anthropic_shapes as shapes
from tests.fakes.model_server import FakeModelServer, Reply, running_model_server
from tests.providers.conftest import SleepRecorder

CALL_A = ToolCall("toolu_a", "ports__check", {"port": 8000})
CALL_B = ToolCall("toolu_b", "time__now", {})


def _spec(name: str = "ports__check", **variants: Any) -> ToolSpec:
    return ToolSpec(
        name=name,
        description="Check a port.",
        parameters={"type": "object", "properties": {"port": {"type": "integer"}}, "required": ["port"]},
        variants=variants,
    )


# --------------------------------------------------------------------------------------------
# outgoing


def test_system_is_top_level_and_joined() -> None:
    system, messages = wire.to_anthropic_messages(
        [Message.system("one"), Message.user("hi"), Message.system("two")]
    )
    assert system == "one\n\ntwo"
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_no_system_gives_none() -> None:
    assert wire.to_anthropic_messages([Message.user("hi")])[0] is None


def test_tool_use_and_results_pair_in_next_user_message() -> None:
    history = [
        Message.user("check"),
        Message.assistant("Looking.", [CALL_A, CALL_B]),
        Message.tool(CALL_B, "12:00"),  # out of order on purpose: results follow call order
        Message.tool(CALL_A, "refused", is_error=True),
        Message.user("and now?"),
    ]
    _, messages = wire.to_anthropic_messages(history)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_a", "name": "ports__check", "input": {"port": 8000}},
        {"type": "tool_use", "id": "toolu_b", "name": "time__now", "input": {}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "refused", "is_error": True},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "12:00"},
        {"type": "text", "text": "and now?"},
    ]


def test_call_without_result_is_answered_with_an_error() -> None:
    _, messages = wire.to_anthropic_messages(
        [Message.user("q"), Message.assistant("", [CALL_A, CALL_B]), Message.tool(CALL_A, "ok")]
    )
    assert messages[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_b",
        "content": "not executed: no result was recorded",
        "is_error": True,
    }


def test_result_without_call_becomes_text() -> None:
    orphan = Message(role="tool", content="42", tool_call_id="toolu_zzz", name="calc__add")
    _, messages = wire.to_anthropic_messages([Message.user("q"), orphan])
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "[result of calc__add]\n42"}],
        }
    ]


def test_duplicate_result_for_one_call_is_sent_once_as_result() -> None:
    _, messages = wire.to_anthropic_messages(
        [
            Message.user("q"),
            Message.assistant("", [CALL_A]),
            Message.tool(CALL_A, "1"),
            Message.tool(CALL_A, "2"),
        ]
    )
    results = [b for b in messages[2]["content"] if b["type"] == "tool_result"]
    assert len(results) == 1 and results[0]["content"] == "1"


def test_consecutive_same_role_messages_are_merged_and_empty_ones_skipped() -> None:
    _, messages = wire.to_anthropic_messages(
        [
            Message.user("a"),
            Message.user("b"),
            Message.assistant(""),
            Message.assistant("x"),
            Message.assistant("y"),
        ]
    )
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]},
    ]


def test_empty_tool_result_omits_content() -> None:
    _, messages = wire.to_anthropic_messages(
        [Message.user("q"), Message.assistant("", [CALL_A]), Message.tool(CALL_A, "")]
    )
    assert messages[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_a"}]


def test_thinking_blocks_are_replayed_with_signature_first() -> None:
    blocks = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "xyz"},
    ]
    message = Message(role="assistant", content="ok", tool_calls=(CALL_A,), meta={wire.THINKING_META: blocks})
    _, messages = wire.to_anthropic_messages([Message.user("q"), message, Message.tool(CALL_A, "r")])
    assert messages[1]["content"][:3] == [*blocks, {"type": "text", "text": "ok"}]


def test_reasoning_without_thinking_blocks_is_not_sent() -> None:
    _, messages = wire.to_anthropic_messages([Message.user("q"), Message.assistant("a", reasoning="secret")])
    assert "secret" not in str(messages)


def test_tools_use_anthropic_variant_and_object_type() -> None:
    tools = wire.to_anthropic_tools([_spec(anthropic={"$schema": "x", "properties": {}}), _spec("b__c")])
    assert tools[0] == {
        "name": "ports__check",
        "description": "Check a port.",
        "input_schema": {"properties": {}, "type": "object"},
    }
    assert tools[1]["input_schema"]["required"] == ["port"]


@pytest.mark.parametrize(
    ("max_output", "default", "expected"),
    [(None, wire.DEFAULT_MAX_TOKENS, 4096), (123, 4096, 123), (None, 999, 999)],
)
def test_max_tokens_is_always_sent(max_output: int | None, default: int, expected: int) -> None:
    body = wire.build_request(
        ModelRequest([Message.user("q")], max_output_tokens=max_output),
        model="m",
        stream=False,
        default_max_tokens=default,
    )
    assert body["max_tokens"] == expected
    assert "stream" not in body and "tools" not in body and "system" not in body


def test_build_request_full() -> None:
    body = wire.build_request(
        ModelRequest([Message.system("s"), Message.user("q")], tools=[_spec()], temperature=0.2),
        model="claude-x",
        stream=True,
    )
    assert body["model"] == "claude-x" and body["system"] == "s" and body["stream"] is True
    assert body["temperature"] == 0.2 and body["tools"][0]["name"] == "ports__check"


def test_thinking_budget_drops_temperature_and_raises_max_tokens() -> None:
    body = wire.build_request(
        ModelRequest([Message.user("q")], temperature=0.5, max_output_tokens=1000),
        model="m",
        stream=False,
        thinking_budget=2000,
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert "temperature" not in body and body["max_tokens"] > 2000


# --------------------------------------------------------------------------------------------
# incoming


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("model_context_window_exceeded", "context_length"),
        ("something_new", "something_new"),
        (None, None),
    ],
)
def test_map_stop_reason(reason: str | None, expected: str | None) -> None:
    assert wire.map_stop_reason(reason) == expected


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, Usage()),
        ({"input_tokens": 10, "output_tokens": 5}, Usage(10, 5, 15)),
        (
            {
                "input_tokens": 10,
                "output_tokens": 5,
                "cache_creation_input_tokens": 3,
                "cache_read_input_tokens": 2,
            },
            Usage(15, 5, 20),
        ),
        ({"input_tokens": None, "output_tokens": 7}, Usage(0, 7, 7)),
    ],
)
def test_parse_usage(usage: dict[str, Any] | None, expected: Usage) -> None:
    assert wire.parse_usage(usage) == expected


def test_parse_response_text_thinking_and_parallel_calls() -> None:
    turn = wire.parse_response(
        {
            "id": "msg_1",
            "content": [
                {"type": "thinking", "thinking": "let me think", "signature": "S1"},
                {"type": "text", "text": "Checking "},
                {"type": "text", "text": "both."},
                {"type": "tool_use", "id": "toolu_1", "name": "a__b", "input": {"x": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "c__d", "input": {}},
                {"type": "server_tool_use", "id": "srv", "name": "web", "input": {}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 3, "output_tokens": 4},
        },
        request_id="req_9",
    )
    assert turn.content == "Checking both."
    assert turn.reasoning == "let me think"
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("toolu_1", "a__b", {"x": 1}),
        ("toolu_2", "c__d", {}),
    ]
    assert turn.finish_reason == "tool_calls" and turn.request_id == "req_9"
    assert turn.usage == Usage(3, 4, 7)
    assert turn.meta[wire.THINKING_META] == [
        {"type": "thinking", "thinking": "let me think", "signature": "S1"}
    ]


def test_parse_response_falls_back_to_message_id() -> None:
    turn = wire.parse_response({"id": "msg_7", "content": [], "stop_reason": "end_turn"})
    assert turn.request_id == "msg_7" and turn.content == "" and turn.meta == {}


def test_turn_round_trips_to_outgoing_history() -> None:
    turn = wire.parse_response(
        {
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "SIG"},
                {"type": "tool_use", "id": "toolu_1", "name": "a__b", "input": {"x": 1}},
            ],
            "stop_reason": "tool_use",
        }
    )
    message = turn.to_message()
    _, messages = wire.to_anthropic_messages(
        [Message.user("q"), message, Message.tool(turn.tool_calls[0], "done")]
    )
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "t", "signature": "SIG"},
        {"type": "tool_use", "id": "toolu_1", "name": "a__b", "input": {"x": 1}},
    ]


def _events(*items: tuple[str, dict[str, Any]]) -> tuple[wire.StreamState, list[Delta]]:
    state = wire.StreamState()
    deltas: list[Delta] = []
    for name, data in items:
        deltas += state.feed(name, data)
    return state, deltas


STREAM = (
    (
        "message_start",
        {
            "type": "message_start",
            "message": {"id": "msg_s", "usage": {"input_tokens": 20, "output_tokens": 1}},
        },
    ),
    ("content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
    ("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": "pondering"}}),
    ("content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": "SIG=="}}),
    ("content_block_stop", {"index": 0}),
    ("ping", {"type": "ping"}),
    ("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "Hel"}}),
    ("content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "lo"}}),
    ("content_block_stop", {"index": 1}),
    (
        "content_block_start",
        {"index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "a__b", "input": {}}},
    ),
    (
        "content_block_start",
        {"index": 3, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "c__d", "input": {}}},
    ),
    ("content_block_delta", {"index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
    ("content_block_delta", {"index": 3, "delta": {"type": "input_json_delta", "partial_json": '{"y": '}}),
    ("content_block_delta", {"index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"x": 1'}}),
    ("content_block_delta", {"index": 2, "delta": {"type": "input_json_delta", "partial_json": "}"}}),
    ("content_block_delta", {"index": 3, "delta": {"type": "input_json_delta", "partial_json": '"z"}'}}),
    ("content_block_stop", {"index": 2}),
    ("content_block_stop", {"index": 3}),
    ("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
    ("message_stop", {"type": "message_stop"}),
)


def test_stream_accumulates_blocks_by_index() -> None:
    state, deltas = _events(*STREAM)
    assert state.done and state.error is None
    turn = state.turn("req_s")
    assert turn.content == "Hello" and turn.reasoning == "pondering"
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("toolu_1", "a__b", {"x": 1}),
        ("toolu_2", "c__d", {"y": "z"}),
    ]
    assert (
        turn.finish_reason == "tool_calls" and turn.usage == Usage(20, 30, 50) and turn.request_id == "req_s"
    )
    assert turn.meta[wire.THINKING_META] == [
        {"type": "thinking", "thinking": "pondering", "signature": "SIG=="}
    ]
    assert Delta("reasoning", "pondering") in deltas
    assert [d.text for d in deltas if d.kind == "text"] == ["Hel", "lo"]
    assert Delta("tool_call", index=0, name="a__b") in deltas
    assert Delta("tool_call", '{"y": ', index=1, name="c__d") in deltas


def test_stream_without_message_stop_is_not_done() -> None:
    state, _ = _events(*STREAM[:-1])
    assert not state.done


def test_stream_error_event_is_kept() -> None:
    state, _ = _events(
        STREAM[0],
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
    assert state.error == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def test_stream_broken_tool_json_is_reported_on_the_call() -> None:
    state, _ = _events(
        (
            "content_block_start",
            {"index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "a__b", "input": {}}},
        ),
        ("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": "[1, 2"}}),
        ("message_stop", {}),
    )
    call = state.turn().tool_calls[0]
    assert call.arguments == {} and call.error and call.raw_arguments == "[1, 2"


def test_stream_ignores_unknown_and_malformed_events() -> None:
    state, deltas = _events(
        ("content_block_delta", {"index": 9, "delta": {"type": "text_delta", "text": "lost"}}),
        ("content_block_start", {"index": "x", "content_block": {}}),
        ("something_new", {"a": 1}),
        ("content_block_start", {"index": 0, "content_block": {"type": "redacted_thinking", "data": "D"}}),
        ("message_stop", {}),
    )
    assert deltas == []
    assert state.turn().meta[wire.THINKING_META] == [{"type": "redacted_thinking", "data": "D"}]


# ============================================================================================
# the HTTP provider, against the fake model server on 127.0.0.1

KEY = "sk-ant-secret-key"


@pytest.fixture(scope="module")
def _running() -> Iterator[FakeModelServer]:
    with running_model_server() as running:
        yield running


@pytest.fixture
def server(_running: FakeModelServer) -> FakeModelServer:
    """The module's fake model server, with no replies queued and no requests recorded."""
    _running.replies.clear()
    _running.requests.clear()
    _running.handler = None
    return _running


@asynccontextmanager
async def _provider(
    server: FakeModelServer,
    sleeps: SleepRecorder,
    *,
    client: httpx.AsyncClient | None = None,
    retry: RetryPolicy | None = None,
    **settings: Any,
) -> AsyncIterator[AnthropicProvider]:
    """An AnthropicProvider for ``server``; ``settings`` as in the ``llm`` section."""
    llm = LLMConfig(
        provider="anthropic", endpoint=server.base_url, model="claude-test", api_key=KEY, **settings
    )
    retry = retry or RetryPolicy(max_retries=2, sleep=sleeps, rand=lambda: 0.0)
    async with AsyncExitStack() as stack:
        if client is None:
            client = await stack.enter_async_context(build_client(llm))
        yield AnthropicProvider(llm, client=client, retry=retry)


@pytest.fixture
async def streaming(
    server: FakeModelServer, sleeps: SleepRecorder, http_client: httpx.AsyncClient
) -> AsyncIterator[AnthropicProvider]:
    async with _provider(server, sleeps, client=http_client) as provider:
        yield provider


@pytest.fixture
async def plain(
    server: FakeModelServer, sleeps: SleepRecorder, http_client: httpx.AsyncClient
) -> AsyncIterator[AnthropicProvider]:
    async with _provider(server, sleeps, client=http_client, stream=False) as provider:
        yield provider


def _request(*tools: ToolSpec, messages: list[Message] | None = None) -> ModelRequest:
    return ModelRequest(
        messages or [Message.system("be brief"), Message.user("is port 8000 free?")], tools=tools
    )


async def test_plain_text_turn_headers_and_body(server: FakeModelServer, plain: AnthropicProvider) -> None:
    server.enqueue(
        Reply.json(shapes.message("Port 8000 is free.", usage=(12, 4)), headers={"request-id": "req_abc"})
    )
    with anyio.fail_after(20):
        turn = await plain.complete(_request(_spec()))
    assert turn.content == "Port 8000 is free." and turn.tool_calls == ()
    assert turn.finish_reason == "stop" and turn.usage == Usage(12, 4, 16) and turn.request_id == "req_abc"
    assert turn.max_output_tokens == 4096  # the cap the request carried (the loop reads it)
    sent = server.last
    assert sent.method == "POST" and sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.json
    assert body["max_tokens"] == 4096 and body["system"] == "be brief" and "stream" not in body
    assert body["tools"][0]["input_schema"]["type"] == "object"


async def test_streamed_thinking_text_and_parallel_calls(
    server: FakeModelServer, streaming: AnthropicProvider
) -> None:
    server.enqueue(
        Reply.sse(
            shapes.stream_events(
                "Checking both.",
                thinking="The user wants ports.",
                signature="SIG/abc==",
                calls=[
                    ("toolu_1", "ports__check", {"port": 8000}),
                    ("toolu_2", "ports__check", {"port": 8001}),
                ],
                usage=(30, 12),
            ),
            headers={"request-id": "req_s"},
            done=False,
        )
    )
    deltas: list[Delta] = []
    with anyio.fail_after(20):
        turn = await streaming.complete(_request(_spec()), deltas.append)
    assert server.last.json["stream"] is True and server.last.headers["accept"] == "text/event-stream"
    assert turn.content == "Checking both." and turn.reasoning == "The user wants ports."
    assert "ports." not in turn.content
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [
        ("toolu_1", {"port": 8000}),
        ("toolu_2", {"port": 8001}),
    ]
    assert (
        turn.finish_reason == "tool_calls" and turn.usage == Usage(30, 12, 42) and turn.request_id == "req_s"
    )
    assert "".join(d.text for d in deltas if d.kind == "text") == "Checking both."
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "The user wants ports."
    assert {d.index for d in deltas if d.kind == "tool_call"} == {0, 1}

    # the next request replays thinking with its signature and pairs every call with its result
    server.enqueue(Reply.sse(shapes.stream_events("Both free."), done=False))
    history = [
        *_request().messages,
        turn.to_message(),
        Message.tool(turn.tool_calls[0], "free"),
        Message.tool(turn.tool_calls[1], "free"),
    ]
    with anyio.fail_after(20):
        final = await streaming.complete(_request(_spec(), messages=history))
    assert final.content == "Both free."
    messages = server.last.json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants ports.",
        "signature": "SIG/abc==",
    }
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["toolu_1", "toolu_2"]


async def test_streamed_single_call(server: FakeModelServer, streaming: AnthropicProvider) -> None:
    server.enqueue(
        Reply.sse(shapes.stream_events(calls=[("toolu_9", "time__now", {"tz": "UTC"})]), done=False)
    )
    with anyio.fail_after(20):
        turn = await streaming.complete(_request(_spec("time__now")))
    assert turn.content == "" and [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("time__now", {"tz": "UTC"})
    ]


async def test_plain_parallel_calls(server: FakeModelServer, plain: AnthropicProvider) -> None:
    server.enqueue(
        Reply.json(shapes.message(calls=[("t1", "a__b", {"x": 1}), ("t2", "c__d", {})], thinking="hm"))
    )
    deltas: list[Delta] = []
    with anyio.fail_after(20):
        turn = await plain.complete(_request(), deltas.append)
    assert [c.id for c in turn.tool_calls] == ["t1", "t2"] and turn.reasoning == "hm" and turn.content == ""
    assert [(d.kind, d.index, d.name) for d in deltas] == [
        ("reasoning", None, None),
        ("tool_call", 0, "a__b"),
        ("tool_call", 1, "c__d"),
    ]  # a whole answer is reported once, after it parsed


async def test_from_config_max_tokens_headers_and_url(server: FakeModelServer) -> None:
    llm = LLMConfig(
        endpoint=server.url,
        provider="anthropic",
        model="claude-x",
        api_key=KEY,
        stream=False,
        max_output_tokens=77,
        headers={"anthropic-beta": "tools-2024"},
        temperature=0.1,
    )
    server.enqueue(Reply.json(shapes.message("ok")))
    async with build_client(llm) as client:
        provider = AnthropicProvider(llm, client=client)
        with anyio.fail_after(20):
            await provider.complete(_request())
    assert server.last.path == "/v1/messages"
    assert server.last.json["max_tokens"] == 77 and server.last.json["temperature"] == 0.1
    assert server.last.json["model"] == "claude-x" and server.last.headers["anthropic-beta"] == "tools-2024"


async def test_proxy_answering_json_to_a_stream_request(
    server: FakeModelServer, streaming: AnthropicProvider
) -> None:
    server.enqueue(Reply.json(shapes.message("whole")))
    deltas: list[Delta] = []
    with anyio.fail_after(20):
        turn = await streaming.complete(_request(), deltas.append)
    assert turn.content == "whole" and deltas == [Delta("text", "whole")]


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("stream", [False, True])
async def test_overloaded_529_is_retried(
    server: FakeModelServer, sleeps: SleepRecorder, stream: bool
) -> None:
    server.enqueue(
        Reply.json(shapes.error_body("overloaded_error", "Overloaded"), status=529),
        Reply.json(shapes.message("fine"))
        if not stream
        else Reply.sse(shapes.stream_events("fine"), done=False),
    )
    async with _provider(server, sleeps, stream=stream) as provider:
        with anyio.fail_after(20):
            turn = await provider.complete(_request())
    assert turn.content == "fine" and len(server.requests) == 2 and len(sleeps.delays) == 1


async def test_rate_limit_honours_retry_after(
    server: FakeModelServer, sleeps: SleepRecorder, plain: AnthropicProvider
) -> None:
    server.enqueue(
        Reply.json(
            shapes.error_body("rate_limit_error", "slow down"), status=429, headers={"retry-after": "3"}
        ),
        Reply.json(shapes.message("ok")),
    )
    with anyio.fail_after(20):
        await plain.complete(_request())
    assert sleeps.delays == [3.0]


async def test_retries_run_out(
    server: FakeModelServer, sleeps: SleepRecorder, plain: AnthropicProvider
) -> None:
    server.enqueue(*[Reply.json(shapes.error_body("api_error", "boom"), status=500)] * 3)
    with anyio.fail_after(20), pytest.raises(ProviderHTTPError) as info:
        await plain.complete(_request())
    assert info.value.status == 500 and info.value.message == "boom" and len(server.requests) == 3


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (401, shapes.error_body("authentication_error", "invalid x-api-key")),
        (
            400,
            shapes.error_body(
                "invalid_request_error", "messages.1: tool_use ids were found without tool_result"
            ),
        ),
        (404, shapes.error_body("not_found_error", "model: claude-nope")),
        (
            429,
            shapes.error_body("rate_limit_error", "spend limit", error_code="enforced_spend_limit_reached"),
        ),
    ],
)
async def test_terminal_errors_are_not_retried(
    server: FakeModelServer, plain: AnthropicProvider, status: int, body: dict[str, Any]
) -> None:
    server.enqueue(Reply.json(body, status=status, headers={"request-id": "req_t"}))
    with anyio.fail_after(20), pytest.raises(ProviderHTTPError) as info:
        await plain.complete(_request())
    assert info.value.terminal and info.value.status == status and info.value.request_id == "req_t"
    assert len(server.requests) == 1 and KEY not in str(info.value)


async def test_prompt_too_long_is_context_length(server: FakeModelServer, plain: AnthropicProvider) -> None:
    server.enqueue(
        Reply.json(
            shapes.error_body("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
            status=400,
        )
    )
    with anyio.fail_after(20), pytest.raises(ContextLengthError):
        await plain.complete(_request())
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_context_window_stop_reason_is_context_length(
    server: FakeModelServer, sleeps: SleepRecorder, stream: bool
) -> None:
    reason = "model_context_window_exceeded"
    server.enqueue(
        Reply.sse(shapes.stream_events("partial", stop_reason=reason), done=False)
        if stream
        else Reply.json(shapes.message("partial", stop_reason=reason))
    )
    async with _provider(server, sleeps, stream=stream) as provider:
        with anyio.fail_after(20), pytest.raises(ContextLengthError):
            await provider.complete(_request())


async def test_error_event_before_any_delta_is_retried(
    server: FakeModelServer, streaming: AnthropicProvider
) -> None:
    events = shapes.stream_events("x")
    server.enqueue(
        Reply.sse([events[0], shapes.error_event("overloaded_error", "Overloaded")], done=False),
        Reply.sse(shapes.stream_events("recovered"), done=False),
    )
    with anyio.fail_after(20):
        turn = await streaming.complete(_request())
    assert turn.content == "recovered" and len(server.requests) == 2


async def test_error_event_after_a_delta_is_not_retried(
    server: FakeModelServer, streaming: AnthropicProvider
) -> None:
    events = shapes.stream_events("some text here")
    server.enqueue(Reply.sse([*events[:5], shapes.error_event("overloaded_error", "Overloaded")], done=False))
    deltas: list[Delta] = []
    with anyio.fail_after(20), pytest.raises(ProviderResponseError) as info:
        await streaming.complete(_request(), deltas.append)
    assert "Overloaded" in str(info.value) and not info.value.retryable
    assert len(server.requests) == 1 and deltas


async def test_error_event_invalid_request_is_terminal(
    server: FakeModelServer, streaming: AnthropicProvider
) -> None:
    server.enqueue(Reply.sse([shapes.error_event("invalid_request_error", "bad")], done=False))
    with anyio.fail_after(20), pytest.raises(ProviderResponseError) as info:
        await streaming.complete(_request())
    assert info.value.terminal and len(server.requests) == 1


async def test_stream_without_message_stop_is_broken(
    server: FakeModelServer, streaming: AnthropicProvider
) -> None:
    server.enqueue(*[Reply.sse(shapes.stream_events(calls=[("t", "a__b", {})], stop=False), done=False)] * 3)
    with anyio.fail_after(20), pytest.raises(ProviderResponseError, match="message_stop"):
        await streaming.complete(_request())
    assert len(server.requests) == 1  # a tool-call delta was already reported: no retry


async def test_stream_cut_before_any_delta_is_retried(
    server: FakeModelServer, streaming: AnthropicProvider
) -> None:
    server.enqueue(
        Reply.sse(shapes.stream_events("text"), done=False, abort_after=1),
        Reply.sse(shapes.stream_events("again"), done=False),
    )
    with anyio.fail_after(20):
        turn = await streaming.complete(_request())
    assert turn.content == "again" and len(server.requests) == 2


async def test_stream_cut_after_deltas_fails(server: FakeModelServer, streaming: AnthropicProvider) -> None:
    server.enqueue(Reply.sse(shapes.stream_events("a long answer"), done=False, abort_after=5))
    with anyio.fail_after(20), pytest.raises(ProviderError) as info:
        await streaming.complete(_request(), lambda d: None)
    assert not info.value.retryable and len(server.requests) == 1


async def test_error_in_a_200_body(server: FakeModelServer, plain: AnthropicProvider) -> None:
    server.enqueue(Reply.json(shapes.error_body("invalid_request_error", "nope")))
    with anyio.fail_after(20), pytest.raises(ProviderResponseError, match="nope"):
        await plain.complete(_request())


async def test_non_json_answer(server: FakeModelServer, sleeps: SleepRecorder) -> None:
    """A web page is no API's answer: said so, not retried (JSON cut short is retried)."""
    server.enqueue(*[Reply(body=b"<html>gateway</html>")] * 2)
    async with _provider(
        server, sleeps, stream=False, retry=RetryPolicy(max_retries=1, sleep=sleeps)
    ) as provider:
        with (
            anyio.fail_after(20),
            pytest.raises(ProviderResponseError, match="not the Anthropic Messages API"),
        ):
            await provider.complete(_request())
    assert len(server.requests) == 1
    server.replies.clear()
    server.enqueue(*[Reply(body=b'{"type": "mess', headers={"content-type": "application/json"})] * 2)
    async with _provider(
        server, sleeps, stream=False, retry=RetryPolicy(max_retries=1, sleep=sleeps)
    ) as provider:
        with anyio.fail_after(20), pytest.raises(ProviderResponseError, match="not JSON"):
            await provider.complete(_request())
    assert len(server.requests) == 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused(sleeps: SleepRecorder) -> None:
    llm = LLMConfig(
        provider="anthropic", endpoint=f"http://127.0.0.1:{_free_port()}/v1", model="m", api_key=KEY
    )
    async with build_client(llm) as client:
        provider = AnthropicProvider(llm, client=client, retry=RetryPolicy(sleep=sleeps))
        with anyio.fail_after(20), pytest.raises(ProviderConnectionError, match=r"at http://127\.0\.0\.1"):
            await provider.complete(_request())


# ---------------------------------------------------------------------------------- finish_turn

HERMES = '<tool_call>{"name": "ports__check", "arguments": {"port": 1}}</tool_call>'


@pytest.mark.parametrize(
    ("content", "native", "style", "tools", "expected_calls", "expected_content", "expected_reasoning"),
    [
        ("<think>plan</think>Answer.", (), "auto", True, [], "Answer.", "plan"),
        (HERMES, (), "auto", True, ["ports__check"], "", ""),
        (HERMES, (), "text", True, ["ports__check"], "", ""),
        (HERMES, (), "native", True, [], HERMES, ""),
        (HERMES, (), "auto", False, [], HERMES, ""),
        (
            HERMES.replace("ports__check", "nope__x"),
            (),
            "auto",
            True,
            [],
            HERMES.replace("ports__check", "nope__x"),
            "",
        ),
        (HERMES, (CALL_B,), "auto", True, ["time__now"], HERMES, ""),
        ("Plain answer.", (), "auto", True, [], "Plain answer.", ""),
    ],
)
def test_finish_turn(
    content: str,
    native: tuple[ToolCall, ...],
    style: str,
    tools: bool,
    expected_calls: list[str],
    expected_content: str,
    expected_reasoning: str,
) -> None:
    request = ModelRequest([Message.user("q")], tools=[_spec()] if tools else [])
    turn = finish_turn(Turn(content=content, tool_calls=native, usage=Usage(1, 1, 2)), request, style=style)
    assert [c.name for c in turn.tool_calls] == expected_calls
    assert turn.content == expected_content and turn.reasoning == expected_reasoning
    if expected_calls and not native:
        assert turn.finish_reason == "tool_calls" and turn.tool_calls[0].arguments == {"port": 1}


def test_finish_turn_estimates_missing_usage() -> None:
    request = ModelRequest([Message.user("x" * 400)])
    turn = finish_turn(Turn(content="y" * 40), request)
    assert turn.usage.estimated and turn.usage.prompt_tokens == 100 and turn.usage.completion_tokens == 10
    reported = Turn(content="y", usage=Usage(5, 1, 6))
    assert finish_turn(reported, request) is reported


async def test_text_written_call_is_extracted_end_to_end(
    server: FakeModelServer, plain: AnthropicProvider
) -> None:
    server.enqueue(Reply.json(shapes.message(HERMES)))
    with anyio.fail_after(20):
        turn = await plain.complete(_request(_spec()))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("ports__check", {"port": 1})
    ] and turn.content == ""


async def test_refused_without_a_hint_is_retried(sleeps: SleepRecorder) -> None:
    """A remote endpoint that refuses may be restarting: retried (the endpoint is made remote here)."""
    llm = LLMConfig(
        provider="anthropic", endpoint=f"http://127.0.0.1:{_free_port()}/v1", model="m", api_key=KEY
    )
    endpoint = replace(resolve_endpoint(llm), local=False)
    async with build_client(llm) as client:
        provider = AnthropicProvider(
            llm, client=client, endpoint=endpoint, retry=RetryPolicy(max_retries=2, sleep=sleeps)
        )
        with anyio.fail_after(20), pytest.raises(ProviderConnectionError) as info:
            await provider.complete(_request())
    assert info.value.retryable and len(sleeps.delays) == 2


async def test_a_refusing_loopback_endpoint_says_so_at_once() -> None:
    llm = LLMConfig(
        endpoint=f"http://127.0.0.1:{_free_port()}", provider="anthropic", model="m", max_retries=2
    )
    async with build_client(llm) as client:
        provider = AnthropicProvider(llm, client=client)
        with anyio.fail_after(20), pytest.raises(ProviderConnectionError) as info:
            await provider.complete(_request())
    assert not info.value.terminal and not info.value.retryable and "127.0.0.1" in str(info.value)


async def test_a_raising_on_delta_does_not_break_the_call(
    server: FakeModelServer, streaming: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(Reply.sse(shapes.stream_events("hello there"), done=False))

    def bad(delta: Delta) -> None:
        raise RuntimeError("callback bug")

    with anyio.fail_after(20):
        turn = await streaming.complete(_request(), bad)
    assert turn.content == "hello there" and caplog.text.count("on_delta callback raised") == 1


def test_history_with_calls_sent_without_tools_is_written_as_text() -> None:
    history = [
        Message.user("q"),
        Message.assistant("Checking.", [CALL_A]),
        Message.tool(CALL_A, "free"),
        Message.user("Answer now."),
    ]
    body = wire.build_request(ModelRequest(history), model="m", stream=False)
    assert "tools" not in body
    assert "tool_use" not in str(body) and "tool_result" not in str(body)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "text", "text": '[called ports__check with {"port":8000}]'},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[result of ports__check]\nfree"},
                {"type": "text", "text": "Answer now."},
            ],
        },
    ]


# ---------------------------------------------------------------------------------- factory


async def test_factory_routes_anthropic(server: FakeModelServer, http_client: httpx.AsyncClient) -> None:
    by_host = create_provider(LLMConfig(endpoint="https://api.anthropic.com", model="claude-x"), http_client)
    assert isinstance(by_host, AnthropicProvider) and by_host.url == "https://api.anthropic.com/v1/messages"
    llm = LLMConfig(endpoint=server.url, provider="anthropic", model="claude-x", api_key=KEY)
    provider = create_provider(llm, http_client)
    assert isinstance(provider, AnthropicProvider)
    server.enqueue(Reply.sse(shapes.stream_events("via factory"), done=False))
    with anyio.fail_after(20):
        assert (await provider.complete(_request())).content == "via factory"
    assert server.last.path == "/v1/messages" and server.last.headers["x-api-key"] == KEY
    assert not http_client.is_closed  # the caller's client stays the caller's


async def test_open_provider_owns_its_client_for_anthropic(server: FakeModelServer) -> None:
    llm = LLMConfig(endpoint=server.url, provider="anthropic", model="claude-x", stream=False)
    server.enqueue(Reply.json(shapes.message("opened")))
    async with open_provider(llm) as provider:
        with anyio.fail_after(20):
            assert (await provider.complete(_request())).content == "opened"


# ---------------------------------------------------------------------------------- with the loop


async def test_the_loop_over_anthropic_with_an_early_stop(server: FakeModelServer) -> None:
    tools = MemoryToolSource()
    tools.add("check", lambda port: f"port {port} free", parameters=_spec().parameters)
    calls = [("toolu_1", "check", {"port": 1}), ("toolu_2", "check", {"port": 2})]
    server.enqueue(
        Reply.sse(shapes.stream_events("Checking.", calls=calls, thinking="hm"), done=False),
        Reply.sse(shapes.stream_events("Both free."), done=False),
    )
    llm = LLMConfig(endpoint=server.url, provider="anthropic", model="claude-x", api_key=KEY)
    async with open_provider(llm) as provider:
        with anyio.fail_after(20):
            result = await run(
                "ports?", provider=provider, tools=tools, limits=Limits(max_rounds=1, early_stop=True)
            )
    assert result.answer == "Both free." and result.early_stopped
    first, last = (r.json for r in server.requests)
    assert "tools" in first and "tools" not in last  # the best-effort call offers no tools...
    assert "tool_use" not in str(last["messages"]) and "tool_result" not in str(
        last["messages"]
    )  # ...so no tool blocks
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user"]
