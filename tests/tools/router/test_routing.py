"""The router's choices (pure): the budget rule, what a round offers, find_tools, the index cache."""

from __future__ import annotations

import pytest

from mcp_agent.messages import Message, ToolSpec
from mcp_agent.tools.memory import MemoryToolSource
from mcp_agent.tools.router import (
    AUTO_BUDGET,
    FIND_TOOLS,
    Budget,
    RoutedTools,
    ToolRouter,
    definition_tokens,
)
from tests.tools.router._fixtures import reference_tools


@pytest.mark.parametrize(
    ("setting", "kind", "window", "expected"),
    [
        ("auto", "openai", 128_000, None),  # hosted, large window: every tool
        ("auto", "unknown", None, None),  # nothing known: every tool
        ("auto", "vllm", 131_072, None),
        ("auto", "ollama", None, Budget(count=AUTO_BUDGET)),  # local kinds
        ("auto", "llamacpp", 131_072, Budget(count=AUTO_BUDGET)),
        ("auto", "lmstudio", None, Budget(count=AUTO_BUDGET)),
        ("auto", "unknown", 16_384, Budget(count=AUTO_BUDGET)),  # small windows
        ("auto", "openai", 8_192, Budget(count=AUTO_BUDGET)),
        ("auto", "unknown", 16_385, None),
        (24, "openai", 128_000, Budget(count=24)),  # a count applies everywhere
        (0, "ollama", 4_096, None),  # 0: never
        (0.25, "unknown", 8_000, Budget(share=0.25, window=8_000)),
        (0.25, "openai", None, Budget(count=AUTO_BUDGET)),  # a share of an unknown window
    ],
)
def test_the_budget_rule(
    setting: int | float | str, kind: str, window: int | None, expected: Budget | None
) -> None:
    router = ToolRouter(setting)  # type: ignore[arg-type]
    assert router.budget_for(kind=kind, context_window=window) == expected


def many_tools(n: int = 20) -> MemoryToolSource:
    source = MemoryToolSource()
    topics = [
        "weather forecast",
        "stock price",
        "translate text",
        "send email",
        "calendar event",
        "convert currency",
        "timezone clock",
        "git commit",
        "disk space",
        "web page fetch",
        "read file",
        "write file",
        "list directory",
        "search notes",
        "play music",
        "order pizza",
        "book flight",
        "check port",
        "compress archive",
        "resize image",
    ]
    for i in range(n):
        topic = topics[i % len(topics)]
        name = f"s{i // 10}__{topic.replace(' ', '_')}"
        source.add(name, lambda **kw: "ok", description=f"Tool for {topic}.")
    return source


def names(tools: list[ToolSpec]) -> list[str]:
    return [t.name for t in tools]


def test_under_budget_everything_is_offered_and_no_find_tools() -> None:
    source = many_tools(5)
    routed = ToolRouter(9).for_run(source, Budget(count=9))
    offered = list(routed.list_tools())
    assert names(offered) == names(list(source.list_tools()))
    assert routed.select(offered, [Message.user("anything")]) == offered


def test_over_budget_a_round_offers_the_best_k_and_find_tools() -> None:
    source = many_tools(20)
    routed = ToolRouter(5).for_run(source, Budget(count=5))
    offered = list(routed.list_tools())
    assert names(offered)[-1] == FIND_TOOLS and len(offered) == 21
    chosen = names(routed.select(offered, [Message.user("What's the weather forecast for Paris?")]))
    assert len(chosen) == 5 and chosen[-1] == FIND_TOOLS
    assert "s0__weather_forecast" in chosen


def test_pinned_used_and_found_tools_are_always_offered() -> None:
    source = many_tools(20)
    router = ToolRouter(5, pinned=["*__play_music", "s1__order_*"])
    routed = router.for_run(source, Budget(count=5))
    offered = list(routed.list_tools())
    routed.found.add("s1__resize_image")
    chosen = names(routed.select(offered, [Message.user("weather please")], used={"s0__git_commit"}))
    assert {"s1__play_music", "s1__order_pizza", "s1__resize_image", "s0__git_commit", FIND_TOOLS} <= set(
        chosen
    )
    assert "s0__weather_forecast" in chosen  # at least MIN_RANKED ranked ones stay
    assert chosen == [n for n in names(offered) if n in chosen]  # in the list's order


def test_the_loops_own_tools_are_never_ranked_out() -> None:
    """``read_result`` (paged results) is the loop's, not a server's: the router keeps it."""
    source = many_tools(20)
    routed = ToolRouter(5).for_run(source, Budget(count=5))
    reader = ToolSpec("read_result", "Read a page of a long result.", {"type": "object"})
    offered = [*routed.list_tools(), reader]
    chosen = names(routed.select(offered, [Message.user("What's the weather forecast for Paris?")]))
    assert "read_result" in chosen and "s0__weather_forecast" in chosen


def test_a_withdrawn_tool_is_not_offered_even_when_used() -> None:
    source = many_tools(20)
    routed = ToolRouter(5).for_run(source, Budget(count=5))
    offered = [t for t in routed.list_tools() if t.name != "s0__git_commit"]
    assert "s0__git_commit" not in names(
        routed.select(offered, [Message.user("git commit")], used={"s0__git_commit"})
    )


def test_routing_holds_when_find_tools_was_withdrawn() -> None:
    source = many_tools(20)
    routed = ToolRouter(5).for_run(source, Budget(count=5))
    offered = [t for t in routed.list_tools() if t.name != FIND_TOOLS]  # the ledger took it away
    chosen = names(routed.select(offered, [Message.user("weather forecast")]))
    assert len(chosen) == 4 and FIND_TOOLS not in chosen and "s0__weather_forecast" in chosen


