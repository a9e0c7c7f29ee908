"""Helpers for the loop tests: a strict transcript validator, tool sets and small providers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.lowlevel

from mcp_agent.events import RecordingSink, RunEnded, ToolCallEnded
from mcp_agent.loop.result import RunResult
from mcp_agent.loop.run import run
from mcp_agent.messages import Delta, Message, ToolCall, Turn, Usage
from mcp_agent.providers.base import DeltaCallback, ModelRequest, Provider
from mcp_agent.tools.base import ToolSource
from mcp_agent.tools.memory import MemoryToolSource

OBJ = {"type": "object", "properties": {}}


def call(name: str, call_id: str, /, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, arguments)


def usage(prompt: int, completion: int) -> Usage:
    return Usage(prompt, completion, prompt + completion)


def assert_valid_transcript(messages: Sequence[Message]) -> None:
    """Strict: what the strictest model server accepts as history.

    - a system message only first;
    - every assistant tool call followed by exactly one tool message per call, right after it,
      in call order, ids and names matching; call ids non-empty and unique in the transcript;
    - no orphan tool messages;
    - arguments are JSON objects that serialise;
    - an assistant message has text or calls.
    """
    ids: set[str] = set()
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message.role in ("system", "user", "assistant", "tool"), message
        if message.role == "system":
            assert i == 0, f"system message at {i}"
        if message.role == "tool":
            raise AssertionError(f"orphan tool message at {i}: {message}")
        if message.role == "assistant":
            assert message.content.strip() or message.tool_calls, f"empty assistant message at {i}"
        if message.role == "assistant" and message.tool_calls:
            for k, tool_call in enumerate(message.tool_calls):
                assert tool_call.id, f"empty call id at {i}"
                assert tool_call.id not in ids, f"reused call id {tool_call.id!r}"
                ids.add(tool_call.id)
                assert isinstance(tool_call.arguments, dict)
                json.loads(json.dumps(tool_call.arguments))
                j = i + 1 + k
                assert j < len(messages), f"call {tool_call.id} has no result"
                result = messages[j]
                assert result.role == "tool", (
                    f"call {tool_call.id}: expected its result at {j}, got {result.role}"
                )
                assert result.tool_call_id == tool_call.id, (j, result.tool_call_id, tool_call.id)
                assert result.name == tool_call.name
            i += 1 + len(message.tool_calls)
            continue
        i += 1


def echo_tools() -> MemoryToolSource:
    """echo(text), add(a, b) with integer schema, fail() always failing."""
    tools = MemoryToolSource()
    tools.add(
        "echo",
        lambda text: text,
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )
    tools.add(
        "add",
        lambda a, b: str(a + b),
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )

    def fail() -> str:
        raise RuntimeError("the backend is down")

    tools.add("fail", fail, parameters=OBJ)
    return tools


class StreamingProvider:
    """Replays turns, streaming each text in the given pieces (and recording requests)."""

    def __init__(self, script: Sequence[tuple[Turn, Sequence[str]]]) -> None:
        self.script = list(script)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        self.requests.append(request)
        turn, pieces = self.script.pop(0)
        for piece in pieces:
            await anyio.lowlevel.checkpoint()
            if on_delta is not None:
                on_delta(Delta("text", piece))
        return turn


class LoopingProvider:
    """Asks for the same tool call forever (fresh ids), counting its calls."""

    def __init__(
        self, name: str, arguments: dict[str, Any], per_turn: int = 1, tokens: int = 0, distinct: bool = False
    ) -> None:
        self.name, self.arguments, self.per_turn, self.tokens = name, arguments, per_turn, tokens
        self.distinct = distinct  # each call gets its own "text" (no two calls alike)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        self.requests.append(request)
        n = len(self.requests)
        calls = tuple(
            ToolCall(
                f"c{n}_{k}",
                self.name,
                {**self.arguments, "text": f"{n}_{k}"} if self.distinct else dict(self.arguments),
            )
            for k in range(self.per_turn)
        )
        return Turn(tool_calls=calls, finish_reason="tool_calls", usage=Usage(self.tokens, 0, self.tokens))


# --------------------------------------------------------------------------------------------
# running and checking


def check_run(result: RunResult, sink: RecordingSink) -> None:
    """What must hold after every run: a valid transcript, balanced events, RunEnded last."""
    assert_valid_transcript(result.transcript)
    types = sink.types()
    assert types[0] == "run_started"
    assert types[-1] == "run_ended" and types.count("run_ended") == 1
    ended = sink.events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.termination_reason == result.termination_reason.value
    assert ended.early_stopped == result.early_stopped
    for start, end in [
        ("round_started", "round_ended"),
        ("model_call_started", "model_call_ended"),
        ("tool_call_started", "tool_call_ended"),
        ("approval_requested", "approval_resolved"),
    ]:
        assert types.count(start) == types.count(end), (start, types)
    assert {e.run_id for e in sink.events} == {result.run_id}
    # each call of this run: one ToolCallEnded, one record, one place in the transcript
    ended_ids = [e.call_id for e in sink.of(ToolCallEnded)]
    assert len(ended_ids) == len(set(ended_ids)) == len(result.tool_calls)
    assert set(ended_ids) <= {c.id for m in result.transcript for c in m.tool_calls}


async def go(
    provider: Provider, tools: ToolSource | None = None, query: str = "question", **kwargs: Any
) -> tuple[RunResult, RecordingSink]:
    """run() with a RecordingSink, then check_run."""
    sink = RecordingSink()
    result = await run(
        query, provider=provider, tools=tools if tools is not None else echo_tools(), events=sink, **kwargs
    )
    check_run(result, sink)
    return result, sink


def tool_texts(result: RunResult) -> list[str]:
    return [m.content for m in result.transcript if m.role == "tool"]
