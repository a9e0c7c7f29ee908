"""Gemini generateContent: the pure wire module, then the HTTP provider against the fake model server."""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import Limits, LLMConfig
from mcp_agent.exceptions import ContextLengthError, ProviderError, ProviderHTTPError, ProviderResponseError
from mcp_agent.loop.run import run
from mcp_agent.messages import Delta, Message, ToolCall, ToolSpec, Turn, Usage
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.factory import build_client, create_provider, open_provider
from mcp_agent.providers.gemini import GeminiProvider
from mcp_agent.providers.gemini import _wire as wire
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.turns import finish_turn
from mcp_agent.tools.memory import MemoryToolSource
from mcp_agent.tools.schema import compile_tool_schema
from tests.fakes import gemini_shapes as shapes
from tests.fakes.model_server import FakeModelServer, Reply, running_model_server
from tests.providers.conftest import SleepRecorder

SIG = "Cq4BAVSoXO7+/=="  # signatures are opaque base64: replayed byte for byte


def _ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"call_{next(counter)}"


def _spec(name: str = "ports__check", **variants: Any) -> ToolSpec:
    return ToolSpec(
        name=name,
        description="Check a port.",
        parameters={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"port": {"type": "integer"}},
            "required": ["port"],
            "additionalProperties": False,
        },
        variants=variants,
    )


# --------------------------------------------------------------------------------------------
# outgoing


def test_tools_default_to_parameters_json_schema_minus_dollar_schema() -> None:
    (tools,) = wire.to_gemini_tools([_spec()])
    (decl,) = tools["functionDeclarations"]
    assert decl["name"] == "ports__check" and decl["description"] == "Check a port."
    assert decl["parametersJsonSchema"] == {
        "type": "object",
        "properties": {"port": {"type": "integer"}},
        "required": ["port"],
        "additionalProperties": False,
    }
    assert "parameters" not in decl


def test_tools_json_schema_prefers_openai_variant() -> None:
    (tools,) = wire.to_gemini_tools(
        [_spec(openai={"type": "object", "properties": {"q": {"type": "string"}}})]
    )
    assert tools["functionDeclarations"][0]["parametersJsonSchema"]["properties"] == {"q": {"type": "string"}}


def test_tools_parameters_subset_uses_gemini_variant() -> None:
    subset = {"type": "object", "properties": {"port": {"type": "integer", "nullable": True}}}
    (tools,) = wire.to_gemini_tools(
        [_spec(gemini=subset), _spec("t__empty", gemini={"type": "object", "properties": {}})],
        json_schema=False,
    )
    first, empty = tools["functionDeclarations"]
    assert first["parameters"] == subset and "parametersJsonSchema" not in first
    assert "parameters" not in empty  # Gemini rejects an OBJECT with no properties


def test_no_tools_means_no_tools_key() -> None:
    assert wire.to_gemini_tools([]) == []
    assert "tools" not in wire.build_request(ModelRequest([Message.user("q")]))


def test_system_instruction_and_roles() -> None:
    system, contents = wire.to_gemini_contents(
        [Message.system("be brief"), Message.user("hi"), Message.assistant("hello"), Message.user("again")]
    )
    assert system == {"parts": [{"text": "be brief"}]}
    assert contents == [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"text": "hello"}]},
        {"role": "user", "parts": [{"text": "again"}]},
    ]


def test_function_responses_by_name_in_call_order_in_one_user_turn() -> None:
    a = ToolCall("call_x1", "ports__check", {"port": 1})
    b = ToolCall("call_x2", "time__now", {})
    history = [
        Message.user("q"),
        Message.assistant("", [a, b]),
        Message.tool(b, "noon"),
        Message(
            role="tool", content="refused", tool_call_id="call_x1", is_error=True
        ),  # no name: taken from the call
        Message.user("thanks"),
    ]
    _, contents = wire.to_gemini_contents(history)
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "ports__check", "args": {"port": 1}}},
            {"functionCall": {"name": "time__now", "args": {}}},
        ],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "ports__check", "response": {"error": "refused"}}},
            {"functionResponse": {"name": "time__now", "response": {"output": "noon"}}},
            {"text": "thanks"},
        ],
    }
    assert len(contents) == 3


def test_missing_result_is_answered_and_stray_result_becomes_text() -> None:
    a = ToolCall("call_1", "a__b", {})
    stray = Message(role="tool", content="zzz", tool_call_id="call_other", name="x__y")
    _, contents = wire.to_gemini_contents([Message.user("q"), Message.assistant("", [a]), stray])
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "a__b", "response": {"error": "not executed: no result was recorded"}}},
        {"text": "[result of x__y]\nzzz"},
    ]


