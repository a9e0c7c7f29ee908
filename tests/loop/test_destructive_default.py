"""With no ``approvals`` section, the model's calls of tools that declare ``destructiveHint``
wait for approval; a client's direct call of an exposed tool does not, unless
``requireDestructive`` is true; false turns both off."""

from __future__ import annotations

import anyio
import pytest

from mcp_agent.config import AgentConfig, ApprovalsConfig, parse_config
from mcp_agent.events import ApprovalRequested, RecordingSink
from mcp_agent.loop.agent import Agent
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

from ._helpers import OBJ, call, echo_tools


def _tools() -> MemoryToolSource:
    tools = echo_tools()
    tools.add("fs__delete", lambda: "deleted", parameters=OBJ, annotations={"destructiveHint": True})
    tools.add(
        "fs__read",
        lambda: "read",
        parameters=OBJ,
        annotations={"destructiveHint": True, "readOnlyHint": True},
    )
    return tools


def test_the_default_gates_the_models_calls_only() -> None:
    approvals = parse_config({}, environ={}).approvals  # no approvals section at all
    assert approvals.require_destructive is None
    assert approvals.gates_destructive() and not approvals.gates_destructive(direct=True)
    assert ApprovalsConfig(require_destructive=True).gates_destructive(direct=True)
    assert not ApprovalsConfig(require_destructive=False).gates_destructive()


async def test_a_models_call_of_a_destructive_tool_waits_by_default() -> None:
    tools = _tools()
    config = AgentConfig(approvals=ApprovalsConfig(timeout_seconds=0.05))  # timeout only: no gate named
    sink = RecordingSink()
    provider = ScriptedProvider(
        [
            tool_turn(call("fs__delete", "c1"), call("fs__read", "c2"), call("echo", "c3", text="hi")),
            text_turn("ok"),
        ]
    )
    agent = Agent(provider, tools, config, events=sink)
    with anyio.fail_after(10):
        result = await agent.query("delete it")
    assert [event.name for event in sink.of(ApprovalRequested)] == ["fs__delete"]
    assert sorted(name for name, _ in tools.calls) == ["echo", "fs__read"]  # read-only wins; no hint: runs
    assert "approval timed out" in result.transcript[3].content


@pytest.mark.parametrize(("setting", "waits"), [(None, False), (True, True), (False, False)])
async def test_a_direct_call_of_an_exposed_tool_waits_only_when_set_true(
    setting: bool | None, waits: bool
) -> None:
    tools = _tools()
    config = AgentConfig(approvals=ApprovalsConfig(require_destructive=setting, timeout_seconds=0.05))
    sink = RecordingSink()
    agent = Agent(ScriptedProvider([]), tools, config, events=sink)
    with anyio.fail_after(10):
        result = await agent.call_tool("fs__delete", {})
    assert bool(sink.of(ApprovalRequested)) is waits
    assert (result.text == "deleted") is not waits


async def test_false_lets_the_models_calls_run() -> None:
    tools = _tools()
    config = AgentConfig(approvals=ApprovalsConfig(require_destructive=False))
    agent = Agent(ScriptedProvider([tool_turn(call("fs__delete", "c1")), text_turn("ok")]), tools, config)
    with anyio.fail_after(10):
        await agent.query("delete it")
    assert [name for name, _ in tools.calls] == ["fs__delete"]
