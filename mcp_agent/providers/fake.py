"""ScriptedProvider: the Provider seam's own fake. It replays queued turns and records requests.

    provider = ScriptedProvider([
        tool_turn(ToolCall("call_1", "ports__check_port", {"port": 8000})),
        text_turn("Port 8000 is free."),
    ])

Each script item is a Turn, an exception to raise, or a function of the request that returns
either. ``delay`` makes every call take that long (cancellable), for timeout and cancel tests.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable

import anyio

from ..exceptions import ProviderError
from ..messages import Delta, ToolCall, Turn, Usage
from .base import DeltaCallback, ModelRequest

ScriptItem = Turn | BaseException | Callable[[ModelRequest], Turn | Awaitable[Turn]]


def text_turn(content: str, *, usage: Usage | None = None, reasoning: str = "") -> Turn:
    """A turn that answers in text."""
    return Turn(content=content, reasoning=reasoning, finish_reason="stop", usage=usage or Usage())


def tool_turn(*calls: ToolCall, content: str = "", usage: Usage | None = None) -> Turn:
    """A turn that calls tools."""
    return Turn(content=content, tool_calls=tuple(calls), finish_reason="tool_calls", usage=usage or Usage())


class ScriptedProvider:
    """A Provider that returns scripted turns in order and records every request."""

    def __init__(self, script: Iterable[ScriptItem] = (), *, delay: float = 0.0) -> None:
        self.script: list[ScriptItem] = list(script)
        self.requests: list[ModelRequest] = []
        self.delay = delay

    def add(self, *items: ScriptItem) -> None:
        self.script.extend(items)

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        self.requests.append(request)
        if self.delay:
            await anyio.sleep(self.delay)
        if not self.script:
            raise ProviderError("ScriptedProvider: no more turns scripted", terminal=True)
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, Turn):
            result = item(request)
            item = await result if inspect.isawaitable(result) else result
        assert isinstance(item, Turn), f"script item must produce a Turn, got {item!r}"
        if on_delta is not None:
            if item.reasoning:
                on_delta(Delta("reasoning", item.reasoning))
            if item.content:
                on_delta(Delta("text", item.content))
            for index, call in enumerate(item.tool_calls):
                on_delta(Delta("tool_call", index=index, name=call.name))
        return item
