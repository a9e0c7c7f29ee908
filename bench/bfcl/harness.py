"""One BFCL entry through the gateway's real path, and what reached the tools, judged by BFCL.

Per entry and provider family: ``open_agent`` (``mcp_agent/assembly.py``) with an ``AgentConfig``
whose only tool server is the entry's URL on the BFCL server (``bfcl/server.py``, Streamable HTTP,
``toolPrefix`` empty) and whose ``llm`` points at the model (the oracle on the fake model server,
or a real OpenAI-compatible endpoint): the schemas compiled for that family, the model's calls
parsed, validated and coerced, the MCP calls made, exactly as for a user. Then the calls the
server recorded, with the arguments as they arrived, go to BFCL's checker (``bfcl/checker.py``).

The run's limits: three model rounds (calls, then the answer after the tool results; a model
that retries a refused call gets one more round), one try per model request, no paging.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2

from mcp_agent.assembly import open_agent
from mcp_agent.config import parse_config
from mcp_agent.events import ModelCallEnded, RecordingSink, ToolCallEnded

from .checker import Call, judge
from .data import Entry
from .oracle import HEADER, SERVER

FAMILIES = ("openai", "anthropic", "gemini")
LIMITS = {
    "maxRounds": 3,
    "maxToolCalls": 20,
    "maxTokens": 0,
    "timeoutSeconds": 120,
    "loopThreshold": 0,
    "maxResultChars": 0,
    "maxHistoryChars": 0,
}


@dataclass(frozen=True)
class Model:
    """Where the model is: the oracle (``oracle=True``: the fake server, told apart per run by
    the ``x-bfcl-run`` header) or a real endpoint; and the ``llm`` keys to add."""

    endpoint: str
    name: str
    oracle: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """One entry, one family, one ``toolCallStyle``: BFCL's verdict and the times."""

    entry: str
    category: str
    family: str
    style: str
    passed: bool
    error_type: str
    error: tuple[str, ...]
    seconds: float
    """Wall time of the entry: the agent opened, the query run, the calls read back."""
    model_seconds: float
    """Time spent in model calls (the gateway's ``model_call_ended`` events)."""
    refused: tuple[str, ...] = ()
    """The gateway's verdicts on calls that did not run (``invalid_arguments``, ``unknown_tool``...)."""


def _problems(text: str) -> str:
    """The problem lines of a refusal the model read (``- /x: wrong type...``), joined."""
    lines = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    return "; ".join(lines) if lines else text.splitlines()[0] if text else ""


def question_text(entry: Entry) -> tuple[str, str | None]:
    """``(query, system prompt)`` of a single-turn entry: the user's messages (other roles named)
    and the system messages, if any."""
    messages = entry.question[0] if entry.question else []
    system = "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    rest = [m for m in messages if m.get("role") != "system"]
    if len(rest) == 1:
        query = str(rest[0].get("content", ""))
    else:
        query = "\n\n".join(f"{m.get('role')}: {m.get('content', '')}" for m in rest)
    return query, system or None


def agent_config(entry: Entry, family: str, style: str, server: str, run: str, model: Model) -> Any:
    query_system = question_text(entry)[1]
    llm: dict[str, Any] = {
        "endpoint": model.endpoint,
        "model": model.name,
        "provider": family,
        "stream": False,
        "maxRetries": 0,
        "toolCallStyle": style,
        **model.extra,
    }
    if model.oracle:
        llm["headers"] = {HEADER: run}
        if family != "openai":
            llm["apiKey"] = "oracle"
    raw: dict[str, Any] = {
        "llm": llm,
        "mcpServers": {SERVER: {"url": f"{server}/r/{run}/{entry.id}/mcp", "toolPrefix": ""}},
        "limits": LIMITS,
    }
    if query_system:
        raw["systemPrompt"] = query_system
    return parse_config(raw)


async def run_entry(
    entry: Entry,
    family: str,
    style: str,
    *,
    server: str,
    model: Model,
    http: httpx2.AsyncClient,
    oracle: Any = None,
) -> Outcome:
    """``entry`` through the gateway for ``family`` with ``toolCallStyle`` ``style``."""
    run = secrets.token_hex(6)
    if oracle is not None:
        oracle.expect(run, entry)
    sink = RecordingSink()
    started = time.perf_counter()
    query, _ = question_text(entry)
    try:
        async with open_agent(
            agent_config(entry, family, style, server, run, model), record_children=False
        ) as agent:
            await agent.query(query, events=sink)
    finally:
        missing = oracle.done(run) if oracle is not None else []
    response = await http.get(f"{server}/r/{run}/{entry.id}/calls")
    response.raise_for_status()
    calls: list[Call] = [(str(name), arguments) for name, arguments in json.loads(response.text)]
    seconds = time.perf_counter() - started
    verdict = judge(entry, calls)
    error = verdict.error
    if missing:
        error = (*error, f"oracle: no tool offered for {', '.join(missing)}")
    refused = tuple(
        f"{event.name}: {event.verdict}: {_problems(event.preview or event.error)}"
        for event in sink.of(ToolCallEnded)
        if event.verdict != "run"
    )
    return Outcome(
        entry=entry.id,
        category=entry.category,
        family=family,
        style=style,
        passed=verdict.passed,
        error_type=verdict.error_type,
        error=error,
        seconds=seconds,
        model_seconds=sum(event.ms for event in sink.of(ModelCallEnded)) / 1000,
        refused=refused,
    )
