"""The router in the loop, end to end: a real HTTP fake model server identified as llama.cpp with a
4096-token window (so ``toolBudget: "auto"`` routes), an Agent over 57 recorded tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_agent.config import AgentConfig, LLMConfig
from mcp_agent.events import RecordingSink, ToolCallEnded
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.result import TerminationReason
from mcp_agent.providers.factory import open_provider
from mcp_agent.tools.memory import MemoryToolSource
from mcp_agent.tools.router import AUTO_BUDGET, FIND_TOOLS
from tests.fakes.model_server import FakeModelServer, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion
from tests.fakes.server_shapes import llamacpp_routes
from tests.loop._helpers import assert_valid_transcript
from tests.router._fixtures import reference_tools


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        server.routes.update(llamacpp_routes(n_ctx=4096))
        yield server


def tools() -> MemoryToolSource:
    source = MemoryToolSource()
    for spec in reference_tools():
        source.add(
            spec.name,
            lambda name=spec.name, **kw: f"{name} says ok",
            description=spec.description,
            parameters=dict(spec.parameters),
            server=spec.server,
        )
    return source


def offered(request: Any) -> list[str]:
    return [tool["function"]["name"] for tool in request.json.get("tools", [])]


async def ask(
    server: FakeModelServer, tmp_path: Path, question: str, **llm: Any
) -> tuple[Any, MemoryToolSource]:
    config = AgentConfig(llm=LLMConfig(endpoint=server.base_url, model="smollm2", stream=False, **llm))
    source = tools()
    async with open_provider(config.llm, state_dir=tmp_path) as provider:
        agent = Agent(provider, source, config)
        sink = RecordingSink()
        result = await agent.query(question, events=sink)
    assert_valid_transcript(result.transcript)
    return (result, sink), source


async def test_a_small_local_model_is_offered_k_tools_and_find_tools_pulls_one_in(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.enqueue(
        Reply.json(
            completion(calls=[Call(FIND_TOOLS, {"query": "knowledge graph relations"})], model="smollm2")
        ),
        Reply.json(completion(calls=[Call("memory__create_relations", {"relations": []})], model="smollm2")),
        Reply.json(completion(content="Done.", model="smollm2")),
    )
    (result, sink), source = await ask(model_server, tmp_path, "What time is it in Tokyo?")
    assert result.termination_reason is TerminationReason.SUCCESS
    first, second, third = (offered(r) for r in model_server.requests)
    assert len(first) == AUTO_BUDGET and first[-1] == FIND_TOOLS
    assert "time__get_current_time" in first and "memory__create_relations" not in first
    assert "memory__create_relations" in second  # named by find_tools: offered from the next round
    assert "memory__create_relations" in third and len(third) <= AUTO_BUDGET + 7  # used: kept
    assert source.calls == [("memory__create_relations", {"relations": []})]  # find_tools ran in the router
    ends = [e for e in sink.events if isinstance(e, ToolCallEnded)]
    assert [(e.name, e.ok) for e in ends] == [(FIND_TOOLS, True), ("memory__create_relations", True)]


async def test_a_real_tool_not_offered_this_round_still_runs(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.enqueue(
        Reply.json(completion(calls=[Call("git__git_log", {"repo_path": "."})], model="smollm2")),
        Reply.json(completion(calls=[Call("no_such_tool", {})], model="smollm2")),
        Reply.json(completion(content="Done.", model="smollm2")),
    )
    (result, sink), source = await ask(model_server, tmp_path, "What time is it in Tokyo?")
    assert result.termination_reason is TerminationReason.SUCCESS
    first, second, _ = (offered(r) for r in model_server.requests)
    assert "git__git_log" not in first and "git__git_log" in second
    assert source.calls == [("git__git_log", {"repo_path": "."})]
    unknown = [e for e in sink.events if isinstance(e, ToolCallEnded) and e.name == "no_such_tool"]
    assert [e.verdict for e in unknown] == ["unknown_tool"]
    tool_messages = [m for m in result.transcript if m.role == "tool"]
    assert "git__git_log" in tool_messages[1].content  # the unknown-tool answer lists every real tool


async def test_pinned_tools_are_offered_every_round(model_server: FakeModelServer, tmp_path: Path) -> None:
    model_server.enqueue(
        Reply.json(
            completion(calls=[Call("time__get_current_time", {"timezone": "Asia/Tokyo"})], model="smollm2")
        ),
        Reply.json(completion(content="Noon.", model="smollm2")),
    )
    (result, _), _ = await ask(
        model_server, tmp_path, "What time is it in Tokyo?", pinned_tools=["system__*"]
    )
    assert result.answer == "Noon."
    for request in model_server.requests:
        names = offered(request)
        assert {"system__disk_usage", "system__memory_usage", "system__top_processes"} <= set(names)
        assert "time__get_current_time" in names


async def test_a_hosted_sized_budget_of_zero_offers_everything(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.enqueue(Reply.json(completion(content="Hi.", model="smollm2")))
    await ask(model_server, tmp_path, "hello", tool_budget=0)
    names = offered(model_server.requests[0])
    assert len(names) == 57 and FIND_TOOLS not in names


async def test_a_count_budget_applies(model_server: FakeModelServer, tmp_path: Path) -> None:
    model_server.enqueue(Reply.json(completion(content="Hi.", model="smollm2")))
    await ask(model_server, tmp_path, "Is port 8000 in use?", tool_budget=5)
    names = offered(model_server.requests[0])
    assert len(names) == 5 and names[-1] == FIND_TOOLS and "ports__check_port" in names