def test_native_call_id_is_echoed() -> None:
    a = ToolCall("call_1", "a__b", {}, meta={wire.NATIVE_ID: "g-7"})
    _, contents = wire.to_gemini_contents(
        [Message.user("q"), Message.assistant("", [a]), Message.tool(a, "r")]
    )
    assert contents[1]["parts"][0]["functionCall"]["id"] == "g-7"
    assert contents[2]["parts"][0]["functionResponse"]["id"] == "g-7"


def test_signature_replayed_from_raw_parts_exactly() -> None:
    raw = [
        {"text": "Let me check.", "thoughtSignature": "TEXTSIG"},
        {"functionCall": {"name": "a__b", "args": {"x": 1}}, "thoughtSignature": SIG},
        {"functionCall": {"name": "c__d", "args": {}}},
    ]
    a, b = ToolCall("call_1", "a__b", {"x": 1}), ToolCall("call_2", "c__d", {})
    message = Message(
        role="assistant", content="Let me check.", tool_calls=(a, b), meta={wire.PARTS_META: raw}
    )
    _, contents = wire.to_gemini_contents(
        [Message.user("q"), message, Message.tool(a, "1"), Message.tool(b, "2")]
    )
    assert contents[1]["parts"] == raw


def test_rebuilt_when_message_no_longer_matches_raw_parts() -> None:
    raw = [{"functionCall": {"name": "a__b", "args": {}}, "thoughtSignature": SIG}]
    a = ToolCall("call_1", "a__b", {}, meta={wire.SIGNATURE: SIG})
    extra = ToolCall("call_2", "c__d", {"k": "v"})
    message = Message(role="assistant", content="hm", tool_calls=(a, extra), meta={wire.PARTS_META: raw})
    _, contents = wire.to_gemini_contents(
        [Message.user("q"), message, Message.tool(a, "1"), Message.tool(extra, "2")]
    )
    assert contents[1]["parts"] == [
        {"text": "hm"},
        {"functionCall": {"name": "a__b", "args": {}}, "thoughtSignature": SIG},
        {"functionCall": {"name": "c__d", "args": {"k": "v"}}},
    ]


def test_build_request_generation_config() -> None:
    body = wire.build_request(
        ModelRequest([Message.user("q")], tools=[_spec()], temperature=0.3, max_output_tokens=50),
        include_thoughts=True,
    )
    assert body["generationConfig"] == {
        "temperature": 0.3,
        "maxOutputTokens": 50,
        "thinkingConfig": {"includeThoughts": True},
    }
    assert (
        "systemInstruction" not in body
        and body["tools"][0]["functionDeclarations"][0]["name"] == "ports__check"
    )
    assert "generationConfig" not in wire.build_request(ModelRequest([Message.user("q")]))


# --------------------------------------------------------------------------------------------
# incoming


@pytest.mark.parametrize(
    ("reason", "has_calls", "expected"),
    [
        ("STOP", False, "stop"),
        ("STOP", True, "tool_calls"),
        (None, True, "tool_calls"),
        (None, False, None),
        ("MAX_TOKENS", False, "length"),
        ("MAX_TOKENS", True, "length"),
        ("SAFETY", False, "content_filter"),
        ("RECITATION", False, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", False, "malformed_function_call"),
        ("UNEXPECTED_TOOL_CALL", False, "unexpected_tool_call"),
    ],
)
def test_map_finish_reason(reason: str | None, has_calls: bool, expected: str | None) -> None:
    assert wire.map_finish_reason(reason, has_calls=has_calls) == expected


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (None, Usage()),
        ({"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}, Usage(10, 5, 15)),
        (
            {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "thoughtsTokenCount": 7,
                "totalTokenCount": 22,
            },
            Usage(10, 12, 22),
        ),
        ({"promptTokenCount": 4, "thoughtsTokenCount": 2}, Usage(4, 2, 6)),
    ],
)
def test_parse_usage(meta: dict[str, Any] | None, expected: Usage) -> None:
    assert wire.parse_usage(meta) == expected


def _response(parts: list[dict[str, Any]], finish: str | None = "STOP", **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **extra}


def test_parse_response_parallel_calls_get_unique_ids_and_keep_signatures() -> None:
    ids = _ids()
    body = _response(
        [
            {"text": "thinking out loud", "thought": True},
            {"functionCall": {"name": "a__b", "args": {"x": 1}}, "thoughtSignature": SIG},
            {"functionCall": {"name": "a__b", "args": {"x": 2}}},
        ],
        usageMetadata={"promptTokenCount": 9, "candidatesTokenCount": 3, "thoughtsTokenCount": 4},
        responseId="resp-1",
    )
    turn = wire.parse_response(body, new_id=ids)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_1", "a__b", {"x": 1}),
        ("call_2", "a__b", {"x": 2}),
    ]
    assert turn.tool_calls[0].meta == {wire.SIGNATURE: SIG} and turn.tool_calls[1].meta == {}
    assert turn.content == "" and turn.reasoning == "thinking out loud"
    assert (
        turn.finish_reason == "tool_calls" and turn.usage == Usage(9, 7, 16) and turn.request_id == "resp-1"
    )
    assert turn.meta[wire.PARTS_META] == body["candidates"][0]["content"]["parts"][1:]  # thought dropped
    # a second round gets fresh ids, never repeating the first round's
    again = wire.parse_response(body, new_id=ids)
    assert [c.id for c in again.tool_calls] == ["call_3", "call_4"]