def test_a_share_budget_fills_the_room_in_rank_order() -> None:
    tools = reference_tools()
    source = MemoryToolSource()
    for t in tools:
        source.add(t.name, lambda **kw: "", description=t.description, parameters=dict(t.parameters))
    total = definition_tokens(source.list_tools())
    routed = ToolRouter(0.05).for_run(source, Budget(share=0.05, window=40_000))  # 2000 tokens
    chosen = routed.select(list(routed.list_tools()), [Message.user("What time is it in Tokyo?")])
    assert "time__get_current_time" in names(chosen)
    assert definition_tokens(chosen) <= 2_000 < total


async def test_find_tools_lists_matches_and_offers_them_next_round() -> None:
    source = many_tools(20)
    routed = ToolRouter(5).for_run(source, Budget(count=5))
    result = await routed.call_tool(FIND_TOOLS, {"query": "currency conversion"})
    assert not result.is_error
    assert result.text.splitlines()[1].startswith("- s0__convert_currency: Tool for convert currency.")
    assert "s0__convert_currency" in routed.found
    chosen = names(routed.select(list(routed.list_tools()), [Message.user("unrelated words")]))
    assert "s0__convert_currency" in chosen
    assert source.calls == []  # answered by the router, not the source


async def test_find_tools_without_words_or_matches() -> None:
    routed = ToolRouter(5).for_run(many_tools(20), Budget(count=5))
    empty = await routed.call_tool(FIND_TOOLS, {"query": "the of"})
    assert empty.is_error and "few words" in empty.text
    none = await routed.call_tool(FIND_TOOLS, {"query": "xylophone"})
    assert none.text.startswith("no results") and not routed.found


async def test_other_calls_go_to_the_source() -> None:
    source = many_tools(20)
    routed = ToolRouter(5).for_run(source, Budget(count=5))
    result = await routed.call_tool("s0__git_commit", {})
    assert result.text == "ok" and source.calls == [("s0__git_commit", {})]


async def test_a_server_tool_named_find_tools_keeps_its_name() -> None:
    source = many_tools(20)
    source.add(FIND_TOOLS, lambda **kw: "the server's own", server="other")
    routed = ToolRouter(5).for_run(source, Budget(count=5))
    assert routed.find_name == f"router__{FIND_TOOLS}"
    offered = names(list(routed.list_tools()))
    assert offered.count(FIND_TOOLS) == 1 and offered[-1] == f"router__{FIND_TOOLS}"
    assert (await routed.call_tool(FIND_TOOLS, {"query": "x"})).text == "the server's own"
    assert "s0__send_email" in (await routed.call_tool(f"router__{FIND_TOOLS}", {"query": "email"})).text


def test_the_index_is_built_once_per_tool_list() -> None:
    source = many_tools(20)
    router = ToolRouter(5)
    first = router.index(source.list_tools())
    assert router.index(source.list_tools()) is first
    source.add("s9__new_tool", lambda: "", description="brand new")
    second = router.index(source.list_tools())
    assert second is not first and "s9__new_tool" in second.names


def test_the_indexes_of_several_tool_lists_are_kept() -> None:
    """Callers with tools of their own (``tools/allowed.py``) run over lists of their own: taking
    turns, they do not rebuild each other's index; past ``KEPT_INDEXES`` lists the oldest goes."""
    from mcp_agent.tools.allowed import AllowedTools, ToolFilter
    from mcp_agent.tools.router.routing import KEPT_INDEXES

    source = many_tools(20)
    router = ToolRouter(5)
    names = [spec.name for spec in source.list_tools()][: KEPT_INDEXES + 1]
    lists = [AllowedTools(source, ToolFilter(("x", name))).list_tools() for name in names]
    first = [router.index(tools) for tools in lists[:KEPT_INDEXES]]
    again = [router.index(list(tools)) for tools in reversed(lists[:KEPT_INDEXES])]
    assert all(a is b for a, b in zip(first, reversed(again), strict=True))  # none built again
    router.index(lists[KEPT_INDEXES])  # one more list: the one used longest ago (the last) goes
    assert router.index(lists[0]) is first[0] and router.index(lists[1]) is first[1]
    assert router.index(lists[KEPT_INDEXES - 1]) is not first[KEPT_INDEXES - 1]


def test_routed_tools_is_a_tool_source() -> None:
    from mcp_agent.tools.base import ToolSource

    routed: ToolSource = RoutedTools(many_tools(3), ToolRouter(), Budget(count=9))
    assert len(routed.list_tools()) == 3


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (-1, "toolBudget"),
        (1.5, "toolBudget"),
        (True, "toolBudget"),
        ("all", "toolBudget"),
        (24.0, "toolBudget"),
    ],
)
def test_bad_tool_budgets_are_config_errors(value: object, error: str) -> None:
    from mcp_agent.config import parse_config
    from mcp_agent.exceptions import ConfigError

    with pytest.raises(ConfigError) as info:
        parse_config({"llm": {"toolBudget": value}})
    assert error in info.value.message


@pytest.mark.parametrize("value", [0, 1, 24, 0.25, "auto"])
def test_good_tool_budgets_load(value: object) -> None:
    from mcp_agent.config import parse_config

    config = parse_config({"llm": {"toolBudget": value, "pinnedTools": ["time__*"]}})
    assert config.llm.tool_budget == value and config.llm.pinned_tools == ["time__*"]


def test_pinned_tools_must_be_a_list_of_globs() -> None:
    from mcp_agent.config import parse_config
    from mcp_agent.exceptions import ConfigError

    with pytest.raises(ConfigError, match="pinnedTools"):
        parse_config({"llm": {"pinnedTools": "time__*"}})
