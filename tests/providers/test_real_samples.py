"""Wire samples recorded by the real-server tier, replayed through the provider in the fast suite.

``tests/fakes/real_samples/*.json`` are exchanges the tier (``make test-real``) saw at its
recording proxy: the body the agent sent to a real llama-cpp-python or llama-server and the
answer byte for byte (``MCP_AGENT_REAL_SAMPLES=tests/fakes/real_samples make test-real`` records
them anew). Here each answer is served again by the fake model server to a provider asked the
same request, and what the provider makes of it is checked: the calls, the text, the usage,
the errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_agent.config import LLMConfig
from mcp_agent.exceptions import ContextLengthError, ProviderError
from mcp_agent.messages import Message, ToolCall, ToolSpec, Turn
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.openai import OpenAICompatProvider
from mcp_agent.providers.servers.endpoints import resolve_endpoint
from tests.fakes.model_server import FakeModelServer, Reply
from tests.providers.conftest import SleepRecorder

SAMPLES = Path(__file__).resolve().parents[1] / "fakes" / "real_samples"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def request_of(sample: dict[str, Any]) -> ModelRequest:
    """The request as the agent had it (messages and tools from the recorded body)."""
    body = sample["request"]["body"]
    messages = []
    for m in body["messages"]:
        if m["role"] == "assistant":
            calls = tuple(
                ToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                for c in m.get("tool_calls") or []
            )
            messages.append(Message(role="assistant", content=m.get("content") or "", tool_calls=calls))
        elif m["role"] == "tool":
            messages.append(
                Message(role="tool", content=m["content"], tool_call_id=m["tool_call_id"], name=m.get("name"))
            )
        else:
            messages.append(Message(role=m["role"], content=m["content"]))
    tools = tuple(
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            parameters=t["function"]["parameters"],
        )
        for t in body.get("tools") or []
    )
    return ModelRequest(
        messages=messages,
        tools=tools,
        max_output_tokens=body.get("max_tokens"),
        temperature=body.get("temperature"),
    )


def reply_of(sample: dict[str, Any]) -> Reply:
    response = sample["response"]
    return Reply(status=response["status"], headers=dict(response["headers"]), body=response["body"].encode())


def provider_for(
    server: FakeModelServer, client: httpx.AsyncClient, sample: dict[str, Any], **llm: Any
) -> OpenAICompatProvider:
    body = sample["request"]["body"]
    config = LLMConfig(endpoint=server.base_url, model=body["model"], stream=bool(body.get("stream")), **llm)
    return OpenAICompatProvider(
        config,
        client=client,
        endpoint=resolve_endpoint(config),
        retry=RetryPolicy(max_retries=0, sleep=SleepRecorder()),
    )


def offered(sample: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in sample["request"]["body"].get("tools") or []}


def wire_calls(sample: dict[str, Any]) -> list[str]:
    """The names in the answer's ``tool_calls`` (a whole answer or a stream's deltas)."""
    text = sample["response"]["body"]
    if "event-stream" not in sample["response"]["headers"].get("content-type", ""):
        return [
            c["function"]["name"] for c in json.loads(text)["choices"][0]["message"].get("tool_calls") or []
        ]
    names: dict[int, str] = {}
    for line in text.splitlines():
        data = line[5:].strip() if line.startswith("data:") else ""
        if not data or data == "[DONE]":
            continue
        for choice in json.loads(data).get("choices") or []:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                if (call.get("function") or {}).get("name"):
                    names[call.get("index", 0)] = call["function"]["name"]
    return [names[i] for i in sorted(names)]


def reported(sample: dict[str, Any]) -> dict[str, Any] | None:
    text = sample["response"]["body"]
    payloads: list[Any]
    if "event-stream" in sample["response"]["headers"].get("content-type", ""):
        payloads = [
            json.loads(line[5:])
            for line in text.splitlines()
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")
        ]
    else:
        payloads = [json.loads(text)]
    usage = timings = None
    for payload in payloads:
        if isinstance(payload, dict) and isinstance(payload.get("usage"), dict):
            usage = payload["usage"]
        if isinstance(payload, dict) and isinstance(payload.get("timings"), dict):
            timings = payload["timings"]
    if usage is None and timings is not None:  # llama-server streams its counts in timings
        usage = {"prompt_tokens": timings.get("prompt_n", 0) + timings.get("cache_n", 0)}
    return usage


# ------------------------------------------------------------------------------ what each shows


@dataclass(frozen=True)
class Check:
    """What the provider must make of one sample: a function of (sample, turn or error)."""

    check: Callable[[dict[str, Any], Turn], None]
    marks: tuple[Any, ...] = ()


def _calls_as_on_the_wire(sample: dict[str, Any], turn: Turn) -> None:
    assert [c.name for c in turn.tool_calls] == wire_calls(sample) and wire_calls(sample)
    assert {c.name for c in turn.tool_calls} <= offered(sample)
    assert all(c.error is None for c in turn.tool_calls)


def _usage_as_reported(sample: dict[str, Any], turn: Turn) -> None:
    usage = reported(sample)
    if usage is None:
        assert turn.usage.estimated and turn.usage.prompt_tokens > 0
    else:
        assert not turn.usage.estimated and turn.usage.prompt_tokens == usage["prompt_tokens"]


def _a_call_and_its_usage(sample: dict[str, Any], turn: Turn) -> None:
    _calls_as_on_the_wire(sample, turn)
    _usage_as_reported(sample, turn)


def _text_without_calls(sample: dict[str, Any], turn: Turn) -> None:
    assert not turn.tool_calls and turn.content
    _usage_as_reported(sample, turn)


CHECKS: dict[str, Check] = {
    "llama-server-required-call-stream": Check(_a_call_and_its_usage),
    "llama-server-required-call-plain": Check(_a_call_and_its_usage),
    "llama-server-after-tool-stream": Check(_usage_as_reported),
    "llama-server-after-tool-plain": Check(_usage_as_reported),
    "lcp-fc-named-call-plain": Check(_a_call_and_its_usage),
    "lcp-fc-plain-stream-no-usage": Check(_text_without_calls),
    "lcp-template-tools-stream": Check(_text_without_calls),
    "llama-server-gemma-text-tools": Check(_usage_as_reported),
}
"""Samples of answers a provider reads into a turn; the others (an empty stream, an error) are
checked one by one below."""


def test_every_sample_is_checked() -> None:
    on_disk = {path.stem for path in SAMPLES.glob("*.json")}
    assert on_disk == set(CHECKS) | {
        "lcp-fc-tools-stream-empty",
        "lcp-fc-context-exceeded-400",
        "llama-server-gemma-unparsed-500",
    }


@pytest.mark.parametrize("name", [pytest.param(name, marks=check.marks) for name, check in CHECKS.items()])
async def test_a_recorded_answer_is_read(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, name: str
) -> None:
    sample = load(name)
    model_server.enqueue(reply_of(sample))
    turn = await provider_for(model_server, http_client, sample).complete(request_of(sample))
    CHECKS[name].check(sample, turn)
    assert model_server.requests[0].json["messages"] == sample["request"]["body"]["messages"]


async def test_an_empty_tool_stream_is_asked_again_without_streaming(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    """llama-cpp-python cannot stream tool calls: 200 and an empty body; the same request again,
    not streamed, gets the calls."""
    empty, plain = load("lcp-fc-tools-stream-empty"), load("lcp-fc-named-call-plain")
    assert empty["response"]["status"] == 200 and "data:" not in empty["response"]["body"]
    model_server.enqueue(reply_of(empty), reply_of(plain))
    turn = await provider_for(model_server, http_client, empty).complete(request_of(empty))
    assert [r.json["stream"] for r in model_server.requests] == [True, False]
    assert turn.tool_calls and {c.name for c in turn.tool_calls} <= offered(empty)


async def test_after_an_empty_tool_stream_the_next_call_does_not_stream(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    empty, plain = load("lcp-fc-tools-stream-empty"), load("lcp-fc-named-call-plain")
    model_server.enqueue(reply_of(empty), reply_of(plain), reply_of(plain))
    provider = provider_for(model_server, http_client, empty)
    await provider.complete(request_of(empty))
    await provider.complete(request_of(empty))
    assert [r.json["stream"] for r in model_server.requests] == [True, False, False]


async def test_a_prompt_over_the_context_is_a_context_length_error(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    sample = load("lcp-fc-context-exceeded-400")
    model_server.enqueue(reply_of(sample))
    with pytest.raises(ProviderError) as caught:
        await provider_for(model_server, http_client, sample).complete(request_of(sample))
    assert isinstance(caught.value, ContextLengthError)


async def test_the_window_a_context_error_states_is_learned_and_kept(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    """llama-cpp-python publishes its n_ctx nowhere but in this error: the provider takes it (the
    output cap fits it from the next request) and hands it to what keeps lessons (the cache)."""
    sample = load("lcp-fc-context-exceeded-400")
    model_server.enqueue(reply_of(sample))
    provider = provider_for(model_server, http_client, sample)
    kept: list[dict[str, Any]] = []
    provider.learned.keep = lambda **lesson: kept.append(lesson)
    assert provider.server_info.context_window is None
    with pytest.raises(ContextLengthError):
        await provider.complete(request_of(sample))
    assert provider.server_info.context_window == 512
    assert kept == [{"context_window": 512, "context_source": "a context-length error"}]
    assert provider.output_cap(request_of(sample)) < 512


async def test_an_answer_llama_server_cannot_parse_is_asked_again_with_tools_as_text(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    """llama-server throws away a generation that does not parse as its template's call format
    (Gemma 3 270M, ``gemma3-tools.jinja``): a 500 that the same request at temperature 0 gets
    again. With parsing on, the turn is asked once more with the tools as text, not retried."""
    unparsed, text = load("llama-server-gemma-unparsed-500"), load("llama-server-gemma-text-tools")
    assert unparsed["response"]["status"] == 500
    model_server.enqueue(reply_of(unparsed), reply_of(text))
    body = unparsed["request"]["body"]
    config = LLMConfig(endpoint=model_server.base_url, model=body["model"], stream=False)
    provider = OpenAICompatProvider(
        config,
        client=http_client,
        endpoint=resolve_endpoint(config),
        retry=RetryPolicy(max_retries=2, sleep=SleepRecorder()),
    )
    turn = await provider.complete(request_of(unparsed))
    first, second = (r.json for r in model_server.requests)
    assert first["tools"] and "tools" not in second
    assert second["messages"] == text["request"]["body"]["messages"]  # what the server was sent
    assert turn.content.startswith("You are a careful assistant") and not turn.tool_calls  # it parrots
    assert provider.tool_call_style == "auto"  # for this turn only


async def test_with_parsing_off_an_answer_llama_server_cannot_parse_stays_an_error(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    unparsed = load("llama-server-gemma-unparsed-500")
    model_server.enqueue(reply_of(unparsed))
    provider = provider_for(model_server, http_client, unparsed, tool_call_style="native")
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request_of(unparsed))
    assert "does not match the expected peg-native format" in caught.value.message
    assert len(model_server.requests) == 1