def test_default_ids_are_unique() -> None:
    body = _response([{"functionCall": {"name": "a__b", "args": {}}}] * 3)
    ids = [c.id for _ in range(5) for c in wire.parse_response(body).tool_calls]
    assert len(set(ids)) == 15 and all(i.startswith("call_") for i in ids)


def test_native_function_call_id_kept_in_meta() -> None:
    turn = wire.parse_response(_response([{"functionCall": {"id": "g1", "name": "a__b"}}]), new_id=_ids())
    assert turn.tool_calls[0].meta == {wire.NATIVE_ID: "g1"} and turn.tool_calls[0].arguments == {}


def test_thought_text_never_in_answer() -> None:
    turn = wire.parse_response(_response([{"text": "secret plan", "thought": True}, {"text": "The answer."}]))
    assert turn.content == "The answer." and turn.reasoning == "secret plan"


def test_parse_response_round_trips_through_history() -> None:
    body = _response(
        [{"text": "ok "}, {"functionCall": {"name": "a__b", "args": {"q": "é"}}, "thoughtSignature": SIG}]
    )
    turn = wire.parse_response(body, new_id=_ids())
    history = [Message.user("q"), turn.to_message(), Message.tool(turn.tool_calls[0], "r")]
    _, contents = wire.to_gemini_contents(history)
    assert contents[1]["parts"] == body["candidates"][0]["content"]["parts"]


def test_stream_chunks_join_text_and_keep_late_signature() -> None:
    state = wire.ResponseState(_ids())
    deltas: list[Delta] = []
    for chunk in [
        _response([{"text": "pla", "thought": True}], finish=None),
        _response([{"text": "n", "thought": True}], finish=None),
        _response([{"text": "Hel"}], finish=None),
        [_response([{"text": "lo"}], finish=None)],  # an array wrapper is accepted too
        _response(
            [{"text": "", "thoughtSignature": SIG}],
            usageMetadata={"promptTokenCount": 2, "candidatesTokenCount": 1},
        ),
    ]:
        deltas += state.feed(chunk)
    turn = state.turn()
    assert turn.content == "Hello" and turn.reasoning == "plan" and turn.finish_reason == "stop"
    assert turn.meta[wire.PARTS_META] == [{"text": "Hello", "thoughtSignature": SIG}]
    assert [d.kind for d in deltas] == ["reasoning", "reasoning", "text", "text"]
    assert turn.usage == Usage(2, 1, 3)


def test_stream_text_after_signature_starts_a_new_part() -> None:
    state = wire.ResponseState(_ids())
    state.feed(_response([{"text": "a", "thoughtSignature": "S1"}], finish=None))
    state.feed(_response([{"text": "b"}], finish=None))
    state.feed(_response([{"thoughtSignature": "S2"}]))
    assert state.turn().meta[wire.PARTS_META] == [
        {"text": "a", "thoughtSignature": "S1"},
        {"text": "b"},
        {"thoughtSignature": "S2"},
    ]


def test_stream_call_delta() -> None:
    state = wire.ResponseState(_ids())
    deltas = state.feed(_response([{"functionCall": {"name": "a__b", "args": {"x": 1}}}]))
    assert deltas == [Delta("tool_call", '{"x": 1}', index=0, name="a__b")]


@pytest.mark.parametrize(
    "chunk",
    [
        {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}},
        [{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}],
    ],
)
def test_error_chunks(chunk: Any) -> None:
    state = wire.ResponseState()
    assert state.feed(chunk) == []
    assert state.error is not None and state.error["code"] == 429


