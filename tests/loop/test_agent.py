"""The Agent: the Python API of DESIGN.md (query, limits that only tighten, events)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from mcp_agent.config import AgentConfig, ApprovalsConfig, Limits
from mcp_agent.events import ApprovalRequested, RecordingSink, RunEnded, ToolCallEnded
from mcp_agent.exceptions import ProviderError
from mcp_agent.loop.agent import Agent
from mcp_agent.loop.approvals import ApprovalQueue, Verdict
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.messages import Message, ToolCall
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.state.memory import MemorySessionStore

from ._helpers import OBJ, LoopingProvider, call, echo_tools


async def test_query_answers_with_the_configured_system_prompt() -> None:
    provider = ScriptedProvider([text_turn("hello")])
    agent = Agent(provider, echo_tools(), AgentConfig(system_prompt="You are terse."))
    result = await agent.query("hi")
    assert result.termination_reason is R.SUCCESS and result.answer == "hello"
    assert provider.requests[0].messages[0] == Message.system("You are terse.")


async def test_default_config_uses_the_default_prompt_and_limits() -> None:
    provider = ScriptedProvider([text_turn("ok")])
    agent = Agent(provider, echo_tools())
    await agent.query("hi")
    assert provider.requests[0].messages[0].role == "system"
    assert agent.config.limits == Limits()


@pytest.mark.parametrize(
    ("given", "calls"),
    [
        ({"maxRounds": 2}, 2),  # camelCase, as agent_query sends it
        ({"max_rounds": 2}, 2),
        (Limits(max_rounds=3), 3),
        ({"maxRounds": 50}, 4),  # can only tighten: the configured 4 stays
        ({"maxRounds": 0}, 4),  # 0 ("off") is the loosest: it cannot lift the cap
        (None, 4),
    ],
)
async def test_query_limits_can_only_tighten(given: object, calls: int) -> None:
    provider = LoopingProvider("echo", {"text": "x"})
    agent = Agent(provider, echo_tools(), AgentConfig(limits=Limits(max_rounds=4, loop_threshold=0)))
    result = await agent.query("q", limits=given)  # type: ignore[arg-type]
    assert result.termination_reason is R.MAX_ROUNDS and len(provider.requests) == calls


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        ("q", {"limits": {"maxRounds": -1}}, "invalid limits"),
        ("q", {"limits": {"noSuchLimit": 1}}, "invalid limits"),
        ("q", {"limits": ["maxRounds", 1]}, "invalid limits"),
        ("lone \ud800 surrogate", {}, "lone surrogate at character 5"),
        (None, {}, "must be a string, not NoneType"),
        (b"bytes", {}, "must be a string, not bytes"),
        ("q", {"session_id": "../../etc/passwd"}, "session_id"),
    ],
)
async def test_bad_input_ends_the_run_instead_of_raising(
    text: object, options: dict[str, object], expected: str, tmp_path: Path
) -> None:
    from mcp_agent.state import open_state

    provider = ScriptedProvider([])
    sink = RecordingSink()
    state = await open_state(f"sqlite:///{tmp_path}/state.db")
    agent = Agent(provider, echo_tools(), state=state, events=sink)
    result = await agent.query(text, **options)  # type: ignore[arg-type]
    assert result.termination_reason is R.TERMINAL_ERROR and expected in result.detail
    assert result.detail.startswith("invalid input: ") and result.rounds == 0
    assert provider.requests == []  # nothing was sent to the model
    [ended] = sink.of(RunEnded)
    assert ended.termination_reason == "terminal_error"
    json.dumps([event.to_dict() for event in sink.events], ensure_ascii=False).encode("utf-8")  # encodable
    assert await state.sessions.list() == []  # nothing kept
    [record] = await state.runs.list()  # but the refused run is on record
    assert record.termination_reason == "terminal_error" and record.id == result.run_id
    await state.aclose()


@pytest.mark.parametrize(
    "item", [ProviderError("down", status=503), ProviderError("bad key", status=401, terminal=True)]
)
async def test_query_returns_a_result_for_failures(item: ProviderError) -> None:
    agent = Agent(ScriptedProvider([item]), echo_tools())
    result = await agent.query("q")
    assert result.termination_reason in (R.LLM_ERROR, R.TERMINAL_ERROR) and not result.ok
    assert result.error_text().startswith(f"Agent terminated ({result.termination_reason.value}): ")


async def test_events_go_to_the_agent_sink_and_the_query_sink() -> None:
    own, mine = RecordingSink(), RecordingSink()
    agent = Agent(ScriptedProvider([text_turn("a"), text_turn("b")]), echo_tools(), events=own)
    first = await agent.query("q1", events=mine)
    await agent.query("q2")
    assert own.types().count("run_ended") == 2
    assert mine.types().count("run_ended") == 1
    assert mine.of(RunEnded)[0].run_id == first.run_id


async def test_config_approvals_become_the_gate_and_the_queue() -> None:
    tools = echo_tools()
    tools.add(
        "fs__write",
        lambda path: "wrote",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    config = AgentConfig(approvals=ApprovalsConfig(require=["fs__write*"], timeout_seconds=0.05))
    sink = RecordingSink()
    agent = Agent(
        ScriptedProvider([tool_turn(call("fs__write", "c1", path="a")), text_turn("no")]),
        tools,
        config,
        events=sink,
    )
    assert agent.approvals.timeout_seconds == 0.05
    with anyio.fail_after(10):
        result = await agent.query("write it")
    assert len(sink.of(ApprovalRequested)) == 1 and tools.calls == []
    assert "approval timed out" in result.transcript[3].content


async def test_config_require_destructive_gates_destructive_tools() -> None:
    tools = echo_tools()
    tools.add("fs__delete", lambda: "deleted", parameters=OBJ, annotations={"destructiveHint": True})
    config = AgentConfig(approvals=ApprovalsConfig(require_destructive=True, timeout_seconds=0.05))
    sink = RecordingSink()
    provider = ScriptedProvider(
        [tool_turn(call("fs__delete", "c1"), call("echo", "c2", text="hi")), text_turn("no")]
    )
    agent = Agent(provider, tools, config, events=sink)
    with anyio.fail_after(10):
        result = await agent.query("delete it")
    assert [event.name for event in sink.of(ApprovalRequested)] == ["fs__delete"]
    assert tools.calls == [("echo", {"text": "hi"})]  # echo has no annotations: not gated
    assert "approval timed out" in result.transcript[3].content


async def test_injected_parts_are_used() -> None:
    sessions, approvals = MemorySessionStore(), ApprovalQueue()
    tools = echo_tools()

    class DenyAll:
        async def check(self, call: ToolCall, *, tainted: bool) -> Verdict:
            return Verdict.deny("nothing today")

    agent = Agent(
        ScriptedProvider([tool_turn(call("echo", "c", text="x")), text_turn("ok")]),
        tools,
        sessions=sessions,
        approvals=approvals,
        gate=DenyAll(),
    )
    assert agent.sessions is sessions and agent.approvals is approvals and agent.tools is tools
    result = await agent.query("q", session_id="s")
    assert tools.calls == [] and "[DENIED: nothing today]" in result.transcript[3].content
    assert await sessions.get("s") is not None


async def test_concurrent_queries_on_one_agent() -> None:
    agent = Agent(ScriptedProvider([text_turn(str(i)) for i in range(20)], delay=0.01), echo_tools())
    results = []

    async def one(i: int) -> None:
        results.append(await agent.query(f"q{i}"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
    assert len({r.run_id for r in results}) == 20
    assert all(r.termination_reason is R.SUCCESS for r in results)


# --------------------------------------------------------------------------------------------
# call_tool: one guarded call from outside the loop (the gateway's exposeTools)


async def test_call_tool_validates_coerces_and_runs() -> None:
    tools = echo_tools()
    sink = RecordingSink()
    agent = Agent(ScriptedProvider([]), tools)
    result = await agent.call_tool("add", {"a": "2", "b": 3}, events=sink)
    assert (result.text, result.is_error) == ("5", False)
    assert tools.calls == [("add", {"a": 2, "b": 3})]
    assert sink.types() == ["tool_call_started", "tool_call_ended"]
    bad = await agent.call_tool("add", {"a": "x"})
    assert bad.is_error and bad.text.startswith("Invalid arguments for add")
    unknown = await agent.call_tool("nope", {})
    assert unknown.is_error and "Available tools" in unknown.text
    assert len(tools.calls) == 1


async def test_call_tool_asks_the_gate_as_tainted() -> None:
    seen = []

    class Recording:
        async def check(self, call: ToolCall, *, tainted: bool) -> Verdict:
            seen.append(tainted)
            return Verdict.deny("outside callers may not")

    agent = Agent(ScriptedProvider([]), echo_tools(), gate=Recording())
    result = await agent.call_tool("echo", {"text": "x"})
    assert seen == [True] and result.is_error and result.text.startswith("[DENIED: outside callers may not]")


async def test_call_tool_cuts_long_results() -> None:
    agent = Agent(ScriptedProvider([]), echo_tools(), AgentConfig(limits=Limits(max_result_chars=3)))
    sink = RecordingSink()
    result = await agent.call_tool("echo", {"text": "abcdef"}, events=sink)
    assert result.text.startswith("abc\n[... truncated") and sink.of(ToolCallEnded)[0].truncated
