"""Sizes a model server cannot push past: ``llm.maxResponseBytes`` and ``llm.maxToolArgumentChars``,
for every provider, over real HTTP against the fake model server (and the loop's ending)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import LLMConfig
from mcp_agent.exceptions import ProviderResponseError
from mcp_agent.loop.result import TerminationReason
from mcp_agent.loop.run import run
from mcp_agent.messages import Message, ToolCall, ToolSpec, Turn
from mcp_agent.providers.anthropic import AnthropicProvider
from mcp_agent.providers.base import ModelRequest, Provider
from mcp_agent.providers.gemini import GeminiProvider
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.openai import OpenAICompatProvider
from mcp_agent.providers.servers.endpoints import resolve_endpoint
from mcp_agent.providers.servers.identify import list_models
from mcp_agent.providers.turns import bound_arguments
from tests.fakes import anthropic_shapes, gemini_shapes, openai_shapes
from tests.fakes.model_server import FakeModelServer, Reply
from tests.loop._helpers import assert_valid_transcript, echo_tools
from tests.providers.conftest import SleepRecorder

LIMIT = 200_000
TOOLS = (ToolSpec("echo", parameters={"type": "object", "properties": {"text": {"type": "string"}}}),)
REQUEST = ModelRequest((Message.user("hi"),), TOOLS)
TOO_LARGE = f"larger than {LIMIT} bytes (llm.maxResponseBytes)"


def openai(server: FakeModelServer, client: httpx.AsyncClient, sleeps: SleepRecorder, **llm: Any) -> Provider:
    config = LLMConfig(endpoint=server.base_url, model="m", max_response_bytes=LIMIT, **llm)
    return OpenAICompatProvider(
        config,
        client=client,
        endpoint=resolve_endpoint(config),
        retry=RetryPolicy(max_retries=2, sleep=sleeps, rand=lambda: 0.0),
    )


def anthropic(
    server: FakeModelServer, client: httpx.AsyncClient, sleeps: SleepRecorder, **llm: Any
) -> Provider:
    config = LLMConfig(
        provider="anthropic",
        endpoint=server.base_url,
        model="claude-test",
        **{"max_response_bytes": LIMIT, **llm},
    )
    return AnthropicProvider(config, client=client, retry=RetryPolicy(max_retries=2, sleep=sleeps))


def gemini(server: FakeModelServer, client: httpx.AsyncClient, sleeps: SleepRecorder, **llm: Any) -> Provider:
    config = LLMConfig(
        provider="gemini",
        endpoint=server.url + "/v1beta",
        model="gemini-test",
        **{"max_response_bytes": LIMIT, **llm},
    )
    return GeminiProvider(config, client=client, retry=RetryPolicy(max_retries=2, sleep=sleeps))


FILLER = "x" * 1000
ENDLESS_STREAMS = {
    "openai": (openai, {"choices": [{"index": 0, "delta": {"content": FILLER}}]}),
    "anthropic": (
        anthropic,
        anthropic_shapes.sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": FILLER}},
        ),
    ),
    "gemini": (
        gemini,
        gemini_shapes.sse({"candidates": [{"content": {"role": "model", "parts": [{"text": FILLER}]}}]}),
    ),
}
WHOLE = {
    "openai": (openai, {"stream": False}, openai_shapes.completion(content=FILLER)),
    "anthropic": (anthropic, {"stream": False}, anthropic_shapes.message(FILLER)),
    "gemini": (gemini, {"stream": False}, gemini_shapes.response(FILLER)),
}


async def _refused(provider: Provider, server: FakeModelServer) -> ProviderResponseError:
    with anyio.fail_after(30), pytest.raises(ProviderResponseError) as caught:
        await provider.complete(REQUEST)
    assert len(server.requests) == 1  # not retried
    assert TOO_LARGE in str(caught.value) and not caught.value.retryable
    with anyio.fail_after(10):  # the connection was closed, not read to the end
        while server.disconnects < 1:
            await anyio.sleep(0.01)
    return caught.value


# ---------------------------------------------------------------------------- maxResponseBytes


@pytest.mark.parametrize("kind", ENDLESS_STREAMS)
async def test_a_stream_without_end_is_abandoned_at_the_limit(
    kind: str, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    make, item = ENDLESS_STREAMS[kind]
    model_server.enqueue(Reply.endless(item))
    await _refused(make(model_server, http_client, sleeps), model_server)


@pytest.mark.parametrize("kind", WHOLE)
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_whole_answer_over_the_limit_is_refused_while_read(
    kind: str,
    declared: bool,
    model_server: FakeModelServer,
    http_client: httpx.AsyncClient,
    sleeps: SleepRecorder,
) -> None:
    make, options, body = WHOLE[kind]
    json_type = {"content-type": "application/json"}
    if declared:  # 1 GB announced: refused before a byte of it is read
        model_server.enqueue(Reply(headers=json_type, body=b" " * 65536, body_repeat=16384))
    else:  # no length: refused once the limit is passed
        model_server.enqueue(Reply.endless(b" " * 65536, headers=json_type, events=[json.dumps(body)[:-1]]))
    await _refused(make(model_server, http_client, sleeps, **options), model_server)


async def test_a_models_list_over_the_limit_is_refused_too(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(
        Reply.endless(b" " * 65536, headers={"content-type": "application/json"}, events=['{"data": ['])
    )
    with anyio.fail_after(30), pytest.raises(ProviderResponseError, match=r"\(llm\.maxResponseBytes\)"):
        await list_models(LLMConfig(endpoint=model_server.base_url, max_response_bytes=LIMIT), http_client)


async def test_an_error_body_over_the_limit_is_refused_too(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply(status=400, headers={"content-type": "application/json"}, body=b" " * 65536, body_repeat=64)
    )
    await _refused(openai(model_server, http_client, sleeps, stream=False), model_server)


@pytest.mark.parametrize("kind", ENDLESS_STREAMS)
async def test_answers_under_the_limit_pass(
    kind: str, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    make, _ = ENDLESS_STREAMS[kind]
    text = "y" * (LIMIT // 4)
    replies = {
        "openai": Reply.sse(openai_shapes.openai_stream(content=text, size=5000)),
        "anthropic": Reply.sse(anthropic_shapes.stream_events(text, piece=5000)),
        "gemini": Reply.sse(gemini_shapes.stream_chunks(text, piece=5000)),
    }
    model_server.enqueue(replies[kind])
    turn = await make(model_server, http_client, sleeps).complete(REQUEST)
    assert turn.content == text


async def test_the_loop_ends_llm_error_naming_the_limit(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    make, item = ENDLESS_STREAMS["openai"]
    model_server.enqueue(Reply.endless(item))
    with anyio.fail_after(30):
        result = await run("hi", provider=make(model_server, http_client, sleeps), tools=echo_tools())
    assert result.termination_reason == TerminationReason.LLM_ERROR
    assert TOO_LARGE in result.detail


# ------------------------------------------------------------------------- maxToolArgumentChars

BIG_TEXT = "z" * 3000
BIG_ARGS = {"text": BIG_TEXT}
TOO_LONG = "exceed the limit of 1000 (llm.maxToolArgumentChars)"


def _refused_call(turn: Turn) -> ToolCall:
    [call] = turn.tool_calls
    assert call.name == "echo" and call.arguments == {}
    assert call.error is not None and call.error.endswith(TOO_LONG), call.error
    assert call.raw_arguments is not None and len(call.raw_arguments) == 200
    return call


@pytest.mark.parametrize("stream", [True, False])
async def test_openai_arguments_over_the_limit_are_not_read(
    stream: bool, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    calls = [openai_shapes.Call("echo", BIG_ARGS)]
    if stream:
        model_server.enqueue(Reply.sse(openai_shapes.openai_stream(calls=calls, size=500)))
    else:
        model_server.enqueue(Reply.json(openai_shapes.completion(calls=calls)))
    provider = openai(model_server, http_client, sleeps, stream=stream, max_tool_argument_chars=1000)
    call = _refused_call(await provider.complete(REQUEST))
    assert call.error == f"arguments of {len(json.dumps(BIG_ARGS))} characters {TOO_LONG}"


@pytest.mark.parametrize("stream", [True, False])
async def test_anthropic_and_gemini_arguments_over_the_limit_are_not_kept(
    stream: bool, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    if stream:
        model_server.enqueue(
            Reply.sse(anthropic_shapes.stream_events(calls=[("toolu_1", "echo", BIG_ARGS)], piece=500)),
            Reply.sse(gemini_shapes.stream_chunks(calls=[("echo", BIG_ARGS)])),
        )
    else:
        model_server.enqueue(
            Reply.json(anthropic_shapes.message(calls=[("toolu_1", "echo", BIG_ARGS)])),
            Reply.json(gemini_shapes.response(calls=[("echo", BIG_ARGS)])),
        )
    options = {"stream": stream, "max_tool_argument_chars": 1000}
    _refused_call(await anthropic(model_server, http_client, sleeps, **options).complete(REQUEST))
    turn = await gemini(model_server, http_client, sleeps, **options).complete(REQUEST)
    _refused_call(turn)
    # the parts Gemini replays do not carry the arguments back either
    assert BIG_TEXT not in json.dumps(dict(turn.meta))


async def test_text_written_calls_over_the_limit_are_refused(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    text = "<tool_call>" + json.dumps({"name": "echo", "arguments": BIG_ARGS}) + "</tool_call>"
    model_server.enqueue(Reply.json(openai_shapes.completion(content=text)))
    provider = openai(model_server, http_client, sleeps, stream=False, max_tool_argument_chars=1000)
    _refused_call(await provider.complete(REQUEST))


async def test_the_loop_answers_a_refused_call_and_the_transcript_stays_valid(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.json(openai_shapes.completion(calls=[openai_shapes.Call("echo", BIG_ARGS)])),
        Reply.json(openai_shapes.completion(content="sorry")),
    )
    provider = openai(model_server, http_client, sleeps, stream=False, max_tool_argument_chars=1000)
    tools = echo_tools()
    result = await run("hi", provider=provider, tools=tools)
    assert (result.termination_reason, result.answer) == (TerminationReason.SUCCESS, "sorry")
    assert tools.calls == []  # never called
    assert_valid_transcript(result.transcript)
    [answer] = [m for m in result.transcript if m.role == "tool"]
    assert answer.is_error and TOO_LONG in answer.content
    assert BIG_TEXT not in json.dumps(model_server.last.json)  # not sent back either


@pytest.mark.parametrize(
    ("call", "refused"),
    [
        (ToolCall("1", "t", {"a": "x" * 90}), False),
        (ToolCall("1", "t", {"a": "x" * 100}), True),  # {"a":"xx..."}: 108 characters
        (ToolCall("1", "t", {}, error="bad JSON", raw_arguments="{" * 101), True),
        (ToolCall("1", "t", {}, error="bad JSON", raw_arguments="{" * 100), False),
    ],
)
def test_bound_arguments(call: ToolCall, refused: bool) -> None:
    [bounded] = bound_arguments([call], 100)
    assert (bounded is call) == (not refused)
    if refused:
        assert (
            bounded.arguments == {}
            and bounded.error is not None
            and "(llm.maxToolArgumentChars)" in bounded.error
        )
    assert bound_arguments([call], 0) == (call,)