def test_blocked_prompt_is_noted() -> None:
    state = wire.ResponseState()
    state.feed({"promptFeedback": {"blockReason": "SAFETY"}})
    assert state.block_reason == "SAFETY" and state.turn().content == ""


def test_malformed_chunks_are_ignored() -> None:
    state = wire.ResponseState()
    for chunk in [
        "x",
        {"candidates": "no"},
        {"candidates": [1]},
        {"candidates": [{"content": {"parts": [3]}}]},
    ]:
        assert state.feed(chunk) == []
    assert state.turn().meta == {}


# ============================================================================================
# the HTTP provider, against the fake model server on 127.0.0.1

KEY = "AIza-secret-gemini-key"


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
) -> AsyncIterator[GeminiProvider]:
    """A GeminiProvider for ``server``; ``settings`` as in the ``llm`` section."""
    llm = LLMConfig(
        provider="gemini", endpoint=server.url + "/v1beta", model="gemini-test", api_key=KEY, **settings
    )
    retry = retry or RetryPolicy(max_retries=2, sleep=sleeps, rand=lambda: 0.0)
    async with AsyncExitStack() as stack:
        if client is None:
            client = await stack.enter_async_context(build_client(llm))
        yield GeminiProvider(llm, client=client, retry=retry)


@pytest.fixture
async def streaming(
    server: FakeModelServer, sleeps: SleepRecorder, http_client: httpx.AsyncClient
) -> AsyncIterator[GeminiProvider]:
    async with _provider(server, sleeps, client=http_client) as provider:
        yield provider


@pytest.fixture
async def plain(
    server: FakeModelServer, sleeps: SleepRecorder, http_client: httpx.AsyncClient
) -> AsyncIterator[GeminiProvider]:
    async with _provider(server, sleeps, client=http_client, stream=False) as provider:
        yield provider


def _request(*tools: ToolSpec, messages: list[Message] | None = None) -> ModelRequest:
    return ModelRequest(
        messages or [Message.system("be brief"), Message.user("is port 8000 free?")], tools=tools
    )


def _stream(*args: Any, **kw: Any) -> Reply:
    return Reply.sse(shapes.stream_chunks(*args, **kw), done=False)


def _no_key_anywhere(server: FakeModelServer) -> None:
    for sent in server.requests:
        assert KEY not in sent.path and KEY not in sent.query
        assert sent.headers["x-goog-api-key"] == KEY


async def test_plain_text_turn_url_header_and_body(server: FakeModelServer, plain: GeminiProvider) -> None:
    server.enqueue(Reply.json(shapes.response("Port 8000 is free.", usage=(11, 3, 2))))
    with anyio.fail_after(20):
        turn = await plain.complete(_request(_spec()))
    assert turn.content == "Port 8000 is free." and turn.finish_reason == "stop"
    assert turn.usage == Usage(11, 5, 16) and turn.request_id == "resp_fake"
    assert turn.max_output_tokens == 8192  # always a cap (thinking tokens count against it)
    sent = server.last
    assert sent.path == "/v1beta/models/gemini-test:generateContent" and sent.query == ""
    assert sent.json["generationConfig"]["maxOutputTokens"] == 8192
    _no_key_anywhere(server)
    body = sent.json
    assert body["systemInstruction"] == {"parts": [{"text": "be brief"}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "is port 8000 free?"}]}]
    decl = body["tools"][0]["functionDeclarations"][0]
    assert "$schema" not in decl["parametersJsonSchema"] and "parameters" not in decl


async def test_streamed_thought_text_and_parallel_calls_then_replay(
    server: FakeModelServer, streaming: GeminiProvider
) -> None:
    server.enqueue(
        _stream(
            "Checking.",
            thought="The user wants ports.",
            calls=[("ports__check", {"port": 8000}), ("ports__check", {"port": 8001})],
            signature=SIG,
            usage=(20, 6, 9),
        )
    )
    deltas: list[Delta] = []
    with anyio.fail_after(20):
        turn = await streaming.complete(_request(_spec()), deltas.append)
    sent = server.last
    assert sent.path == "/v1beta/models/gemini-test:streamGenerateContent" and sent.query == "alt=sse"
    assert turn.content == "Checking." and turn.reasoning == "The user wants ports."
    assert [c.arguments for c in turn.tool_calls] == [{"port": 8000}, {"port": 8001}]
    assert len({c.id for c in turn.tool_calls}) == 2 and turn.finish_reason == "tool_calls"
    assert turn.usage == Usage(20, 15, 35)
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "The user wants ports."
    assert "".join(d.text for d in deltas if d.kind == "text") == "Checking."
    assert [(d.index, d.name) for d in deltas if d.kind == "tool_call"] == [
        (0, "ports__check"),
        (1, "ports__check"),
    ]

    # round two: the signature goes back byte for byte, results by name in call order, ids never repeat
    server.enqueue(_stream(calls=[("ports__check", {"port": 9})]))
    history = [
        *_request().messages,
        turn.to_message(),
        Message.tool(turn.tool_calls[0], "free"),
        Message.tool(turn.tool_calls[1], "in use", is_error=True),
    ]
    with anyio.fail_after(20):
        second = await streaming.complete(_request(_spec(), messages=history))
    contents = server.last.json["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    model_parts = contents[1]["parts"]
    assert model_parts[1] == {
        "functionCall": {"name": "ports__check", "args": {"port": 8000}},
        "thoughtSignature": SIG,
    }
    assert all(not p.get("thought") for p in model_parts)
    assert b'"thoughtSignature":"' + SIG.encode() + b'"' in server.last.body
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "ports__check", "response": {"output": "free"}}},
        {"functionResponse": {"name": "ports__check", "response": {"error": "in use"}}},
    ]
    assert second.tool_calls[0].id not in {c.id for c in turn.tool_calls}
    _no_key_anywhere(server)


