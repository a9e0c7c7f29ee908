"""Every model request carries a cap on the answer's length (``output_cap.py``)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mcp_agent.config import LLMConfig
from mcp_agent.messages import Message
from mcp_agent.providers.anthropic import AnthropicProvider
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.gemini import GeminiProvider
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.openai import OpenAICompatProvider
from mcp_agent.providers.servers.endpoints import resolve_endpoint
from mcp_agent.providers.servers.info import ServerInfo, output_cap
from tests.fakes import openai_shapes as shapes
from tests.fakes.model_server import FakeModelServer, Reply
from tests.fakes.recordings import read_recording
from tests.providers.conftest import SleepRecorder

REQUEST = ModelRequest(messages=[Message.user("hi")])


@pytest.mark.parametrize(
    ("configured", "window", "local", "expected"),
    [
        (None, None, True, 2048),  # a local server of unknown window
        (None, None, False, 4096),  # a hosted API of unknown window
        (None, 4096, True, 1024),  # a quarter of a known window
        (None, 512, True, 256),  # never below 256
        (None, 131072, False, 8192),  # never above 8192
        (300, 4096, True, 300),  # llm.maxOutputTokens wins
        (100000, 4096, True, 100000),  # even above the window: the user's to choose
        (None, 0, True, 2048),  # a window of 0 is not known
    ],
)
def test_output_cap(configured: int | None, window: int | None, local: bool, expected: int) -> None:
    assert output_cap(configured, context_window=window, local=local) == expected


def openai_provider(
    server: FakeModelServer, client: httpx.AsyncClient, sleeps: SleepRecorder, **llm: Any
) -> OpenAICompatProvider:
    config = LLMConfig(**{"endpoint": server.base_url, "model": "m", "stream": False, **llm})
    return OpenAICompatProvider(
        config,
        client=client,
        endpoint=resolve_endpoint(config),
        retry=RetryPolicy(max_retries=0, sleep=sleeps),
    )


async def test_openai_compatible_requests_always_carry_a_cap(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    """The runaway: llama-cpp-python without max_tokens wrote 3,071 tokens in 288 s."""
    recording = read_recording("llama-cpp-python", "A-chat-plain")  # cut at max_tokens 40
    model_server.enqueue(*[Reply(status=200, headers=recording.headers, body=recording.body)] * 4)
    provider = openai_provider(model_server, http_client, sleeps)
    turn = await provider.complete(REQUEST)
    assert model_server.last.json["max_tokens"] == 2048 and turn.max_output_tokens == 2048
    assert turn.finish_reason == "length"
    provider.server_info = ServerInfo(kind="llama-cpp-python", context_window=4096, source="probe")
    assert (await provider.complete(REQUEST)).max_output_tokens == 1024
    assert model_server.last.json["max_tokens"] == 1024
    await provider.complete(ModelRequest(messages=REQUEST.messages, max_output_tokens=40))
    assert model_server.last.json["max_tokens"] == 40
    configured = openai_provider(model_server, http_client, sleeps, max_output_tokens=77)
    assert (await configured.complete(REQUEST)).max_output_tokens == 77
    assert model_server.last.json["max_tokens"] == 77


async def test_openai_reasoning_models_get_max_completion_tokens(
    model_server: FakeModelServer, http_client: httpx.AsyncClient, sleeps: SleepRecorder
) -> None:
    model_server.enqueue(Reply.json(shapes.completion(content="ok")))
    config = LLMConfig(endpoint=model_server.base_url, model="o3-mini", stream=False)
    endpoint = resolve_endpoint(config, kind="openai")
    provider = OpenAICompatProvider(
        config, client=http_client, endpoint=endpoint, retry=RetryPolicy(max_retries=0)
    )
    await provider.complete(REQUEST)
    body = model_server.last.json
    assert body.get(endpoint.capabilities.max_tokens_field) == output_cap(None, local=endpoint.local)


def test_native_providers_always_carry_a_cap() -> None:
    gemini = GeminiProvider(
        LLMConfig(provider="gemini", endpoint="http://127.0.0.1:1/v1beta", model="gemini-test"),
        client=httpx.AsyncClient(),
    )
    assert gemini.body(REQUEST)["generationConfig"]["maxOutputTokens"] == 8192
    configured = GeminiProvider(
        LLMConfig(provider="gemini", endpoint="http://127.0.0.1:1/v1beta", model="g", max_output_tokens=500),
        client=httpx.AsyncClient(),
    )
    assert configured.body(REQUEST)["generationConfig"]["maxOutputTokens"] == 500
    anthropic = AnthropicProvider(
        LLMConfig(provider="anthropic", endpoint="http://127.0.0.1:1/v1", model="claude-test"),
        client=httpx.AsyncClient(),
    )
    assert anthropic.body(REQUEST)["max_tokens"] == 4096
