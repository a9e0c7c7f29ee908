"""The OpenAI-compatible provider against what a real llama-cpp-python 0.3.36 server sent.

Every answer here is a recording (``tests/fakes/recorded/llama-cpp-python``, from
``docs/reference/wire-samples``), replayed byte for byte by the fake model server.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcp_agent.config import Limits, LLMConfig
from mcp_agent.exceptions import ContextLengthError, ProviderHTTPError
from mcp_agent.loop.result import TerminationReason
from mcp_agent.loop.run import run
from mcp_agent.messages import Message, ToolSpec
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.openai import OpenAICompatProvider
from mcp_agent.providers.servers.endpoints import resolve_endpoint
from mcp_agent.providers.servers.info import ServerInfo
from mcp_agent.tools.memory import MemoryToolSource
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply
from tests.fakes.recordings import read_recording, recorded
from tests.providers.conftest import SleepRecorder

SERVER = "llama-cpp-python"
CHECK_PORT = ToolSpec(
    name="ports__check_port",
    description="Check whether a TCP port on this machine is in use.",
    parameters={"type": "object", "properties": {"port": {"type": "integer"}}, "required": ["port"]},
)
MEMORY = ToolSpec(
    name="system__memory_usage", description="Memory.", parameters={"type": "object", "properties": {}}
)
REQUEST = ModelRequest(
    messages=[Message.system("sys"), Message.user("Is port 22 in use?")], tools=(CHECK_PORT, MEMORY)
)


def sample(name: str) -> Reply:
    return recorded(SERVER, name)


def make(
    server: FakeModelServer, client: httpx.AsyncClient, sleeps: SleepRecorder, **llm: Any
) -> OpenAICompatProvider:
    config = LLMConfig(
        **{"endpoint": server.base_url, "model": "models/SmolLM2-135M-Instruct.Q4_1.gguf", **llm}
    )
    return OpenAICompatProvider(
        config,
        client=client,
        endpoint=resolve_endpoint(config),
        retry=RetryPolicy(max_retries=config.max_retries, sleep=sleeps, rand=lambda: 0.0),
    )


# --------------------------------------------------------------------------------------------
# 1. the legacy function_call beside tool_calls


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "after-an-empty-stream"])
async def test_function_call_beside_tool_calls_is_no_second_call(
    stream: bool, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    if stream:
        model_server.enqueue(sample("A-chat-tools-stream"))
    model_server.enqueue(sample("A-chat-tools"))
    turn = await make(model_server, http_client, sleeps, stream=stream).complete(REQUEST)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("ports__check_port", {"port": 22})]
    assert turn.tool_calls[0].id == "call__0_ports__check_port_cmpl-7f6dd5ae-674a-4a14-a5cc-56b3f031de6c"


# --------------------------------------------------------------------------------------------
# 4. errors: context overflows in disguise, validation errors as 500


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_broadcast_500_is_a_context_length_error(
    stream: bool, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(sample("C-ctx-overflow-500-broadcast"))
    with pytest.raises(ContextLengthError, match="could not broadcast"):
        await make(model_server, http_client, sleeps, stream=stream).complete(REQUEST)
    assert len(model_server.requests) == 1 and sleeps.delays == []


async def test_an_empty_stream_then_a_400_is_a_context_length_error(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """The streamed context error is an EMPTY 200 stream; the plain request tells what it was."""
    model_server.enqueue(sample("C-ctx-error-stream"), sample("C-ctx-error"))
    provider = make(model_server, http_client, sleeps)
    with pytest.raises(ContextLengthError, match="maximum context length is 512 tokens"):
        await provider.complete(REQUEST)
    assert [r.json["stream"] for r in model_server.requests] == [True, False] and sleeps.delays == []
    assert provider.learned.stream_tools is None  # the stream was not at fault: nothing learned


async def test_the_loop_trims_and_retries_once_after_a_broadcast_500(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(sample("C-ctx-overflow-500-broadcast"), final_answer())
    history = [
        m for i in range(6) for m in (Message.user(f"question {i} " * 40), Message.assistant(f"answer {i}"))
    ]
    provider = make(model_server, http_client, sleeps, stream=False)
    result = await run("Is port 22 in use?", provider=provider, tools=port_tools(), history=history)
    assert result.termination_reason is TerminationReason.SUCCESS and result.rounds == 1
    first, second = (len(r.json["messages"]) for r in model_server.requests)
    assert second < first and sleeps.delays == []


@pytest.mark.parametrize("name", ["B-error-validation-500", "B-error-validation-role-500"])
async def test_validation_errors_sent_as_500_are_not_retried(
    name: str, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(sample(name))
    with pytest.raises(ProviderHTTPError, match="validation error") as info:
        await make(model_server, http_client, sleeps, stream=False).complete(REQUEST)
    assert info.value.status == 500 and info.value.terminal and not info.value.retryable
    assert len(model_server.requests) == 1 and sleeps.delays == []


async def test_a_bare_500_is_still_retried(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(sample("B-error-badjson"), sample("A-chat-tools"))
    turn = await make(model_server, http_client, sleeps, stream=False).complete(REQUEST)
    assert [c.name for c in turn.tool_calls] == ["ports__check_port"] and sleeps.delays == [0.5]


# --------------------------------------------------------------------------------------------
# 3. a server that cannot stream tool calls: found out once, remembered


def tool_call_answer(port: int) -> Reply:
    """A-chat-tools.json (a call and a phantom legacy function_call), asking for ``port``."""
    recording = read_recording(SERVER, "A-chat-tools")
    body = recording.body.replace(b'{\\"port\\": 22}', b'{\\"port\\": %d}' % port)
    return Reply(status=recording.status, headers=recording.headers, body=body)


def final_answer() -> Reply:
    """A-chat-plain.json, finished by the model (``stop``) rather than by the cap."""
    recording = read_recording(SERVER, "A-chat-plain")
    return Reply(status=200, headers=recording.headers, body=recording.body.replace(b'"length"', b'"stop"'))


def cannot_stream_tools(empty: str) -> tuple[list[RecordedRequest], Any]:
    """A handler that answers like server A: ``empty`` for a streamed request with tools, a tool
    call for the first three plain ones, then the answer."""
    plain: list[RecordedRequest] = []

    def handler(request: RecordedRequest) -> Reply:
        body = request.json
        if body.get("stream") and body.get("tools"):
            return sample(empty)
        plain.append(request)
        return tool_call_answer(20 + len(plain)) if len(plain) <= 3 else final_answer()

    return plain, handler


def port_tools() -> MemoryToolSource:
    tools = MemoryToolSource()
    tools.add(
        "ports__check_port", lambda port: f"port {port} is free", parameters=dict(CHECK_PORT.parameters)
    )
    tools.add("system__memory_usage", lambda: "plenty", parameters=dict(MEMORY.parameters))
    return tools


@pytest.mark.parametrize("empty", ["A-chat-tools-stream", "A-empty-stream-with-ping"])
async def test_a_four_round_streamed_run_wastes_one_request(
    empty: str, model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    plain, model_server.handler = cannot_stream_tools(empty)
    provider = make(model_server, http_client, sleeps)
    result = await run(
        "Is port 22 in use?", provider=provider, tools=port_tools(), limits=Limits(max_rounds=4)
    )
    assert result.termination_reason is TerminationReason.SUCCESS and result.rounds == 4
    assert [call.name for call in result.tool_calls] == ["ports__check_port"] * 3  # no phantom calls
    wasted = len(model_server.requests) - result.rounds
    assert wasted == 1 and [r.json["stream"] for r in model_server.requests] == [True] + [False] * 4
    assert provider.learned.stream_tools is False and len(plain) == 4


async def test_what_was_learned_holds_for_requests_with_tools_only(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(sample("A-chat-tools-stream"), tool_call_answer(22), tool_call_answer(23))
    model_server.enqueue(sample("A-chat-plain-stream"))
    provider = make(model_server, http_client, sleeps)
    await provider.complete(REQUEST)
    await provider.complete(REQUEST)
    answer = await provider.complete(ModelRequest(messages=REQUEST.messages))  # no tools: streamed
    assert answer.content.startswith("To") and answer.finish_reason == "length"
    assert [r.json["stream"] for r in model_server.requests] == [True, False, False, True]


async def test_a_stream_that_broke_off_teaches_nothing(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """A connection that broke is not the server's way with tools (it may be the network)."""
    model_server.enqueue(Reply.sse([], abort_after=0), tool_call_answer(22))
    provider = make(model_server, http_client, sleeps)
    await provider.complete(REQUEST)
    assert provider.learned.stream_tools is None and provider.streams_tools