async def test_streamed_text_signature_on_an_empty_last_part(
    server: FakeModelServer, streaming: GeminiProvider
) -> None:
    server.enqueue(_stream("All good.", text_signature="TXT-SIG=="))
    with anyio.fail_after(20):
        turn = await streaming.complete(_request())
    assert turn.meta[wire.PARTS_META] == [{"text": "All good.", "thoughtSignature": "TXT-SIG=="}]


async def test_plain_single_call_and_array_body(server: FakeModelServer, plain: GeminiProvider) -> None:
    server.enqueue(Reply.json([shapes.response(calls=[("time__now", {"tz": "UTC"})])]))
    with anyio.fail_after(20):
        turn = await plain.complete(_request(_spec("time__now")))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("time__now", {"tz": "UTC"})]


async def test_a_key_in_the_url_moves_to_the_header(server: FakeModelServer) -> None:
    llm = LLMConfig(
        endpoint=f"{server.url}/v1beta?key={KEY}",
        provider="gemini",
        model="models/gemini-x",
        stream=False,
        max_output_tokens=64,
        temperature=0.0,
    )
    server.enqueue(Reply.json(shapes.response("ok")))
    async with build_client(llm) as client:
        provider = GeminiProvider(llm, client=client)
        with anyio.fail_after(20):
            await provider.complete(_request())
    assert server.last.path == "/v1beta/models/gemini-x:generateContent"
    assert server.last.json["generationConfig"] == {"temperature": 0.0, "maxOutputTokens": 64}
    _no_key_anywhere(server)


async def test_schema_fallback_to_parameters_on_a_400_naming_it(
    server: FakeModelServer, plain: GeminiProvider
) -> None:
    gemini_subset = {"type": "object", "properties": {"port": {"type": "integer"}}}
    spec = _spec(gemini=gemini_subset)
    rejected = shapes.error_body(
        400,
        'Invalid JSON payload received. Unknown name "parameters_json_schema" at '
        "'tools[0].function_declarations[0]': Cannot find field.",
        "INVALID_ARGUMENT",
    )
    server.enqueue(
        Reply.json(rejected, status=400), Reply.json(shapes.response("ok")), Reply.json(shapes.response("ok"))
    )
    with anyio.fail_after(20):
        await plain.complete(_request(spec))
        await plain.complete(_request(spec))
    first, second, third = (r.json["tools"][0]["functionDeclarations"][0] for r in server.requests)
    assert "parametersJsonSchema" in first
    assert second["parameters"] == gemini_subset and "parametersJsonSchema" not in second
    assert third["parameters"] == gemini_subset  # the switch sticks


async def test_other_400_is_terminal_and_keeps_the_schema_mode(
    server: FakeModelServer, plain: GeminiProvider
) -> None:
    server.enqueue(
        Reply.json(
            shapes.error_body(400, "Request contains an invalid argument.", "INVALID_ARGUMENT"), status=400
        )
    )
    with anyio.fail_after(20), pytest.raises(ProviderHTTPError) as info:
        await plain.complete(_request(_spec()))
    assert info.value.terminal and len(server.requests) == 1 and plain.schema_mode == "json_schema"


# ---------------------------------------------------------------------------------- errors


