"""Token counts a model server reports are trusted only as far as they make sense: the pure rules,
each provider's usage parser, the OpenAI-compatible provider over HTTP, and the token budget."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest

from mcp_agent.config import Limits, LLMConfig
from mcp_agent.loop.result import RESULT_SCHEMA, TerminationReason
from mcp_agent.loop.run import run
from mcp_agent.messages import Message, Turn, Usage
from mcp_agent.providers.anthropic import _wire as _anthropic_wire
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.gemini import _wire as _gemini_wire
from mcp_agent.providers.http.errors import RetryPolicy
from mcp_agent.providers.openai import OpenAICompatProvider
from mcp_agent.providers.openai._wire import parse_usage as openai_usage
from mcp_agent.providers.servers.endpoints import resolve_endpoint
from mcp_agent.providers.turns import (
    MAX_TOKENS_PER_CALL,
    UNTRUSTED,
    estimate_usage,
    finish_turn,
    token_count,
    trusted_usage,
)
from tests.fakes import openai_shapes
from tests.fakes.model_server import FakeModelServer, Reply
from tests.loop._helpers import echo_tools

HUGE = 10**308  # 309 digits
REQUEST = ModelRequest((Message.user("x" * 400),))  # estimated prompt: 100 tokens
ESTIMATE = estimate_usage(REQUEST, 8)  # the answer below, "answered", is 8 characters: 2 tokens
MAX = MAX_TOKENS_PER_CALL


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (None, 0),
        (0, 0),
        (7, 7),
        (HUGE, HUGE),
        (-1, UNTRUSTED),
        (True, UNTRUSTED),
        (3.0, UNTRUSTED),
        ("9", UNTRUSTED),
    ],
)
def test_token_count(value: Any, count: int) -> None:
    assert token_count(value) == count


@pytest.mark.parametrize(
    ("usage", "trusted"),
    [
        (Usage(5, 2, 7), Usage(5, 2, 7)),
        (Usage(5, 2, 9), Usage(5, 2, 9)),  # a total above the sum is the server's business
        (Usage(UNTRUSTED, 2, 7), Usage(ESTIMATE.prompt_tokens, 2, ESTIMATE.prompt_tokens + 2, clamped=True)),
        (Usage(5, UNTRUSTED, UNTRUSTED), Usage(5, 2, 7, clamped=True)),
        (Usage(HUGE, 2, HUGE), Usage(MAX, 2, MAX + 2, clamped=True)),
        (Usage(5, 2, HUGE), Usage(5, 2, MAX, clamped=True)),
        (Usage(5, 2, 3), Usage(5, 2, 7, clamped=True)),
        (Usage(MAX + 1, MAX + 1, 2 * MAX + 2), Usage(MAX, MAX, 2 * MAX, clamped=True)),
    ],
)
def test_trusted_usage(usage: Usage, trusted: Usage, caplog: pytest.LogCaptureFixture) -> None:
    assert trusted_usage(usage, lambda: ESTIMATE) == trusted
    assert ("cannot be trusted" in caplog.text) == trusted.clamped


# one case per kind of bad count, for each provider's parser, through the step every provider ends with
BAD = {
    "negative": (-1_000_000, Usage(ESTIMATE.prompt_tokens, 5, ESTIMATE.prompt_tokens + 5, clamped=True)),
    "bool": (True, Usage(ESTIMATE.prompt_tokens, 5, ESTIMATE.prompt_tokens + 5, clamped=True)),
    "float": (12.0, Usage(ESTIMATE.prompt_tokens, 5, ESTIMATE.prompt_tokens + 5, clamped=True)),
    "string": ("12", Usage(ESTIMATE.prompt_tokens, 5, ESTIMATE.prompt_tokens + 5, clamped=True)),
    "309 digits": (HUGE, Usage(MAX, 5, MAX + 5, clamped=True)),
}
PARSERS = {
    "openai": lambda prompt: openai_usage({"usage": {"prompt_tokens": prompt, "completion_tokens": 5}}),
    "llama.cpp": lambda prompt: openai_usage({"timings": {"prompt_n": prompt, "predicted_n": 5}}),
    "anthropic": lambda prompt: _anthropic_wire.parse_usage({"input_tokens": prompt, "output_tokens": 5}),
    "gemini": lambda prompt: _gemini_wire.parse_usage(
        {"promptTokenCount": prompt, "candidatesTokenCount": 5}
    ),
}


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("bad", BAD)
def test_each_provider_trusts_no_bad_count(parser: str, bad: str) -> None:
    value, expected = BAD[bad]
    usage = PARSERS[parser](value)
    assert usage is not None
    turn = finish_turn(Turn(content="answered", usage=usage), REQUEST)
    assert turn.usage == expected
    assert turn.usage.to_dict()["clamped"] is True


def test_a_good_count_is_left_alone_for_each_provider() -> None:
    for parse in PARSERS.values():
        usage = parse(20)
        assert usage is not None
        assert finish_turn(Turn(content="answered", usage=usage), REQUEST).usage == Usage(20, 5, 25)


def test_usage_clamped_round_trips_and_sums() -> None:
    clamped = Usage(1, 2, 3, clamped=True)
    assert clamped.to_dict() == {
        "prompt_tokens": 1,
        "completion_tokens": 2,
        "total_tokens": 3,
        "clamped": True,
    }
    assert "clamped" not in Usage(1, 2, 3).to_dict()
    assert Usage.from_dict(clamped.to_dict()) == clamped
    assert Usage.from_dict(Usage(1, 2, 3).to_dict()) == Usage(1, 2, 3)
    assert (Usage(1, 1, 2) + clamped) == Usage(2, 3, 5, clamped=True)
    assert (Usage(1, 1, 2) + Usage(1, 1, 2, estimated=True)).clamped is False


# ---------------------------------------------------------------------------- over HTTP


def provider(server: FakeModelServer, client: httpx.AsyncClient, **llm: Any) -> OpenAICompatProvider:
    config = LLMConfig(endpoint=server.base_url, model="m", **llm)
    return OpenAICompatProvider(
        config, client=client, endpoint=resolve_endpoint(config), retry=RetryPolicy(max_retries=0)
    )


def _reported(prompt: Any, completion: Any, total: Any) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


@pytest.mark.parametrize("stream", [True, False])
async def test_openai_compatible_counts_are_clamped(
    stream: bool, model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    usage = _reported(-5000, HUGE, -4000)
    if stream:
        chunks = openai_shapes.openai_stream(content="answered")
        chunks.append(
            {"id": "chatcmpl-abc123", "object": "chat.completion.chunk", "choices": [], "usage": usage}
        )
        model_server.enqueue(Reply.sse(chunks))
    else:
        body = openai_shapes.completion(content="answered")
        model_server.enqueue(Reply.json({**body, "usage": usage}))
    turn = await provider(model_server, http_client, stream=stream).complete(REQUEST)
    assert turn.usage == Usage(ESTIMATE.prompt_tokens, MAX, ESTIMATE.prompt_tokens + MAX, clamped=True)


async def test_negative_counts_no_longer_defeat_the_token_budget(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    def calls(i: int) -> dict[str, Any]:
        return openai_shapes.completion(calls=[openai_shapes.Call("echo", {"text": f"call {i}"})])

    model_server.enqueue(
        Reply.json({**calls(1), "usage": _reported(900, 50, 950)}),
        Reply.json({**calls(2), "usage": _reported(-1_000_000, 50, -999_950)}),  # would undo the spending
        Reply.json({**calls(3), "usage": _reported(900, 50, 950)}),
        Reply.json(openai_shapes.completion(content="done")),
    )
    result = await run(
        "hi",
        provider=provider(model_server, http_client, stream=False),
        tools=echo_tools(),
        limits=Limits(max_tokens=1000),
    )
    assert result.termination_reason == TerminationReason.TOKEN_BUDGET
    assert result.usage.clamped and result.usage.total_tokens >= 1000
    structured = result.to_structured()
    assert structured["usage"]["clamped"] is True
    jsonschema.validate(structured, RESULT_SCHEMA)
    assert json.dumps(structured)  # and it is plain JSON
