"""A caller's tools (``tools/allowed.py``): the filter's rule, the narrowed ToolSource, and a run
of the Agent over it (offered only the permitted tools; a call of another is an unknown tool)."""

from __future__ import annotations

import pytest

from mcp_agent.loop.agent import Agent
from mcp_agent.messages import ToolCall, ToolResult, ToolSpec
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.allowed import EVERY_TOOL, AllowedTools, ToolFilter
from mcp_agent.tools.memory import MemoryToolSource

NAMES = ["time__now", "time__zone", "files__read_file", "files__write_file", "web__fetch"]


def source() -> MemoryToolSource:
    tools = MemoryToolSource()
    for name in NAMES:
        tools.add(name, lambda name=name: f"ran {name}", server=name.split("__")[0])
    return tools


@pytest.mark.parametrize(
    ("allow", "deny", "permitted"),
    [
        (None, (), NAMES),
        (("time__*",), (), ["time__now", "time__zone"]),
        (None, ("*__write_*",), ["time__now", "time__zone", "files__read_file", "web__fetch"]),
        (("time__*", "files__*"), ("*__write_*", "time__zone"), ["time__now", "files__read_file"]),
        (("*",), ("*",), []),  # deny wins over allow
        ((), (), []),  # an empty allow list permits nothing
        (("TIME__*",), (), []),  # case-sensitive, as allowTools/denyTools
    ],
)
def test_deny_wins_and_no_allow_is_every_tool(
    allow: tuple[str, ...] | None, deny: tuple[str, ...], permitted: list[str]
) -> None:
    only = ToolFilter(allow, deny)
    assert [name for name in NAMES if only.permits(name)] == permitted
    assert [spec.name for spec in AllowedTools(source(), only).list_tools()] == permitted


def test_from_config() -> None:
    assert ToolFilter.of(None) is EVERY_TOOL and ToolFilter.of({}) is EVERY_TOOL
    assert ToolFilter.of({"allow": None, "deny": []}).everything
    assert ToolFilter.of({"allow": ["a*"], "deny": ["ab"]}) == ToolFilter(("a*",), ("ab",))
    assert hash(ToolFilter(("a*",))) == hash(ToolFilter(("a*",)))  # a Caller (hashed) holds one


async def test_a_tool_not_permitted_is_unknown_and_never_reaches_the_source() -> None:
    tools = source()
    allowed = AllowedTools(tools, ToolFilter(("time__*",)))
    expected = "unknown tool 'files__write_file'. Available tools: time__now, time__zone"
    called = await allowed.call_tool("files__write_file", {})
    live = await allowed.live_spec("files__write_file")
    assert isinstance(live, ToolResult)
    assert (called.text, called.is_error) == (live.text, live.is_error) == (expected, True)
    assert tools.calls == []
    assert (await allowed.call_tool("time__now", {})).text == "ran time__now"
    spec = await allowed.live_spec("time__now")
    assert isinstance(spec, ToolSpec) and spec.name == "time__now"
    none = await AllowedTools(tools, ToolFilter(())).call_tool("time__now", {})
    assert none.text == "unknown tool 'time__now': no tools are available"


def test_the_narrowed_list_is_made_again_only_when_the_sources_list_changed() -> None:
    tools = source()
    listed = tools.list_tools()

    class Stable:  # a hub hands out the same sequence until its tools change
        def list_tools(self) -> list[ToolSpec]:
            return listed

        async def call_tool(self, name: str, arguments: dict[str, object], *, timeout: float | None = None):
            raise AssertionError

    allowed = AllowedTools(Stable(), ToolFilter(("time__*",)))
    first = allowed.list_tools()
    assert allowed.list_tools() is first
    listed = [*listed[1:]]
    assert [spec.name for spec in allowed.list_tools()] == ["time__zone"]


async def test_a_run_offers_only_the_permitted_tools_and_a_forbidden_call_is_an_unknown_tool() -> None:
    tools = source()
    provider = ScriptedProvider(
        [
            tool_turn(ToolCall("c1", "files__write_file", {})),  # not offered: forbidden
            tool_turn(ToolCall("c2", "no__such_tool", {})),  # not offered: does not exist
            tool_turn(ToolCall("c3", "time__now", {})),
            text_turn("done"),
        ]
    )
    agent = Agent(provider, tools)
    result = await agent.query("what time", only=ToolFilter(("time__*", "files__*"), ("*__write_*",)))
    assert result.answer == "done"
    offered = {spec.name for spec in provider.requests[0].tools}
    assert offered == {"time__now", "time__zone", "files__read_file"}
    forbidden, unknown, ran = (m for m in result.transcript if m.role == "tool")
    assert forbidden.content == unknown.content.replace("no__such_tool", "files__write_file")
    assert forbidden.content.startswith("error: unknown tool 'files__write_file'. Available tools: ")
    assert "write" not in forbidden.content.removeprefix("error: unknown tool 'files__write_file'")
    assert ran.content == "ran time__now"
    assert tools.calls == [("time__now", {})]


async def test_a_direct_call_outside_the_filter_is_an_unknown_tool() -> None:
    tools = source()
    agent = Agent(ScriptedProvider(), tools)
    only = ToolFilter(("time__*",))
    forbidden = await agent.call_tool("web__fetch", {}, only=only)
    unknown = await agent.call_tool("web__nope", {}, only=only)
    assert forbidden.is_error and forbidden.text == unknown.text.replace("web__nope", "web__fetch")
    assert tools.calls == []
    assert (await agent.call_tool("web__fetch", {})).text == "ran web__fetch"  # no filter: every tool


async def test_routed_runs_find_only_the_permitted_tools() -> None:
    """With the tool router on (``llm.toolBudget``), ``find_tools`` searches the caller's tools
    only: a forbidden tool is never named, and calling it is still an unknown tool."""
    from mcp_agent.config import parse_config

    tools = source()
    provider = ScriptedProvider(
        [
            tool_turn(ToolCall("c1", "find_tools", {"query": "write file"})),
            tool_turn(ToolCall("c2", "files__write_file", {})),
            text_turn("done"),
        ]
    )
    agent = Agent(provider, tools, parse_config({"llm": {"toolBudget": 2}}, environ={}))
    result = await agent.query("write a file", only=ToolFilter(None, ("*__write_*",)))
    found, called = (m.content for m in result.transcript if m.role == "tool")
    assert "files__read_file" in found and "write_file" not in found
    assert called.startswith("error: unknown tool 'files__write_file'. Available tools: ")
    assert "files__write_file" not in called.removeprefix("error: unknown tool 'files__write_file'")
    assert {spec.name for request in provider.requests for spec in request.tools} <= {
        "find_tools",
        "time__now",
        "time__zone",
        "files__read_file",
        "web__fetch",
    }
    assert tools.calls == []