async def test_per_day_quota_is_terminal(server: FakeModelServer, plain: GeminiProvider) -> None:
    body = shapes.error_body(
        429,
        "You exceeded your current quota.",
        "RESOURCE_EXHAUSTED",
        [shapes.quota_failure("GenerateRequestsPerDayPerProjectPerModel-FreeTier"), shapes.retry_info("37s")],
    )
    server.enqueue(Reply.json(body, status=429))
    with anyio.fail_after(20), pytest.raises(ProviderHTTPError) as info:
        await plain.complete(_request())
    assert info.value.terminal and len(server.requests) == 1 and KEY not in str(info.value)


async def test_per_minute_quota_honours_retry_delay(
    server: FakeModelServer, sleeps: SleepRecorder, plain: GeminiProvider
) -> None:
    body = shapes.error_body(
        429,
        "Resource has been exhausted.",
        "RESOURCE_EXHAUSTED",
        [shapes.quota_failure("GenerateRequestsPerMinutePerProjectPerModel"), shapes.retry_info("7s")],
    )
    server.enqueue(Reply.json(body, status=429), Reply.json(shapes.response("ok")))
    with anyio.fail_after(20):
        turn = await plain.complete(_request())
    assert turn.content == "ok" and sleeps.delays == [7.0]


async def test_server_errors_are_retried_until_they_run_out(
    server: FakeModelServer, plain: GeminiProvider
) -> None:
    server.enqueue(
        *[Reply.json(shapes.error_body(503, "The model is overloaded.", "UNAVAILABLE"), status=503)] * 3
    )
    with anyio.fail_after(20), pytest.raises(ProviderHTTPError) as info:
        await plain.complete(_request())
    assert info.value.status == 503 and len(server.requests) == 3


async def test_token_count_error_is_context_length(server: FakeModelServer, plain: GeminiProvider) -> None:
    text = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    server.enqueue(Reply.json(shapes.error_body(400, text, "INVALID_ARGUMENT"), status=400))
    with anyio.fail_after(20), pytest.raises(ContextLengthError):
        await plain.complete(_request())


