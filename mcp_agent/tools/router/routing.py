"""The routing policy: which tools one round offers, under which budget, and ``find_tools``.

When the tools exceed the budget, a round offers the best-ranked tools for the conversation so
far (``ranker.py``), the pinned ones (``llm.pinnedTools``, globs on exposed names), the
ones used in this run and those ``find_tools`` named, and ``find_tools`` itself. A call to a real
tool not offered this round still runs; it then counts as used.

The default rule (``toolBudget: "auto"``): routing is on when the model server is a local one
(llama.cpp, llama-cpp-python, Ollama, LM Studio, Lemonade) or the model's context window is known
to be at most 16,384 tokens; then at most ``AUTO_BUDGET`` tools are offered (``find_tools``
included, pinned and used tools on top). Hosted models and large windows get every tool.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ...messages import JSONObject, Message, ToolResult, ToolSpec
from ..base import LiveToolSource, ToolSource
from .ranker import ToolIndex, query_terms, text_query

__all__ = [
    "AUTO_BUDGET",
    "FIND_TOOLS",
    "LOCAL_KINDS",
    "SMALL_WINDOW",
    "Budget",
    "RoutedTools",
    "ToolRouter",
    "definition_tokens",
    "find_tools_spec",
]

FIND_TOOLS = "find_tools"
AUTO_BUDGET = 9
"""Tools per round under ``toolBudget: "auto"`` when routing is on: 8 ranked and ``find_tools``."""
SMALL_WINDOW = 16_384
"""A context window of at most this many tokens turns routing on under ``auto``."""
LOCAL_KINDS = frozenset({"llamacpp", "llama-cpp-python", "ollama", "lmstudio", "lemonade"})
"""Model servers that run on the user's machine: routing is on for them under ``auto``."""
MIN_RANKED = 3
"""However small a share budget, a round offers at least this many ranked tools."""
FOUND_LISTED = 6
"""How many tools one ``find_tools`` answer lists."""
KEPT_INDEXES = 8
"""Indexes one router keeps, one per tool list: callers with their own tools
(``gateway.callers.NAME.tools``) each run over a list of their own."""


@dataclass(frozen=True)
class Budget:
    """How many tools one round may offer: a ``count`` (``find_tools`` included), or a ``share``
    of ``window`` tokens that the offered definitions may take."""

    count: int | None = None
    share: float | None = None
    window: int | None = None

    def over(self, tools: Sequence[ToolSpec]) -> bool:
        """Whether offering all of ``tools`` would break this budget."""
        if self.count is not None:
            return len(tools) > self.count
        return definition_tokens(tools) > self._room()

    def _room(self) -> float:
        return (self.share or 0.0) * (self.window or 0)


def definition_tokens(tools: Iterable[ToolSpec]) -> int:
    """About how many prompt tokens ``tools``' definitions take: their JSON as sent, at four
    characters a token."""
    return sum(_definition_chars(spec) for spec in tools) // 4


def _definition_chars(spec: ToolSpec) -> int:
    return len(
        json.dumps(
            {"name": spec.name, "description": spec.description, "parameters": spec.schema_for("openai")},
            ensure_ascii=False,
        )
    )


def find_tools_spec(name: str = FIND_TOOLS) -> ToolSpec:
    """The ``find_tools`` tool as offered to the model."""
    return ToolSpec(
        name=name,
        description=(
            "Search all available tools by keywords when none of the tools offered fits the task. "
            "Lists matching tools with one-line descriptions; they can be called from the next turn on."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, in a few words."}
            },
            "required": ["query"],
        },
        server="router",
        mcp_name=FIND_TOOLS,
        annotations={"readOnlyHint": True},
    )


TokenBudget = int | float | Literal["auto"]


class ToolRouter:
    """The router of one agent: its budget rule, its pinned globs and the cached index.

    Args:
        budget: ``llm.toolBudget``: ``"auto"``, a count of tools per round (0: never route), or a
            share (0..1) of the model's context window for the offered definitions.
        pinned: ``llm.pinnedTools``: globs on exposed names of tools offered every round.
    """

    def __init__(self, budget: TokenBudget = "auto", pinned: Sequence[str] = ()) -> None:
        self.budget = budget
        self.pinned = tuple(pinned)
        self._indexes: list[tuple[tuple[ToolSpec, ...], ToolIndex]] = []
        """The latest first."""

    def budget_for(self, *, kind: str = "unknown", context_window: int | None = None) -> Budget | None:
        """The budget for a model server of ``kind`` with ``context_window``; None: no routing."""
        if self.budget == "auto":
            small = context_window is not None and context_window <= SMALL_WINDOW
            return Budget(count=AUTO_BUDGET) if kind in LOCAL_KINDS or small else None
        if isinstance(self.budget, int):
            return Budget(count=self.budget) if self.budget > 0 else None
        if context_window:  # a share
            return Budget(share=self.budget, window=context_window)
        return Budget(count=AUTO_BUDGET)  # a share of an unknown window: the auto count meanwhile

    def index(self, tools: Sequence[ToolSpec]) -> ToolIndex:
        """The index of ``tools``: a cached one of the same list (one of the last
        ``KEPT_INDEXES`` lists), else built."""
        key = tuple(tools)
        for n, (kept, index) in enumerate(self._indexes):
            if kept == key:  # the same objects compare by identity first
                if n:
                    self._indexes.insert(0, self._indexes.pop(n))
                return index
        index = ToolIndex.build(key)
        self._indexes = [(key, index), *self._indexes[: KEPT_INDEXES - 1]]
        return index

    def is_pinned(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, glob) for glob in self.pinned)

    def for_run(self, source: ToolSource, budget: Budget) -> RoutedTools:
        """``source`` (a ToolSource) routed for one run under ``budget``."""
        return RoutedTools(source, self, budget)


