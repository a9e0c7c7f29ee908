"""The OpenAI-compatible provider over real HTTP against the fake model server."""

from __future__ import annotations

import dataclasses
import email.utils
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from mcp_agent.config import CapabilityOverrides, LLMConfig
from mcp_agent.exceptions import (
    ContextLengthError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderResponseError,
)
from mcp_agent.loop.result import TerminationReason
from mcp_agent.loop.run import run
from mcp_agent.messages import Delta, Message, ToolCall, ToolSpec, Turn, Usage
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.factory import build_client, create_provider, open_provider
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.http.lean import LeanTransport, ModelClient
from mcp_agent.providers.openai import OpenAICompatProvider, prefers_text_tools
from mcp_agent.providers.servers.endpoints import resolve_endpoint
from mcp_agent.tools.memory import MemoryToolSource
from tests.fakes import openai_shapes as shapes
from tests.fakes.model_server import (
    Delay,
    FakeModelServer,
    RecordedRequest,
    Reply,
    running_model_server,
    sse_event,
)
from tests.fakes.openai_shapes import Call
from tests.providers.conftest import SleepRecorder

# --------------------------------------------------------------------------------------------
# the provider

WEATHER = ToolSpec(
    name="weather__get",
    description="Weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
TIME = ToolSpec(name="time__now", description="Time.", parameters={"type": "object", "properties": {}})
TOOLS = (WEATHER, TIME)
REQUEST = ModelRequest(messages=[Message.system("sys"), Message.user("weather?")], tools=TOOLS)
ONE = [Call("weather__get", {"city": "Paris"})]
TWO = [Call("weather__get", {"city": "Paris"}), Call("time__now", {})]
EXPECTED_ONE = [("weather__get", {"city": "Paris"})]
EXPECTED_TWO = [("weather__get", {"city": "Paris"}), ("time__now", {})]


def make(
    server: FakeModelServer,
    client: httpx.AsyncClient,
    sleeps: SleepRecorder,
    *,
    kind: str = "unknown",
    **llm: Any,
) -> OpenAICompatProvider:
    config = LLMConfig(**{"endpoint": server.base_url, "model": "m", **llm})
    return OpenAICompatProvider(
        config,
        client=client,
        endpoint=resolve_endpoint(config, kind=kind),  # type: ignore[arg-type]
        retry=RetryPolicy(max_retries=config.max_retries, sleep=sleeps, rand=lambda: 0.0),
    )


def calls_of(turn: Turn) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in turn.tool_calls]


Builder = Callable[[Sequence[Call]], Any]

STREAMS: dict[str, tuple[str, Builder]] = {
    "openai": ("openai", lambda calls: shapes.openai_stream(calls=calls, interleave=True, usage=(9, 9))),
    "ollama-post": ("ollama", lambda calls: shapes.ollama_stream(calls=calls, usage=(9, 9))),
    "ollama-pre": ("ollama", lambda calls: shapes.ollama_stream(calls=calls, version="pre", finish="stop")),
    "ollama-index0": ("ollama", lambda calls: shapes.ollama_stream(calls=calls, index="zero")),
    "ollama-noindex": ("ollama", lambda calls: shapes.ollama_stream(calls=calls, index="missing")),
    "llamacpp": ("llamacpp", lambda calls: shapes.llamacpp_stream(calls=calls)),
    "llamacpp-object": ("llamacpp", lambda calls: shapes.llamacpp_stream(calls=calls, object_args=True)),
    "vllm": ("vllm", lambda calls: shapes.vllm_stream(calls=calls, interleave=True, usage=(9, 9))),
    "lmstudio": ("lmstudio", lambda calls: shapes.lmstudio_stream(calls=calls)),
    "groq": ("groq", lambda calls: shapes.groq_stream(calls=calls)),
    "lemonade": ("lemonade", lambda calls: shapes.openai_stream(calls=calls, model="Qwen3-8B-GGUF")),
}
WHOLE: dict[str, tuple[str, Builder]] = {
    "openai": ("openai", lambda calls: shapes.completion(calls=calls)),
    "ollama": ("ollama", lambda calls: shapes.ollama_completion(calls=calls)),
    "ollama-index0": ("ollama", lambda calls: shapes.ollama_completion(calls=calls, index_zero=True)),
    "llamacpp": ("llamacpp", lambda calls: shapes.llamacpp_completion(calls=calls)),
    "llamacpp-object": ("llamacpp", lambda calls: shapes.llamacpp_completion(calls=calls, object_args=True)),
    "vllm": (
        "vllm",
        lambda calls: shapes.completion(calls=calls, reasoning="r", reasoning_field="reasoning"),
    ),
    "lmstudio": ("lmstudio", lambda calls: shapes.lmstudio_completion(calls=calls)),
    "groq": ("groq", lambda calls: shapes.completion(calls=calls, model="llama-3.3-70b-versatile")),
}