@pytest.mark.parametrize(
    ("status", "grpc"), [(401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED"), (404, "NOT_FOUND")]
)
async def test_auth_and_not_found_are_terminal(
    server: FakeModelServer, plain: GeminiProvider, status: int, grpc: str
) -> None:
    server.enqueue(Reply.json(shapes.error_body(status, "API key not valid.", grpc), status=status))
    with anyio.fail_after(20), pytest.raises(ProviderHTTPError) as info:
        await plain.complete(_request())
    assert info.value.terminal and len(server.requests) == 1


@pytest.mark.parametrize("wrapped", [False, True])
async def test_error_inside_a_stream(
    server: FakeModelServer, streaming: GeminiProvider, wrapped: bool
) -> None:
    error = shapes.error_body(500, "Internal error encountered.", "INTERNAL")
    server.enqueue(Reply.sse([shapes.sse([error] if wrapped else error)], done=False), _stream("recovered"))
    with anyio.fail_after(20):
        turn = await streaming.complete(_request())
    assert turn.content == "recovered" and len(server.requests) == 2


async def test_error_inside_a_stream_after_text_is_not_retried(
    server: FakeModelServer, streaming: GeminiProvider
) -> None:
    chunks = shapes.stream_chunks("some answer")
    error = shapes.error_body(500, "Internal error encountered.", "INTERNAL")
    server.enqueue(Reply.sse([chunks[0], shapes.sse(error)], done=False))
    with anyio.fail_after(20), pytest.raises(ProviderResponseError, match="Internal error") as info:
        await streaming.complete(_request(), lambda d: None)
    assert not info.value.retryable and len(server.requests) == 1


async def test_stream_without_finish_reason_is_broken(
    server: FakeModelServer, streaming: GeminiProvider
) -> None:
    cut = shapes.stream_chunks("partial")[:-1]
    server.enqueue(Reply.sse(cut, done=False))
    with anyio.fail_after(20), pytest.raises(ProviderResponseError, match="finishReason"):
        await streaming.complete(_request())
    assert len(server.requests) == 1


async def test_stream_cut_before_anything_is_retried(
    server: FakeModelServer, streaming: GeminiProvider
) -> None:
    server.enqueue(Reply.sse(shapes.stream_chunks("x"), done=False, abort_after=0), _stream("again"))
    with anyio.fail_after(20):
        turn = await streaming.complete(_request())
    assert turn.content == "again" and len(server.requests) == 2


async def test_done_marker_from_a_proxy_is_ignored(
    server: FakeModelServer, streaming: GeminiProvider
) -> None:
    server.enqueue(Reply.sse(shapes.stream_chunks("fine"), done=True))
    with anyio.fail_after(20):
        assert (await streaming.complete(_request())).content == "fine"


async def test_malformed_function_call_is_retried(server: FakeModelServer, plain: GeminiProvider) -> None:
    server.enqueue(
        Reply.json(shapes.response(finish="MALFORMED_FUNCTION_CALL")), Reply.json(shapes.response("ok"))
    )
    with anyio.fail_after(20):
        assert (await plain.complete(_request())).content == "ok"
    assert len(server.requests) == 2


async def test_blocked_prompt_is_terminal(server: FakeModelServer, plain: GeminiProvider) -> None:
    server.enqueue(
        Reply.json({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}})
    )
    with anyio.fail_after(20), pytest.raises(ProviderResponseError, match="SAFETY") as info:
        await plain.complete(_request())
    assert info.value.terminal and len(server.requests) == 1


async def test_key_never_logged_or_in_errors(
    server: FakeModelServer, plain: GeminiProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.enqueue(*[Reply.json(shapes.error_body(500, "boom", "INTERNAL"), status=500)] * 3)
    with anyio.fail_after(20), pytest.raises(ProviderError) as info:
        await plain.complete(_request())
    assert KEY not in str(info.value) and KEY not in caplog.text
    assert "boom" in caplog.text  # the retries were logged


# ---------------------------------------------------------------------------------- finish_turn

HERMES = '<tool_call>{"name": "ports__check", "arguments": {"port": 1}}</tool_call>'


@pytest.mark.parametrize(
    ("content", "style", "expected_calls", "expected_content"),
    [
        (HERMES, "auto", ["ports__check"], ""),
        (HERMES, "native", [], HERMES),
        ("<think>p</think>Hi", "auto", [], "Hi"),
    ],
)
def test_finish_turn(content: str, style: str, expected_calls: list[str], expected_content: str) -> None:
    request = ModelRequest([Message.user("q")], tools=[_spec()])
    turn = finish_turn(Turn(content=content, usage=Usage(1, 1, 2)), request, style=style)
    assert [c.name for c in turn.tool_calls] == expected_calls and turn.content == expected_content


async def test_text_written_call_round_trips_as_function_call(
    server: FakeModelServer, plain: GeminiProvider
) -> None:
    # models without native calls (Gemma on the Gemini API) write calls as text
    server.enqueue(Reply.json(shapes.response("Sure. " + HERMES)), Reply.json(shapes.response("done")))
    with anyio.fail_after(20):
        turn = await plain.complete(_request(_spec()))
        assert [(c.name, c.arguments) for c in turn.tool_calls] == [("ports__check", {"port": 1})]
        assert turn.content == "Sure." and turn.finish_reason == "tool_calls"
        history = [*_request().messages, turn.to_message(), Message.tool(turn.tool_calls[0], "free")]
        await plain.complete(_request(_spec(), messages=history))
    contents = server.last.json["contents"]
    assert contents[1]["parts"] == [
        {"text": "Sure."},
        {"functionCall": {"name": "ports__check", "args": {"port": 1}}},
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "ports__check", "response": {"output": "free"}}}
    ]


async def test_missing_usage_is_estimated(server: FakeModelServer, plain: GeminiProvider) -> None:
    body = shapes.response("hello")
    del body["usageMetadata"]
    server.enqueue(Reply.json(body))
    with anyio.fail_after(20):
        turn = await plain.complete(_request())
    assert turn.usage.estimated and turn.usage.total_tokens > 0


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.mark.parametrize("json_schema", [True, False])
def test_compiled_mcp_schema_reaches_the_wire_in_the_right_dialect(json_schema: bool) -> None:
    mcp_schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "path": {"type": ["string", "null"]},
            "options": {"$ref": "#/$defs/Options"},
        },
        "required": ["path"],
        "additionalProperties": False,
        "$defs": {
            "Options": {
                "type": "object",
                "properties": {"depth": {"type": "integer"}},
                "additionalProperties": False,
            }
        },
    }
    compiled = compile_tool_schema(mcp_schema)
    spec = ToolSpec(name="fs__list", parameters=compiled.parameters, variants=compiled.variants)
    (decl,) = wire.to_gemini_tools([spec], json_schema=json_schema)[0]["functionDeclarations"]
    if json_schema:
        sent = decl["parametersJsonSchema"]
        assert "$schema" not in sent and sent["additionalProperties"] is False and "parameters" not in decl
    else:
        sent = decl["parameters"]
        assert not _keys(sent) & {"$schema", "$ref", "$defs", "additionalProperties"}
        assert sent["properties"]["path"] == {"type": "string", "nullable": True}
        assert "parametersJsonSchema" not in decl


