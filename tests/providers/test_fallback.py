"""``llm.fallbacks``: the next model answers when the first is down, 5xx's or is rate-limited;
not for errors that are the request's or the config's; the answer says which model gave it.

Two fake model servers on real sockets stand for a local server and a hosted one."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import jsonschema
import pytest

from mcp_agent.config import LLMConfig, parse_config
from mcp_agent.events import ModelCallEnded, RecordingSink
from mcp_agent.exceptions import (
    ContextLengthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
)
from mcp_agent.gateway.metrics import Metrics
from mcp_agent.loop.result import RESULT_SCHEMA, TerminationReason
from mcp_agent.loop.run import run
from mcp_agent.messages import Message
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.factory import open_provider
from mcp_agent.providers.fallback import (
    Candidate,
    FallbackProvider,
    fallback_configs,
    falls_back,
)
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.openai import OpenAICompatProvider
from mcp_agent.tools.memory import MemoryToolSource
from tests.fakes import openai_shapes as shapes
from tests.fakes.model_server import FakeModelServer, Reply, running_model_server
from tests.providers.conftest import SleepRecorder

REQUEST = ModelRequest(messages=[Message.user("hi")])


@pytest.fixture
def second() -> Iterator[FakeModelServer]:
    """The fallback's server (``model_server`` is the primary's)."""
    with running_model_server() as server:
        yield server


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answer(text: str) -> Reply:
    return Reply.json(shapes.completion(content=text))


def error(status: int, message: str = "boom", **kw: Any) -> Reply:
    return Reply.json(shapes.openai_error(message, **kw), status=status)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def chain(
    client: httpx.AsyncClient, *servers: FakeModelServer | str, clock: Clock | None = None, retries: int = 2
) -> FallbackProvider:
    """A chain over the servers (a str is an endpoint URL), models ``m0``, ``m1``...; no real sleeps."""
    candidates = []
    for n, server in enumerate(servers):
        endpoint = server if isinstance(server, str) else server.base_url
        llm = LLMConfig(endpoint=endpoint, model=f"m{n}", stream=False)
        provider = OpenAICompatProvider(
            llm, client=client, retry=RetryPolicy(max_retries=retries, sleep=SleepRecorder())
        )
        candidates.append(Candidate(llm.model, endpoint, provider))
    return FallbackProvider(candidates, clock=clock or Clock())


# --------------------------------------------------------------------------------------------
# config


def test_entries_inherit_from_the_primary_but_never_another_servers_credentials() -> None:
    config = parse_config(
        {
            "llm": {
                "endpoint": "https://api.openai.com/v1",
                "model": "gpt-4o",
                "apiKey": "sk-primary",
                "headers": {"X-Org": "o"},
                "maxRetries": 5,
                "stream": False,
                "vision": True,
                "fallbacks": [
                    {"model": "gpt-4o-mini"},  # same server: everything inherited
                    {
                        "endpoint": "https://api.openai.com/v1/",
                        "model": "gpt-4.1",
                    },  # same server, spelled otherwise
                    {"endpoint": "https://api.groq.com/openai/v1", "model": "llama-4", "maxRetries": 0},
                    {
                        "endpoint": "https://api.anthropic.com",
                        "model": "claude-sonnet-4",
                        "apiKey": "sk-ant-x",
                    },
                ],
            }
        }
    )
    mini, same, groq, claude = fallback_configs(config.llm)
    assert (mini.endpoint, mini.model, mini.api_key, mini.headers) == (
        "https://api.openai.com/v1", "gpt-4o-mini", "sk-primary", {"X-Org": "o"},
    )  # fmt: skip
    assert (mini.max_retries, mini.stream, mini.vision, mini.fallbacks) == (5, False, True, [])
    assert (same.api_key, same.model) == ("sk-primary", "gpt-4.1")
    assert (groq.api_key, groq.headers, groq.max_retries, groq.stream) == (None, {}, 0, False)
    assert (claude.api_key, claude.provider) == ("sk-ant-x", "auto")
    assert type(mini) is LLMConfig


def test_an_entry_cannot_nest_fallbacks() -> None:
    with pytest.raises(Exception, match=r"llm.fallbacks\[0\].*cannot have fallbacks"):
        parse_config({"llm": {"fallbacks": [{"model": "a", "fallbacks": [{"model": "b"}]}]}})
    with pytest.raises(Exception, match=r"llm.fallbacks\[0\].endpont: unknown key"):
        parse_config({"llm": {"fallbacks": [{"endpont": "x"}]}})


# --------------------------------------------------------------------------------------------
# which failures move on


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ProviderConnectionError("Ollama is not running at ...", terminal=True), True),  # refused
        (ProviderConnectionError("cannot connect", retryable=True), True),
        (ProviderConnectionError("bad model server URL: ftp://x", terminal=True), False),
        (ProviderHTTPError("boom", status=500, retryable=True), True),
        (ProviderHTTPError("overloaded", status=529, retryable=True), True),
        (ProviderHTTPError("slow down", status=429, retryable=True), True),
        (ProviderHTTPError("insufficient_quota", status=429, terminal=True), True),  # another has its own
        (ProviderHTTPError("timeout", status=408, retryable=True), True),
        (ProviderResponseError("the model server did not answer in time", retryable=True), True),
        (ProviderResponseError("overloaded", status=503, retryable=True), True),  # a stream's error event
        (ProviderHTTPError("bad request", status=400, terminal=True), False),
        (ProviderHTTPError("bad key", status=401, terminal=True), False),
        (ProviderHTTPError("forbidden", status=403, terminal=True), False),
        (ProviderHTTPError("no such model", status=404, terminal=True), False),
        (ProviderHTTPError("too big", status=413, terminal=True), False),
        (ContextLengthError("maximum context length is 8192 tokens", status=400), False),
        (
            ProviderResponseError("this is not an OpenAI-compatible API (got text/html ...)", terminal=True),
            False,
        ),
        (ProviderResponseError("larger than 64 bytes (llm.maxResponseBytes)"), False),
        (ProviderResponseError("Gemini blocked the prompt (SAFETY)", terminal=True), False),
    ],
)
def test_which_failures_fall_back(exc: ProviderError, expected: bool) -> None:
    assert falls_back(exc) is expected


# --------------------------------------------------------------------------------------------
# over real HTTP


async def test_the_first_server_down_the_second_answers(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(answer("from the second"))
    provider = chain(http_client, f"http://127.0.0.1:{closed_port()}/v1", model_server)
    with anyio.fail_after(20):
        turn = await provider.complete(REQUEST)
    assert (turn.content, turn.model) == ("from the second", "m1")


@pytest.mark.parametrize("status", [500, 503, 529, 429])
async def test_a_5xx_or_429_after_its_retries_moves_on(
    model_server: FakeModelServer, second: FakeModelServer, http_client: httpx.AsyncClient, status: int
) -> None:
    model_server.enqueue(*[error(status)] * 3)
    second.enqueue(answer("from the second"))
    with anyio.fail_after(20):
        turn = await chain(http_client, model_server, second).complete(REQUEST)
    assert (turn.content, turn.model) == ("from the second", "m1")
    assert (len(model_server.requests), len(second.requests)) == (3, 1)  # the first retried twice first


@pytest.mark.parametrize(
    "reply",
    [
        error(400, "bad request", type="invalid_request_error"),
        error(401, "Incorrect API key provided", type="invalid_request_error", code="invalid_api_key"),
        error(403, "forbidden"),
        error(404, "The model `m0` does not exist", code="model_not_found"),
        error(400, "This model's maximum context length is 8192 tokens", code="context_length_exceeded"),
    ],
    ids=["400", "401", "403", "404", "context"],
)
async def test_the_requests_or_the_configs_errors_do_not(
    model_server: FakeModelServer, second: FakeModelServer, http_client: httpx.AsyncClient, reply: Reply
) -> None:
    model_server.enqueue(reply)
    with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
        await chain(http_client, model_server, second).complete(REQUEST)
    assert second.requests == []
    assert "every model" not in str(caught.value)  # the error as it came
    if b"context" in reply.body:
        assert isinstance(caught.value, ContextLengthError)


async def test_all_failing_ends_with_the_last_error_naming_each(
    model_server: FakeModelServer, second: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    down = f"http://127.0.0.1:{closed_port()}/v1"
    model_server.enqueue(*[error(500, "upstream exploded")] * 3)
    second.enqueue(error(401, "Incorrect API key provided", type="invalid_request_error"))
    with anyio.fail_after(20), pytest.raises(ProviderHTTPError) as caught:
        await chain(http_client, down, model_server, second).complete(REQUEST)
    exc = caught.value
    assert (exc.status, exc.terminal) == (401, True)
    assert exc.message.startswith("every model tried failed: m0 at http://127.0.0.1:")
    assert f"m1 at {model_server.base_url}: HTTP 500: upstream exploded; then " in exc.message
    assert exc.message.endswith(f"m2 at {second.base_url}: HTTP 401: Incorrect API key provided")


async def test_a_context_error_of_a_fallback_keeps_its_class(
    model_server: FakeModelServer, second: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    """The loop trims on ContextLengthError, whichever model raised it."""
    model_server.enqueue(*[error(503)] * 3)
    second.enqueue(error(400, "This model's maximum context length is 8192 tokens"))
    with anyio.fail_after(20), pytest.raises(ContextLengthError, match="every model tried failed"):
        await chain(http_client, model_server, second).complete(REQUEST)


async def test_a_model_that_failed_rests_then_comes_back(
    model_server: FakeModelServer, second: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    clock = Clock()
    provider = chain(http_client, model_server, second, clock=clock, retries=0)
    model_server.enqueue(error(429, "slow down"))
    second.enqueue(answer("one"), answer("two"))
    assert (await provider.complete(REQUEST)).model == "m1"
    clock.now += 10  # resting: the second is asked first, the first not at all
    assert (await provider.complete(REQUEST)).content == "two"
    assert (len(model_server.requests), len(second.requests)) == (1, 2)
    clock.now += 30  # rested: first again
    model_server.enqueue(answer("three"))
    turn = await provider.complete(REQUEST)
    assert (turn.content, turn.model, len(model_server.requests)) == ("three", "m0", 2)


async def test_a_retry_hint_longer_than_the_rest_is_honoured(
    model_server: FakeModelServer, second: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    clock = Clock()
    provider = chain(http_client, model_server, second, clock=clock, retries=0)
    model_server.enqueue(
        Reply.json(shapes.openai_error("slow down"), status=429, headers={"retry-after": "50"})
    )
    second.enqueue(answer("one"), answer("two"))
    await provider.complete(REQUEST)
    clock.now += 40  # past the 30 s rest, not the server's 50 s
    assert (await provider.complete(REQUEST)).model == "m1"
    assert len(model_server.requests) == 1


async def test_no_fallback_once_the_answer_began_to_stream(
    model_server: FakeModelServer, second: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.enqueue(
        Reply.sse(shapes.openai_stream(content="Half an ans")[:3], done=False, abort_after=3)
    )
    llm = LLMConfig(endpoint=model_server.base_url, model="m0")
    first = OpenAICompatProvider(llm, client=http_client, retry=RetryPolicy(sleep=SleepRecorder()))
    provider = FallbackProvider([Candidate("m0", "a", first), *chain(http_client, second).candidates])
    seen: list[str] = []
    with anyio.fail_after(20), pytest.raises(ProviderResponseError):
        await provider.complete(REQUEST, lambda delta: seen.append(delta.text))
    assert seen and second.requests == []


# --------------------------------------------------------------------------------------------
# the whole way: config, factory, loop, result, events, metrics


async def test_a_run_says_which_model_answered(model_server: FakeModelServer, tmp_path: Any) -> None:
    config = parse_config(
        {
            "llm": {
                "endpoint": f"http://127.0.0.1:{closed_port()}/v1",  # "local": not running
                "model": "qwen3:8b",
                "stream": False,
                "fallbacks": [{"endpoint": model_server.base_url, "model": "hosted-model"}],
            }
        }
    )
    model_server.enqueue(answer("hello from the fallback"))
    events = RecordingSink()
    metrics = Metrics.for_config(config)  # its model labels: llm.model and the fallbacks' models
    async with open_provider(config.llm) as provider:
        with anyio.fail_after(20):
            result = await run("hi", provider=provider, tools=MemoryToolSource(), events=[events, metrics])
    assert result.termination_reason is TerminationReason.SUCCESS
    assert result.model == "hosted-model"
    structured = result.to_structured()
    assert structured["model"] == "hosted-model"
    jsonschema.validate(structured, RESULT_SCHEMA)
    [ended] = [e for e in events.events if isinstance(e, ModelCallEnded)]
    assert (ended.model, ended.to_dict()["model"]) == ("hosted-model", "hosted-model")
    assert metrics.value("mcp_agent_model_calls_total", model="hosted-model", outcome="ok") == 1


async def test_a_run_whose_models_all_fail_names_them(model_server: FakeModelServer) -> None:
    config = parse_config(
        {
            "llm": {
                "endpoint": f"http://127.0.0.1:{closed_port()}/v1",
                "model": "qwen3:8b",
                "stream": False,
                "maxRetries": 0,
                "fallbacks": [{"endpoint": model_server.base_url, "model": "hosted-model"}],
            }
        }
    )
    model_server.enqueue(error(500, "the hosted one is down too"))
    metrics = Metrics.for_config(config)
    async with open_provider(config.llm) as provider:
        with anyio.fail_after(20):
            result = await run("hi", provider=provider, tools=MemoryToolSource(), events=metrics)
    assert result.termination_reason is TerminationReason.LLM_ERROR
    assert "qwen3:8b at http://127.0.0.1:" in result.detail
    assert (
        f"then hosted-model at {model_server.base_url}: HTTP 500: the hosted one is down too" in result.detail
    )
    assert result.model is None and result.to_structured()["model"] is None
    # no model answered
    assert metrics.value("mcp_agent_model_calls_total", model="unknown", outcome="error") == 1


def test_the_readme_example_is_a_valid_config() -> None:
    import json
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text(encoding="utf-8")
    [example] = [block for block in re.findall(r"```json\n(.*?)```", readme, re.S) if "fallbacks" in block]
    config = parse_config(json.loads(example), environ={"OPENAI_API_KEY": "sk-test"})
    [hosted] = fallback_configs(config.llm)
    assert (hosted.model, hosted.api_key, hosted.vision) == ("gpt-4o-mini", "sk-test", "auto")