@dataclass
class RoutedTools:
    """A ToolSource for one run: the source's tools plus ``find_tools`` while routing is on.

    ``select`` picks what one round offers; ``call_tool`` answers ``find_tools`` itself and
    passes every other call on. ``found`` holds the tools ``find_tools`` has named.
    """

    source: ToolSource
    router: ToolRouter
    budget: Budget
    found: set[str] = field(default_factory=set)

    @property
    def find_name(self) -> str:
        names = {spec.name for spec in self.source.list_tools()}
        return FIND_TOOLS if FIND_TOOLS not in names else f"router__{FIND_TOOLS}"

    def list_tools(self) -> Sequence[ToolSpec]:
        tools = list(self.source.list_tools())
        if not self.budget.over(tools):
            return tools
        return [*tools, find_tools_spec(self.find_name)]

    def select(
        self, offered: Sequence[ToolSpec], messages: Sequence[Message], used: Iterable[str] = ()
    ) -> list[ToolSpec]:
        """What one round offers, out of ``offered`` (this run's tools less the withdrawn ones), in
        their order: everything while the budget holds, else the best-ranked tools for
        ``messages`` plus the pinned, ``used`` and found ones, ``find_tools``, and the loop's
        own tools (``read_result``: not the servers', so never ranked out)."""
        finder = [spec for spec in offered if spec.name == self.find_name and spec.server == "router"]
        tools = [spec for spec in offered if spec not in finder]
        if not self.budget.over(tools):  # (routing stays on when the ledger withdrew find_tools)
            return list(tools)
        keep = set(used) | self.found
        listed = self.source.list_tools()
        known = {spec.name for spec in listed}  # the loop's own tools (read_result) are always offered
        chosen = {
            spec.name
            for spec in tools
            if spec.name in keep or self.router.is_pinned(spec.name) or spec.name not in known
        }
        index = self.router.index(listed)
        ranked = [name for name in index.rank(query_terms(messages)) if name not in chosen]
        by_name = {spec.name: spec for spec in tools}
        ranked = [name for name in ranked if name in by_name]
        if self.budget.count is not None:
            chosen.update(ranked[: max(self.budget.count - 1 - len(chosen), MIN_RANKED)])
        else:
            room = self.budget._room() - definition_tokens([*finder, *(by_name[n] for n in chosen)])
            for n, name in enumerate(ranked):
                cost = _definition_chars(by_name[name]) // 4
                if n >= MIN_RANKED and cost > room:
                    break
                chosen.add(name)
                room -= cost
        return [spec for spec in offered if spec.name in chosen or spec in finder]

    async def call_tool(
        self, name: str, arguments: JSONObject, *, timeout: float | None = None
    ) -> ToolResult:
        if not self._is_finder(name):
            return await self.source.call_tool(name, arguments, timeout=timeout)
        return self.find(str(arguments.get("query", "")))

    async def live_spec(self, name: str) -> ToolSpec | ToolResult:
        """The source's live definition (``LiveToolSource``); ``find_tools`` is its own, and a
        source that is not live has only the definitions it lists."""
        if not self._is_finder(name) and isinstance(self.source, LiveToolSource):
            return await self.source.live_spec(name)
        spec = next((spec for spec in self.list_tools() if spec.name == name), None)
        return spec if spec is not None else ToolResult(f"unknown tool {name!r}", is_error=True)

    def _is_finder(self, name: str) -> bool:
        """Whether a call of ``name`` is ``find_tools``'s (not a source tool of that name)."""
        return name == self.find_name and not any(spec.name == name for spec in self.source.list_tools())

    def find(self, query: str) -> ToolResult:
        """``find_tools``' answer: the tools matching ``query``, now offered from the next round."""
        weights = text_query(query)
        if not weights:
            return ToolResult(
                "error: give find_tools a few words saying what the tool should do", is_error=True
            )
        tools = {spec.name: spec for spec in self.source.list_tools()}
        names = [n for n in self.router.index(list(tools.values())).matches(weights) if n in tools][
            :FOUND_LISTED
        ]
        if not names:
            return ToolResult(f"no results: no tool matches {query!r}; try other words")
        self.found.update(names)
        lines = [f"- {name}: {_one_line(tools[name].description)}" for name in names]
        head = f"Tools matching {query!r} (call them directly; they are offered from your next turn on):"
        return ToolResult("\n".join([head, *lines]))


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"
