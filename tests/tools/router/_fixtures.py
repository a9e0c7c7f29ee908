"""The router's evaluation data: the reference servers' recorded tool lists and the labelled set."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mcp_agent.messages import Message, ToolSpec
from mcp_agent.tools.presentation import sanitize
from mcp_agent.tools.schema import compile_tool_schema

HERE = Path(__file__).parent
SERVERS = ("time", "fetch", "git", "everything", "filesystem", "memory", "ports", "system", "web")
"""The six reference servers, then the three bundled ones (``servers/``)."""


def reference_tools() -> list[ToolSpec]:
    """Every tool of the recorded servers, named ``server__tool`` as the hub names them."""
    tools = []
    for server in SERVERS:
        data = json.loads((HERE / "tool_lists" / f"{server}.json").read_text(encoding="utf-8"))
        for tool in data["tools"]:
            schema = compile_tool_schema(tool.get("inputSchema"))
            tools.append(
                ToolSpec(
                    name=f"{server}__{sanitize(tool['name'])}",
                    description=tool.get("description") or "",
                    parameters=schema.parameters,
                    variants=dict(schema.variants),
                    server=server,
                    mcp_name=tool["name"],
                    title=tool.get("title"),
                )
            )
    return tools


@dataclass(frozen=True)
class Case:
    """One labelled question: the conversation before it, and the tools that answer it."""

    question: str
    tools: tuple[str, ...]
    history: tuple[str, ...] = ()

    def messages(self) -> list[Message]:
        before = []
        for text in self.history:  # an earlier exchange: the question and a short answer
            before += [Message.user(text), Message.assistant("Done.")]
        return [Message.system("You are a helpful assistant."), *before, Message.user(self.question)]


def labelled(name: str = "labelled.json") -> list[Case]:
    """The labelled set the ranker was tuned on (``labelled.json``), or ``heldout.json``: 30
    questions written after the tuning, never tuned on."""
    data = json.loads((HERE / name).read_text(encoding="utf-8"))
    return [Case(item["question"], tuple(item["tools"]), tuple(item.get("history", ()))) for item in data]


def recall_at(k: int, cases: list[Case], rankings: list[list[str]]) -> float:
    """The share of cases with a right tool among the first ``k`` ranked."""
    hits = sum(1 for case, ranked in zip(cases, rankings, strict=True) if set(case.tools) & set(ranked[:k]))
    return hits / len(cases)