@pytest.mark.parametrize("calls", [ONE, TWO], ids=["single", "parallel"])
@pytest.mark.parametrize("shape", list(STREAMS))
async def test_streamed_tool_calls_per_server(
    shape: str,
    calls: list[Call],
    model_server: FakeModelServer,
    http_client: httpx.AsyncClient,
    sleeps: SleepRecorder,
) -> None:
    kind, build = STREAMS[shape]
    model_server.enqueue(Reply.sse(build(calls)))
    deltas: list[Delta] = []
    turn = await make(model_server, http_client, sleeps, kind=kind).complete(REQUEST, deltas.append)
    assert calls_of(turn) == (EXPECTED_ONE if calls is ONE else EXPECTED_TWO)
    assert len({c.id for c in turn.tool_calls}) == len(calls) and all(c.id for c in turn.tool_calls)
    assert {d.name for d in deltas if d.kind == "tool_call"} == {c.name for c in calls}
    assert len(model_server.requests) == 1 and sleeps.delays == []
    body = model_server.last.json
    assert body["stream"] is True and body["model"] == "m" and len(body["tools"]) == 2
    caps = resolve_endpoint(LLMConfig(), kind=kind).capabilities  # type: ignore[arg-type]
    assert ("tool_choice" in body) is caps.tool_choice
    assert ("parallel_tool_calls" in body) is caps.parallel_tool_calls
    assert ("stream_options" in body) is caps.stream_usage


@pytest.mark.parametrize("calls", [ONE, TWO], ids=["single", "parallel"])
@pytest.mark.parametrize("shape", list(WHOLE))
async def test_whole_tool_calls_per_server(
    shape: str,
    calls: list[Call],
    model_server: FakeModelServer,
    http_client: httpx.AsyncClient,
    sleeps: SleepRecorder,
) -> None:
    kind, build = WHOLE[shape]
    model_server.enqueue(Reply.json(build(calls)))
    turn = await make(model_server, http_client, sleeps, kind=kind, stream=False).complete(REQUEST)
    assert calls_of(turn) == (EXPECTED_ONE if calls is ONE else EXPECTED_TWO)
    body = model_server.last.json
    assert body["stream"] is False and "stream_options" not in body


async def test_text_reasoning_usage_and_request_id(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.sse(
            shapes.openai_stream(content="<think>hmm</think>Sunny.", reasoning="first", usage=(40, 8)),
            headers={"x-request-id": "req_123"},
        ),
        Reply.json(shapes.completion(content="Hi."), headers={"request-id": "req_456"}),
        Reply.sse(shapes.ollama_stream(content="Hello there")),
    )
    deltas: list[Delta] = []
    provider = make(model_server, http_client, sleeps)
    turn = await provider.complete(REQUEST, deltas.append)
    assert (turn.content, turn.reasoning, turn.finish_reason) == ("Sunny.", "first\n\nhmm", "stop")
    assert turn.usage == Usage(40, 8, 48) and turn.request_id == "req_123"
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "firsthmm"
    assert "".join(d.text for d in deltas if d.kind == "text") == "Sunny."
    provider.llm = provider.llm.model_copy(update={"stream": False})
    assert (await provider.complete(REQUEST)).request_id == "req_456"
    provider.llm = provider.llm.model_copy(update={"stream": True})
    turn = await provider.complete(REQUEST)
    assert turn.request_id == "chatcmpl-7" and turn.usage.estimated and turn.content == "Hello there"


async def test_a_raising_on_delta_is_ignored(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.sse(shapes.openai_stream(content="a long enough answer", calls=ONE)))

    def explode(delta: Delta) -> None:
        raise RuntimeError("listener bug")

    turn = await make(model_server, http_client, sleeps).complete(REQUEST, explode)
    assert turn.content == "a long enough answer" and calls_of(turn) == EXPECTED_ONE