async def test_a_server_known_to_drop_streamed_tool_calls_is_never_asked_to_stream_them(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """Identified as llama-cpp-python: no stream of pings is waited for (0 wasted requests)."""
    model_server.enqueue(tool_call_answer(22), sample("A-chat-plain-stream"))
    provider = make(model_server, http_client, sleeps)
    provider.server_info = ServerInfo(kind="llama-cpp-python", source="probe")
    assert not provider.streams_tools
    await provider.complete(REQUEST)
    await provider.complete(ModelRequest(messages=REQUEST.messages))
    assert [r.json["stream"] for r in model_server.requests] == [False, True]
    provider.learned.stream_tools = True  # a saved lesson says otherwise: it wins over the kind
    assert provider.streams_tools


# --------------------------------------------------------------------------------------------
# 5. an answer cut off at the cap


async def test_an_answer_cut_at_our_cap_is_continued_over_the_wire(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """A-chat-plain.json: ``finish_reason: "length"`` at 40 of ``max_tokens`` 40."""
    model_server.enqueue(sample("A-chat-plain"), final_answer())
    provider = make(model_server, http_client, sleeps, stream=False, max_output_tokens=40)
    result = await run("What time is it?", provider=provider, tools=port_tools(), max_output_tokens=40)
    assert result.termination_reason is TerminationReason.SUCCESS and not result.truncated
    first, again = (r.json for r in model_server.requests)
    assert first["max_tokens"] == again["max_tokens"] == 40 and "tools" not in again
    partial = json.loads(read_recording(SERVER, "A-chat-plain").body)["choices"][0]["message"]["content"]
    assert again["messages"][-2] == {"role": "assistant", "content": partial}
    assert again["messages"][-1]["role"] == "user" and "cut off" in again["messages"][-1]["content"]
    assert result.answer == f"{partial} {partial}"  # the continuation (final_answer) is the same text
