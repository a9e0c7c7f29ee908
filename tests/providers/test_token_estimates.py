"""Usage the server did not report: estimated near the truth, and said to be an estimate (tokens.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import jsonschema
import pytest

from mcp_agent.config import LLMConfig
from mcp_agent.loop.result import RESULT_SCHEMA, TerminationReason
from mcp_agent.loop.run import run
from mcp_agent.messages import Message, ToolSpec, Turn, Usage
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.factory import open_provider
from mcp_agent.providers.servers.info import ServerInfo
from mcp_agent.providers.turns import (
    MESSAGE_TOKENS,
    REPLY_TOKENS,
    UsageEstimator,
    approx_prompt_tokens,
    approx_tokens,
    estimate_usage,
    prompt_pieces,
    template_for,
)
from tests.fakes.model_server import FakeModelServer, Reply
from tests.fakes.openai_shapes import Call, completion, openai_stream
from tests.fakes.server_shapes import llama_cpp_python_routes, recorded_runs
from tests.loop._helpers import echo_tools

pytestmark = pytest.mark.anyio

PYTHON_A = ServerInfo(kind="llama-cpp-python", tools_dropped=False)
PYTHON_B = ServerInfo(kind="llama-cpp-python", tools_dropped=True)
TOOL = ToolSpec(
    "ports__check_port", "Check a TCP port.", {"type": "object", "properties": {"port": {"type": "integer"}}}
)


def test_approx_tokens_follows_bpe_pieces() -> None:
    assert approx_tokens("hello world " * 400) == 801  # SmolLM2: 801 (800 words and the last space)
    assert approx_tokens("2026") == 4  # digits one by one
    assert approx_tokens('{"port": 22}') == 6
    assert approx_tokens("") == 0


@pytest.mark.parametrize("run", recorded_runs(), ids=lambda run: run.name)
def test_recorded_runs_are_estimated_within_15_percent(run: object) -> None:
    """The ground truth is llama-cpp-python's own count. Only "B plain" is off (-60 %): the GGUF's
    template adds SmolLM2's default system prompt to a request that has none, and the agent
    always sends one."""
    from tests.fakes.server_shapes import RecordedRun

    assert isinstance(run, RecordedRun)
    info = PYTHON_B if run.server == "B" else PYTHON_A
    template = template_for(info)
    estimate = approx_prompt_tokens(run.request, tools=not info.tools_dropped, template=template)
    error = (estimate - run.prompt_tokens) / run.prompt_tokens
    old = (estimate_usage(run.request, 0).prompt_tokens - run.prompt_tokens) / run.prompt_tokens
    if run.name == "B plain":
        assert -0.65 < error < -0.5
    else:
        assert abs(error) <= 0.15, f"{run.name}: {estimate} against {run.prompt_tokens}"
        assert abs(old) > 0.15  # four characters a token missed every one of them


def test_chatml_function_calling_leaves_tool_messages_out() -> None:
    request = ModelRequest(
        (Message.system("s"), Message.user("u"), Message(role="tool", content="x" * 999)), (TOOL,)
    )
    generic = prompt_pieces(request)
    python = prompt_pieces(request, template="chatml-function-calling")
    assert len(generic) == 5 and len(python) == 4  # tools' block, system, user, (tool), reply
    assert "functions.ports__check_port:" in python[0].text and "Check a TCP port" not in python[0].text
    assert [piece.markers for piece in python[1:]] == [MESSAGE_TOKENS, MESSAGE_TOKENS, REPLY_TOKENS]
    assert template_for(ServerInfo(kind="llamacpp")) == template_for(PYTHON_B) == "chatml"


async def test_the_tokenizer_counts_each_distinct_piece_once(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.routes.update(llama_cpp_python_routes())
    info = ServerInfo(kind="llama-cpp-python", tokenize_url=f"{model_server.url}/extras/tokenize/count")
    estimator = UsageEstimator(http_client, LLMConfig(model="m"))
    first = ModelRequest((Message.system("be brief now"), Message.user("is port 22 open")), (TOOL,))
    usage = await estimator.estimate(first, Turn(content="yes it is"), info)
    words = len(prompt_pieces(first, template="chatml-function-calling")[0].text.split())
    assert usage == Usage(
        words + 3 + 4 + 2 * MESSAGE_TOKENS + REPLY_TOKENS, 3, usage.total_tokens, estimated=True
    )
    assert estimator.counter.requests == 4  # tools' block, system, user, answer
    later = ModelRequest((*first.messages, Message.assistant("yes it is"), Message.user("and 80")), (TOOL,))
    await estimator.estimate(later, Turn(content="no"), info)
    assert (
        estimator.counter.requests == 7
    )  # only "message:\nyes it is" (as that template has it), "and 80", "no"
    sent = [request.json for request in model_server.probes if request.path == "/extras/tokenize/count"]
    assert {"input": "and 80", "model": "m"} in sent


async def test_a_failing_tokenizer_is_asked_once(
    model_server: FakeModelServer, http_client: httpx.AsyncClient
) -> None:
    model_server.routes["/extras/tokenize/count"] = Reply.json({"detail": "boom"}, status=500)
    info = ServerInfo(kind="llama-cpp-python", tokenize_url=f"{model_server.url}/extras/tokenize/count")
    estimator = UsageEstimator(http_client, LLMConfig(model="m"))
    request = ModelRequest((Message.user("hello there"),))
    for _ in range(3):
        usage = await estimator.estimate(request, Turn(content="hi"), info)
        assert usage.prompt_tokens == approx_prompt_tokens(request, template="chatml-function-calling")
        assert usage.estimated
    assert len(model_server.probes) == 2  # the first estimate's two texts, then never again


async def test_reported_counts_calibrate_later_estimates(http_client: httpx.AsyncClient) -> None:
    estimator = UsageEstimator(http_client, LLMConfig(model="m"))
    info = ServerInfo(kind="unknown")
    seen = ModelRequest((Message.system("You are SmolLM."), Message.user("What time is it?")))
    approx = approx_prompt_tokens(seen)
    estimator.observe(seen, Usage(2 * approx, 5, 2 * approx + 5), info)
    later = ModelRequest((*seen.messages, Message.assistant("noon"), Message.user("And in Tokyo?")))
    usage = await estimator.estimate(later, Turn(content="late"), info)
    assert usage.prompt_tokens == round(approx_prompt_tokens(later) * 2)
    with_tools = ModelRequest(later.messages, (TOOL,))  # another class: not calibrated by it
    assert (await estimator.estimate(with_tools, Turn(), info)).prompt_tokens == approx_prompt_tokens(
        with_tools
    )


async def test_a_server_that_drops_tools_is_seen_and_said(
    http_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    run_b = next(run for run in recorded_runs() if run.name == "B tools")
    estimator = UsageEstimator(http_client, LLMConfig(model="m"))
    info = ServerInfo(kind="llama-cpp-python")
    with caplog.at_level(logging.WARNING):
        estimator.observe(run_b.request, Usage(run_b.prompt_tokens, 60, run_b.prompt_tokens + 60), info)
    assert estimator.tools_dropped is True
    assert "--chat_format chatml-function-calling" in caplog.text
    run_a = next(run for run in recorded_runs() if run.name == "A tools")
    other = UsageEstimator(http_client, LLMConfig(model="m"))
    other.observe(run_a.request, Usage(run_a.prompt_tokens, 7, run_a.prompt_tokens + 7), info)
    assert other.tools_dropped is False
    cached = UsageEstimator(http_client, LLMConfig(model="m"))  # a prompt cache hit counts a few tokens
    cached.observe(run_b.request, Usage(3, 60, 63), info)
    assert cached.tools_dropped is None


# ---------------------------------------------------------------------------------- through the provider


async def test_a_stream_without_usage_is_estimated_by_the_servers_tokenizer(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.routes.update(llama_cpp_python_routes())
    model_server.enqueue(Reply.sse(openai_stream(content="It is noon.")))  # no usage chunk, as recorded
    request = ModelRequest((Message.system("be brief"), Message.user("what time is it")))
    async with open_provider(
        LLMConfig(endpoint=model_server.base_url, model="m"), state_dir=tmp_path
    ) as provider:
        turn = await provider.complete(request)
    words = 2 + 4
    assert turn.usage == Usage(words + 2 * MESSAGE_TOKENS + REPLY_TOKENS, 3, 3 + words + 14, estimated=True)
    assert [p.path for p in model_server.probes].count("/extras/tokenize/count") == 3


async def test_a_stream_that_broke_off_still_counts(model_server: FakeModelServer, tmp_path: Path) -> None:
    chunks = openai_stream(content="The answer is long and it goes on and on")
    model_server.enqueue(Reply.sse(chunks, abort_after=4))
    llm = LLMConfig(endpoint=model_server.base_url, model="m", max_retries=0)
    async with open_provider(llm, state_dir=tmp_path) as provider:
        result = await run("tell me", provider=provider, tools=echo_tools())
    assert result.termination_reason is TerminationReason.LLM_ERROR
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0 and result.usage.estimated
    structured = result.to_structured()
    assert structured["usage"]["estimated"] is True
    jsonschema.validate(structured, RESULT_SCHEMA)


async def test_reported_usage_is_left_as_it_is(model_server: FakeModelServer, tmp_path: Path) -> None:
    model_server.routes.update(llama_cpp_python_routes())
    model_server.enqueue(Reply.json(completion(content="ok", usage=(230, 7))))
    async with open_provider(
        LLMConfig(endpoint=model_server.base_url, model="m", stream=False), state_dir=tmp_path
    ) as provider:
        turn = await provider.complete(ModelRequest((Message.user("hi"),)))
    assert turn.usage == Usage(230, 7, 237)
    assert not [p for p in model_server.probes if "tokenize" in p.path]


async def test_the_tools_check_counts_a_tool_set_once_and_still_decides_later(
    http_client: httpx.AsyncClient,
) -> None:
    """chatml: the tools' block is counted once per tool set (``offered`` = ``without`` plus it),
    and a call the check cannot tell about does not stop a later, shorter one from deciding."""
    info = ServerInfo(kind="unknown")
    tools = tuple(
        ToolSpec(f"tool_{i}", "Look something up in the catalog. " * 8, {"type": "object", "properties": {}})
        for i in range(6)
    )
    estimator = UsageEstimator(http_client, LLMConfig(model="m"))
    short = ModelRequest((Message.user("hi"),), tools)
    assert approx_prompt_tokens(short, tools=False) + estimator._tools_block(short, "chatml") == (
        approx_prompt_tokens(short, tools=True)
    )
    long = ModelRequest((Message.user("a long question about the catalog " * 400),), tools)
    estimator.observe(long, Usage(approx_prompt_tokens(long, tools=False), 5, 0), info)
    assert estimator.tools_dropped is None  # the tools are a small part of this prompt: cannot tell
    without = approx_prompt_tokens(short, tools=False)
    estimator.observe(short, Usage(without, 5, without + 5), info)
    assert estimator.tools_dropped is True


@pytest.mark.parametrize("calls_a_tool", [True, False], ids=["native call", "no call"])
async def test_a_turn_that_calls_an_offered_tool_never_says_the_tools_were_dropped(
    calls_a_tool: bool, model_server: FakeModelServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The counts of "B tools" alone say the tools were dropped; a native call to one of the
    offered tools in the same answer says the model saw them, and wins."""
    run_b = next(run for run in recorded_runs() if run.name == "B tools")
    model_server.routes.update(llama_cpp_python_routes())
    offered = run_b.request.tools[0].name
    calls = [Call(offered, {})] if calls_a_tool else []
    model_server.enqueue(Reply.json(completion(content="", calls=calls, usage=(run_b.prompt_tokens, 60))))
    llm = LLMConfig(endpoint=model_server.base_url, model="m", stream=False)
    async with open_provider(llm, state_dir=tmp_path) as provider:
        with caplog.at_level(logging.WARNING):
            turn = await provider.complete(run_b.request)
        estimator = provider.usage_estimator  # type: ignore[attr-defined]
    assert [call.name for call in turn.tool_calls] == ([offered] if calls_a_tool else [])
    assert estimator.tools_dropped is (not calls_a_tool)
    assert ("seems to drop the tools" in caplog.text) is (not calls_a_tool)