async def test_headers_auth_and_extra(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.sse(shapes.openai_stream(content="ok")))
    await make(model_server, http_client, sleeps, api_key="sk-test", headers={"X-Org": "o"}).complete(REQUEST)
    headers = model_server.last.headers
    assert headers["authorization"] == "Bearer sk-test" and headers["x-org"] == "o"
    assert model_server.last.path == "/v1/chat/completions"


async def test_a_replaced_endpoint_is_called_at_its_own_url(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """The chat URL is parsed once and kept; an endpoint replaced later (as ``apply_server_info``
    does) is called at its own URL from the next call on, not at the one kept."""
    provider = make(model_server, http_client, sleeps, stream=False)
    model_server.enqueue(Reply.json(shapes.completion(content="first")))
    assert (await provider.complete(REQUEST)).content == "first"
    with running_model_server() as other:
        other.enqueue(Reply.json(shapes.completion(content="second")))
        provider.endpoint = dataclasses.replace(provider.endpoint, base_url=other.base_url)
        assert (await provider.complete(REQUEST)).content == "second"
        assert len(other.requests) == 1 and other.last.path == "/v1/chat/completions"
    assert len(model_server.requests) == 1


async def test_outgoing_history_for_ollama(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    call = ToolCall("call_k3x9q2mz", "time__now", {})
    bad = ToolCall("call_2", "weather__get", {}, error="not JSON", raw_arguments="{city")
    history = [
        Message.system("sys"),
        Message.user("q"),
        Message.assistant("", [call, bad], reasoning="secret"),
        Message.tool(call, "12:00"),
        Message.tool(bad, "error", is_error=True),
        Message.user("more"),
    ]
    model_server.enqueue(Reply.sse(shapes.ollama_stream(content="done")))
    await make(model_server, http_client, sleeps, kind="ollama").complete(
        ModelRequest(messages=history, tools=TOOLS)
    )
    sent = model_server.last.json["messages"]
    assistant = sent[2]
    assert (
        assistant["content"] == "" and "reasoning_content" not in assistant and "reasoning" not in assistant
    )
    assert [(c["id"], c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        ("call_k3x9q2mz", "{}"),
        ("call_2", "{}"),
    ]
    assert [m.get("tool_call_id") for m in sent[3:5]] == ["call_k3x9q2mz", "call_2"]


# --------------------------------------------------------------------------------------------
# errors and retries


async def test_terminal_http_errors_are_not_retried(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.json(
            shapes.openai_error("Incorrect API key", code="invalid_api_key"),
            status=401,
            headers={"x-request-id": "req_a"},
        )
    )
    with pytest.raises(ProviderHTTPError) as info:
        await make(model_server, http_client, sleeps).complete(REQUEST)
    assert (info.value.status, info.value.message, info.value.request_id) == (
        401,
        "Incorrect API key",
        "req_a",
    )
    assert info.value.terminal and len(model_server.requests) == 1 and sleeps.delays == []


async def test_retryable_errors_back_off_then_succeed(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.json(shapes.llamacpp_error("Loading model", "unavailable_error", 503), status=503),
        Reply.json(
            shapes.openai_error("slow down", "requests", "rate_limit_exceeded"),
            status=429,
            headers={"retry-after": "3"},
        ),
        Reply.json(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            status=529,
            headers={"retry-after-ms": "250"},
        ),
        Reply.sse(shapes.openai_stream(content="finally")),
    )
    turn = await make(model_server, http_client, sleeps, max_retries=3).complete(REQUEST)
    assert turn.content == "finally"
    assert sleeps.delays == [0.5, 3.0, 0.25]


async def test_retries_run_out(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(*[Reply.json({"error": {"message": f"down {i}"}}, status=500) for i in range(3)])
    with pytest.raises(ProviderHTTPError, match="down 2"):
        await make(model_server, http_client, sleeps, max_retries=2).complete(REQUEST)
    assert sleeps.delays == [0.5, 1.0] and len(model_server.requests) == 3


@pytest.mark.parametrize(
    "reply",
    [
        Reply.json(
            shapes.openai_error(
                "This model's maximum context length is 8192 tokens.", code="context_length_exceeded"
            ),
            status=400,
        ),
        Reply.json(
            shapes.vllm_error(
                "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
                old=True,
            ),
            status=400,
        ),
        Reply.json(
            shapes.llamacpp_error(
                "request exceeds", "exceed_context_size_error", 400, n_ctx=8192, n_prompt_tokens=9000
            ),
            status=400,
        ),
        Reply.json(shapes.lmstudio_200_error()),  # HTTP 200 with an error body
        Reply.sse([{"error": {"message": "Context size has been exceeded."}}]),  # in the stream
    ],
    ids=["openai", "vllm-old", "llamacpp", "lmstudio-200", "in-stream"],
)
async def test_context_length_errors(
    reply: Reply, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(reply)
    with pytest.raises(ContextLengthError):
        await make(model_server, http_client, sleeps).complete(REQUEST)
    assert sleeps.delays == []


async def test_groq_error_event_in_stream(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.sse([shapes.groq_error_event()], done=False))
    with pytest.raises(ProviderResponseError) as info:
        await make(model_server, http_client, sleeps, kind="groq").complete(REQUEST)
    assert (
        info.value.status == 400 and info.value.terminal and "Failed to call a function" in info.value.message
    )


@pytest.mark.parametrize("where", ["event", "status"])
async def test_groq_failed_generation_is_read_for_calls(
    where: str, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    text = '<function=weather__get>{"city": "Paris"}</function>'
    if where == "event":
        model_server.enqueue(Reply.sse([shapes.groq_error_event(failed_generation=text)], done=False))
    else:
        model_server.enqueue(Reply.json(shapes.groq_tool_use_failed(text), status=400))
    turn = await make(model_server, http_client, sleeps, kind="groq").complete(REQUEST)
    assert calls_of(turn) == EXPECTED_ONE and turn.finish_reason == "tool_calls"
    model_server.enqueue(Reply.json(shapes.groq_tool_use_failed(text), status=400))
    with pytest.raises(ProviderHTTPError):  # native style takes only structured calls
        await make(model_server, http_client, sleeps, kind="groq", tool_call_style="native").complete(REQUEST)


async def test_error_event_before_deltas_is_retried(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.sse([{"error": {"message": "overloaded", "type": "server_error"}}], done=False),
        Reply.sse(shapes.openai_stream(content="ok")),
    )
    assert (await make(model_server, http_client, sleeps).complete(REQUEST)).content == "ok"
    assert sleeps.delays == [0.5]


async def test_error_event_after_deltas_is_not_retried(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    events = [
        *shapes.openai_stream(content="partial answer")[:3],
        {"error": {"message": "boom", "type": "server_error"}},
    ]
    model_server.enqueue(Reply.sse(events, done=False))
    with pytest.raises(ProviderResponseError) as info:
        await make(model_server, http_client, sleeps).complete(REQUEST)
    assert not info.value.retryable and len(model_server.requests) == 1


# --------------------------------------------------------------------------------------------
# broken streams


@pytest.mark.parametrize(
    "first",
    [
        Reply.sse(shapes.openai_stream(content="x"), abort_after=0),  # headers, then the connection drops
        Reply.sse(shapes.openai_stream(content="x")[:1], abort_after=1),  # the role chunk only, then drops
        Reply.sse(shapes.openai_stream(content="x")[:1], done=False),  # ends quietly before any delta
        Reply.sse(
            [{"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        ),  # zero deltas
    ],
    ids=["drop-after-headers", "drop-after-role", "eof-before-delta", "empty-stream"],
)
async def test_stream_without_output_is_asked_again_once_without_streaming(
    first: Reply, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(first, Reply.json(shapes.completion(calls=ONE)))
    turn = await make(model_server, http_client, sleeps).complete(REQUEST)
    assert calls_of(turn) == EXPECTED_ONE
    assert [r.json["stream"] for r in model_server.requests] == [True, False]
    assert sleeps.delays == []


async def test_non_streamed_retry_is_retried_without_streaming(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.sse([], abort_after=0),
        Reply.json({"error": {"message": "busy"}}, status=503),
        Reply.json(shapes.completion(content="ok")),
    )
    assert (await make(model_server, http_client, sleeps).complete(REQUEST)).content == "ok"
    assert [r.json["stream"] for r in model_server.requests] == [True, False, False]


async def test_stream_broken_after_deltas_is_an_error(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.sse(shapes.openai_stream(content="a long partial answer", size=3), abort_after=4)
    )
    got: list[Delta] = []
    with pytest.raises(ProviderResponseError) as info:
        await make(model_server, http_client, sleeps).complete(REQUEST, got.append)
    assert not info.value.retryable and "broke off" in info.value.message
    assert got and len(model_server.requests) == 1


async def test_stream_ending_after_deltas_without_finish_is_an_error(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.sse(shapes.openai_stream(content="cut short")[:-1], done=False))
    with pytest.raises(ProviderResponseError, match="without a finish reason"):
        await make(model_server, http_client, sleeps).complete(REQUEST)


async def test_stream_ending_with_finish_but_no_done_is_fine(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.sse(shapes.ollama_stream(content="complete"), done=False))
    assert (
        await make(model_server, http_client, sleeps, kind="ollama").complete(REQUEST)
    ).content == "complete"


async def test_tolerant_stream_with_crlf_comments_pings_and_junk(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    chunks = shapes.openai_stream(content="Hello world", calls=ONE)
    events: list[Any] = [": OPENROUTER PROCESSING\r\n\r\n", sse_event({}, event="ping")]
    events += [sse_event(c, newline="\r\n") for c in chunks[:3]] + ["data: not json\n\n"] + chunks[3:]
    model_server.enqueue(Reply.sse(events))
    turn = await make(model_server, http_client, sleeps).complete(REQUEST)
    assert turn.content == "Hello world" and calls_of(turn) == EXPECTED_ONE


async def test_server_that_ignores_stream_true(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.json(shapes.completion(content="whole")))
    assert (await make(model_server, http_client, sleeps).complete(REQUEST)).content == "whole"


async def test_server_that_streams_when_asked_not_to(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.sse(shapes.openai_stream(content="streamed anyway", calls=ONE)))
    turn = await make(model_server, http_client, sleeps, stream=False).complete(REQUEST)
    assert turn.content == "streamed anyway" and calls_of(turn) == EXPECTED_ONE


async def test_json_cut_short_is_retried(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """(A web page is not retried: ``test_foreign.py``.)"""
    model_server.enqueue(
        Reply(body=b'{"id": "chatcmpl-1", "choi', headers={"content-type": "application/json"}),
        Reply.json(shapes.completion(content="ok")),
    )
    assert (await make(model_server, http_client, sleeps, stream=False).complete(REQUEST)).content == "ok"
    assert sleeps.delays == [0.5]


async def test_stream_tools_off_sends_one_plain_request(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.json(shapes.completion(calls=ONE)), Reply.sse(shapes.openai_stream(content="x"))
    )
    provider = make(model_server, http_client, sleeps, capabilities=CapabilityOverrides(stream_tools=False))
    assert calls_of(await provider.complete(REQUEST)) == EXPECTED_ONE
    await provider.complete(ModelRequest(messages=REQUEST.messages))  # no tools: streams
    assert [r.json["stream"] for r in model_server.requests] == [False, True]


def client_of(kind: str, timeout: httpx.Timeout) -> httpx.AsyncClient:
    """The factory's client (its calls straight to the lean transport), or a plain httpx one."""
    if kind == "plain":
        return httpx.AsyncClient(timeout=timeout)
    return ModelClient(timeout=timeout, lean=LeanTransport(timeout))


@pytest.mark.parametrize("kind", ["model-client", "plain"])
@pytest.mark.parametrize("local", [True, False], ids=["this-machine", "remote"])
async def test_a_read_timeout_names_the_limit_and_is_retried_only_off_this_machine(
    local: bool, kind: str, model_server: FakeModelServer, sleeps: SleepRecorder
) -> None:
    """A one-slot local server still working on the request must not get it again (and again)."""
    model_server.enqueue(*[Reply.json(shapes.completion(content="late"), delay=2.0)] * 3)
    async with client_of(kind, httpx.Timeout(5.0, read=0.2)) as client:
        provider = make(model_server, client, sleeps, max_retries=2, stream=False)
        provider.endpoint = dataclasses.replace(provider.endpoint, local=local)
        with pytest.raises(ProviderResponseError) as info:
            await provider.complete(REQUEST)
    message = info.value.message
    assert "did not answer in time: nothing for 0.2 s (llm.requestTimeoutSeconds)" in message
    assert not info.value.terminal  # the run ends llm_error, not terminal_error
    if local:
        assert not info.value.retryable and len(sleeps.delays) == 0 and "not retried" in message
    else:
        assert info.value.retryable and len(sleeps.delays) == 2


@pytest.mark.parametrize("kind", ["model-client", "plain"])
async def test_a_read_timeout_mid_stream_names_the_limit(
    kind: str, model_server: FakeModelServer, sleeps: SleepRecorder
) -> None:
    chunks = shapes.openai_stream(content="slow answer")
    model_server.enqueue(Reply.sse([*chunks[:3], Delay(2.0), *chunks[3:]]))
    async with client_of(kind, httpx.Timeout(5.0, read=0.2)) as client:
        with pytest.raises(ProviderResponseError, match=r"broke off after \d+ chunks: nothing for 0.2 s"):
            await make(model_server, client, sleeps).complete(REQUEST)


async def test_connection_refused_says_how_to_start_a_server(
    http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()  # nothing listens there now
    config = LLMConfig(endpoint=f"http://127.0.0.1:{port}", model="qwen3:8b")
    provider = OpenAICompatProvider(
        config, client=http_client, retry=RetryPolicy(max_retries=2, sleep=sleeps)
    )
    with pytest.raises(ProviderConnectionError) as info:
        await provider.complete(REQUEST)
    assert info.value.message.startswith(f"No model server is listening at http://127.0.0.1:{port}/v1: start")
    assert "ollama serve" in info.value.message and not info.value.terminal and sleeps.delays == []
    ollama = OpenAICompatProvider(
        config,
        client=http_client,
        endpoint=resolve_endpoint(config, kind="ollama"),
        retry=RetryPolicy(max_retries=2, sleep=sleeps),
    )
    with pytest.raises(ProviderConnectionError, match=r"Ollama is not running at .*`ollama pull qwen3:8b`"):
        await ollama.complete(REQUEST)
    # a host that is not this machine: the same hint, but retried (it may be restarting)
    remote = dataclasses.replace(resolve_endpoint(config, kind="ollama"), local=False)
    retried = OpenAICompatProvider(
        config, client=http_client, endpoint=remote, retry=RetryPolicy(max_retries=2, sleep=sleeps)
    )
    sleeps.delays.clear()
    with pytest.raises(ProviderConnectionError, match="start it with `ollama serve`") as info:
        await retried.complete(REQUEST)
    assert info.value.retryable and len(sleeps.delays) == 2


async def test_cancellation_closes_the_stream(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    chunks = shapes.openai_stream(content="slow answer")
    model_server.enqueue(Reply.sse([*chunks[:2], Delay(30), *chunks[2:]]))
    got: list[Delta] = []
    with anyio.fail_after(20):
        with anyio.move_on_after(0.3) as scope:
            await make(model_server, http_client, sleeps).complete(REQUEST, got.append)
        assert scope.cancelled_caught and got
        while model_server.disconnects == 0:  # the server sees the connection go
            await anyio.sleep(0.02)


# --------------------------------------------------------------------------------------------
# tool-call styles


async def test_text_style_sends_no_tools_and_reads_text_calls(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    text = '<tool_call>\n{"name": "weather__get", "arguments": {"city": "Paris"}}\n</tool_call>'
    model_server.enqueue(Reply.sse(shapes.openai_stream(content=text)))
    turn = await make(model_server, http_client, sleeps, tool_call_style="text").complete(REQUEST)
    assert calls_of(turn) == EXPECTED_ONE and turn.content == ""
    body = model_server.last.json
    assert "tools" not in body and "<tools>" in body["messages"][0]["content"]


async def test_auto_switches_to_text_when_the_model_takes_no_tools(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    refusal = shapes.openai_error("registry.ollama.ai/library/gemma:2b does not support tools")
    text = '<tool_call>\n{"name": "time__now", "arguments": {}}\n</tool_call>'
    model_server.enqueue(
        Reply.json(refusal, status=400),
        Reply.sse(shapes.ollama_stream(content=text)),
        Reply.sse(shapes.ollama_stream(content="again")),
    )
    provider = make(model_server, http_client, sleeps, kind="ollama")
    assert provider.tool_call_style == "auto"
    turn = await provider.complete(REQUEST)
    assert calls_of(turn) == [("time__now", {})] and provider.tool_call_style == "text"
    await provider.complete(REQUEST)
    assert ["tools" in r.json for r in model_server.requests] == [True, False, False]
    model_server.enqueue(Reply.json(refusal, status=400))
    with pytest.raises(ProviderHTTPError):  # native style never switches
        await make(model_server, http_client, sleeps, tool_call_style="native").complete(REQUEST)


@pytest.mark.parametrize(
    ("model", "text"),
    [
        ("gemma3:4b", True),
        ("google/gemma-2-9b", False),
        ("gemma2:9b", True),
        ("qwen3:8b", False),
        ("phi3:mini", True),
        ("functiongemma", False),
    ],
)
def test_models_known_to_lack_native_tools(model: str, text: bool) -> None:
    assert prefers_text_tools(model) is text


async def test_auto_uses_text_for_known_models(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.sse(shapes.ollama_stream(content="hi")))
    provider = make(model_server, http_client, sleeps, model="gemma3:4b")
    assert provider.tool_call_style == "text"
    await provider.complete(REQUEST)
    assert "tools" not in model_server.last.json


# --------------------------------------------------------------------------------------------
# the factory


async def test_create_provider_per_endpoint(http_client: httpx.AsyncClient) -> None:
    provider = create_provider(LLMConfig(endpoint="http://localhost:11434"), http_client)
    assert isinstance(provider, OpenAICompatProvider) and provider.endpoint.kind == "ollama"


async def test_build_client_timeouts_and_proxies() -> None:
    async with build_client(LLMConfig(request_timeout_seconds=120, connect_timeout_seconds=5)) as client:
        assert (client.timeout.connect, client.timeout.read) == (5, 120)
        assert client.trust_env is False  # localhost: no proxy from the environment
    async with build_client(
        LLMConfig(endpoint="https://api.openai.com/v1", request_timeout_seconds=0, connect_timeout_seconds=0)
    ) as client:
        assert (client.timeout.connect, client.timeout.read) == (None, None)
        assert client.trust_env is True


async def test_loopback_clients_load_the_ca_bundle_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the CA bundle takes 30-60 ms; every agent opened against a local model paid it."""
    import ssl

    from mcp_agent.providers import factory

    factory._loopback_tls.cache_clear()
    built: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    for port in (8080, 11434, 1234):
        async with build_client(LLMConfig(endpoint=f"http://127.0.0.1:{port}/v1")) as client:
            assert client.trust_env is False
    assert len(built) == 1
    async with build_client(LLMConfig(endpoint="https://api.openai.com/v1")):
        pass  # a remote endpoint follows the environment's CA settings, per client
    assert len(built) == 2


async def test_open_provider_end_to_end(model_server: FakeModelServer) -> None:
    model_server.enqueue(Reply.sse(shapes.openai_stream(content="via factory")))
    async with open_provider(LLMConfig(endpoint=model_server.url, model="m")) as provider:
        assert (await provider.complete(REQUEST)).content == "via factory"
    assert model_server.last.path == "/v1/chat/completions"


async def test_streamed_calls_reuse_one_connection(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """After [DONE] the body is read to its end, so the pooled connection is kept."""
    model_server.enqueue(*[Reply.sse(shapes.openai_stream(content=f"answer {i}")) for i in range(3)])
    provider = make(model_server, http_client, sleeps)
    for i in range(3):
        assert (await provider.complete(REQUEST)).content == f"answer {i}"
    assert model_server.connections == 1


async def test_data_after_done_is_ignored_briefly(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """A server that keeps the stream open after [DONE] does not hold the call."""
    events = [*shapes.openai_stream(content="done"), "data: [DONE]\n\n", Delay(30), {"late": True}]
    model_server.enqueue(Reply.sse(events, done=False))
    with anyio.fail_after(20):
        assert (await make(model_server, http_client, sleeps).complete(REQUEST)).content == "done"


async def test_a_whole_answer_is_reported_through_on_delta_once(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(
        Reply.json(shapes.completion(content="<think>why</think>Here.", calls=TWO)),
        Reply.sse(shapes.openai_stream(content="x"), abort_after=0),
        Reply.json(shapes.completion(content="after a broken stream")),
    )
    got: list[Delta] = []
    provider = make(model_server, http_client, sleeps, stream=False)
    await provider.complete(REQUEST, got.append)
    assert got == [
        Delta("reasoning", "why"),
        Delta("text", "Here."),
        Delta("tool_call", index=0, name="weather__get"),
        Delta("tool_call", index=1, name="time__now"),
    ]
    got.clear()
    provider.llm = provider.llm.model_copy(update={"stream": True})
    await provider.complete(REQUEST, got.append)
    assert got == [Delta("text", "after a broken stream")]


async def test_retry_after_as_an_http_date(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    model_server.enqueue(
        Reply.json({"error": {"message": "later"}}, status=503, headers={"retry-after": when}),
        Reply.json(shapes.completion(content="ok")),
    )
    assert (await make(model_server, http_client, sleeps, stream=False).complete(REQUEST)).content == "ok"
    assert len(sleeps.delays) == 1 and 20 < sleeps.delays[0] <= 30


async def test_cancelled_while_waiting_to_retry(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(
        Reply.json({"error": {"message": "busy"}}, status=503, headers={"retry-after": "30"})
    )
    config = LLMConfig(endpoint=model_server.base_url, model="m", stream=False)
    provider = OpenAICompatProvider(config, client=http_client)  # the real sleep
    with anyio.fail_after(20):
        with anyio.move_on_after(0.3) as scope:
            await provider.complete(REQUEST)
    assert scope.cancelled_caught and len(model_server.requests) == 1


# --------------------------------------------------------------------------------------------
# a server that dies in the middle of a run


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_server_killed_mid_run_ends_llm_error(
    stream: bool, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """Refused after it answered: it went away (retried, then llm_error), not "no server is
    listening" (not retried)."""
    server, alive = FakeModelServer(), anyio.CancelScope()
    tools = MemoryToolSource()

    async def check(city: str) -> str:
        alive.cancel()  # the model server dies while the tool runs
        return "sunny"

    tools.add("weather__get", check, parameters=dict(WEATHER.parameters))
    whole = Reply.json(shapes.completion(calls=ONE))
    server.enqueue(Reply.sse(shapes.openai_stream(calls=ONE)) if stream else whole)
    async with anyio.create_task_group() as tg:

        async def serve(*, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
            with alive:
                await server.serve(task_status=task_status)

        await tg.start(serve)
        provider = make(server, http_client, sleeps, stream=stream)
        with anyio.fail_after(20):
            result = await run("weather?", provider=provider, tools=tools)
    assert result.termination_reason is TerminationReason.LLM_ERROR, result.detail
    assert "went away" in result.detail and "No model server" not in result.detail
    assert result.rounds == 2 and len(sleeps.delays) == 2  # retried: it may come back
    assert [c.name for c in result.tool_calls] == ["weather__get"]


async def test_a_server_killed_during_its_first_answer_ends_llm_error(
    http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """Killed while it worked on the run's first request (llama-server, not streamed): the
    connection was made and broke without an answer, and the retry is refused. Something was
    listening, so the server went away (llm_error), not "no server is listening"."""
    server, alive = FakeModelServer(), anyio.CancelScope()

    def die(request: RecordedRequest) -> Reply:
        alive.cancel()
        return Reply(drop=True)

    server.handler = die
    async with anyio.create_task_group() as tg:

        async def serve(*, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
            with alive:
                await server.serve(task_status=task_status)

        await tg.start(serve)
        provider = make(server, http_client, sleeps, stream=False)
        with anyio.fail_after(20):
            result = await run("a long story", provider=provider, tools=MemoryToolSource())
    assert result.termination_reason is TerminationReason.LLM_ERROR, result.detail
    assert "went away" in result.detail and "No model server" not in result.detail


async def test_a_server_never_reached_ends_llm_error_and_may_be_retried_once_it_runs(
    http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    config = LLMConfig(endpoint=f"http://127.0.0.1:{port}/v1", model="m")
    provider = OpenAICompatProvider(
        config, client=http_client, retry=RetryPolicy(max_retries=2, sleep=sleeps)
    )
    result = await run("weather?", provider=provider, tools=MemoryToolSource())
    assert result.termination_reason is TerminationReason.LLM_ERROR
    assert "No model server is listening" in result.detail and sleeps.delays == []  # not retried now
    assert result.retryable and "(retrying may help)" in result.shown_answer()