async def test_a_raising_on_delta_does_not_break_the_call(
    server: FakeModelServer, streaming: GeminiProvider, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(_stream("hello there"))

    def bad(delta: Delta) -> None:
        raise RuntimeError("callback bug")

    with anyio.fail_after(20):
        turn = await streaming.complete(_request(), bad)
    assert turn.content == "hello there" and caplog.text.count("on_delta callback raised") == 1


@pytest.mark.parametrize(
    ("args", "expected", "has_error"),
    [('{"x": 1}', {"x": 1}, False), ("[1, 2]", {}, True), (None, {}, False), (5, {}, False)],
)
def test_function_call_args_that_are_not_an_object(
    args: Any, expected: dict[str, Any], has_error: bool
) -> None:
    turn = wire.parse_response(_response([{"functionCall": {"name": "a__b", "args": args}}]), new_id=_ids())
    call = turn.tool_calls[0]
    assert call.arguments == expected and (call.error is not None) == has_error


def test_history_with_calls_sent_without_tools_is_written_as_text() -> None:
    a = ToolCall("call_1", "ports__check", {"port": 1}, meta={wire.SIGNATURE: SIG})
    raw = [{"functionCall": {"name": "ports__check", "args": {"port": 1}}, "thoughtSignature": SIG}]
    history = [
        Message.user("q"),
        Message(role="assistant", tool_calls=(a,), meta={wire.PARTS_META: raw}),
        Message.tool(a, "free"),
        Message.user("Answer now."),
    ]
    body = wire.build_request(ModelRequest(history))
    assert "tools" not in body and "functionCall" not in str(body) and "functionResponse" not in str(body)
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [{"text": '[called ports__check with {"port":1}]'}]},
        {"role": "user", "parts": [{"text": "[result of ports__check]\nfree"}, {"text": "Answer now."}]},
    ]


async def test_plain_answer_is_reported_once_after_it_parsed(
    server: FakeModelServer, plain: GeminiProvider
) -> None:
    server.enqueue(
        Reply.json(shapes.response("first try", finish="MALFORMED_FUNCTION_CALL", raw_parts=[])),
        Reply.json(shapes.response("All good.", thought="hmm")),
    )
    deltas: list[Delta] = []
    with anyio.fail_after(20):
        await plain.complete(_request(), deltas.append)
    assert deltas == [Delta("reasoning", "hmm"), Delta("text", "All good.")]


# ---------------------------------------------------------------------------------- factory


async def test_factory_routes_gemini(server: FakeModelServer, http_client: httpx.AsyncClient) -> None:
    llm = LLMConfig(
        endpoint="https://generativelanguage.googleapis.com", model="gemini-2.5-flash", api_key=KEY
    )
    by_host = create_provider(llm, http_client)
    assert isinstance(by_host, GeminiProvider)
    assert by_host.url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    local = LLMConfig(endpoint=server.url + "/v1beta", provider="gemini", model="gemini-x", api_key=KEY)
    server.enqueue(_stream("via factory"))
    async with open_provider(local) as provider:
        assert isinstance(provider, GeminiProvider)
        with anyio.fail_after(20):
            assert (await provider.complete(_request())).content == "via factory"
    assert server.last.path == "/v1beta/models/gemini-x:streamGenerateContent"
    _no_key_anywhere(server)


# ---------------------------------------------------------------------------------- with the loop


async def test_the_loop_over_gemini_replays_signatures_each_round(server: FakeModelServer) -> None:
    tools = MemoryToolSource()
    tools.add("check", lambda port: f"port {port} free", parameters=_spec().parameters)
    server.enqueue(
        _stream("Checking.", calls=[("check", {"port": 1}), ("check", {"port": 2})], signature="SIG-1"),
        _stream(calls=[("check", {"port": 3})], signature="SIG-2"),
        _stream("All free."),
    )
    llm = LLMConfig(endpoint=server.url + "/v1beta", provider="gemini", model="gemini-x", api_key=KEY)
    async with open_provider(llm) as provider:
        with anyio.fail_after(20):
            result = await run("ports?", provider=provider, tools=tools, limits=Limits(max_rounds=5))
    assert result.answer == "All free." and result.termination_reason == "success"
    contents = server.last.json["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user"]
    assert contents[1]["parts"][1]["thoughtSignature"] == "SIG-1"
    assert contents[3]["parts"][0]["thoughtSignature"] == "SIG-2"
    assert [p["functionResponse"]["response"] for p in contents[2]["parts"]] == [
        {"output": "port 1 free"},
        {"output": "port 2 free"},
    ]
    _no_key_anywhere(server)
