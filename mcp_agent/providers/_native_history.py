"""Tool results in the history sent to the native APIs (Anthropic, Gemini): pairing and text forms.

Both APIs want the results of one assistant turn together, right after it, one per call and in
call order. ``take_results`` reads the ``tool`` messages that follow an assistant message and
pairs each call with its result: a call without one gets an error result (``NOT_RECORDED``), and
a result that answers no call of that turn (or repeats one) is returned apart, to be sent as text
(``stray_text``). A request that offers no tools may carry no tool blocks at all, so earlier calls
are then written as text too (``call_text``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message, ToolCall, canonical_json

__all__ = ["NOT_RECORDED", "call_text", "stray_text", "take_results"]

NOT_RECORDED = "not executed: no result was recorded"
"""The error result sent for a call that has no result in the history."""


def take_results(
    messages: Sequence[Message], start: int, calls: Sequence[ToolCall]
) -> tuple[list[tuple[ToolCall, Message]], list[Message], int]:
    """Pair ``calls`` with the ``tool`` messages from ``messages[start]`` on.

    Returns:
        Each call with its result (a synthesised ``NOT_RECORDED`` error when it has none), in
        call order; the results that answer no call (or repeat one), in the order they came; and
        the index of the first message after the results.
    """
    results: dict[str, Message] = {}
    stray: list[Message] = []
    i = start
    while i < len(messages) and messages[i].role == "tool":
        result = messages[i]
        i += 1
        known = any(c.id == result.tool_call_id for c in calls)
        if known and result.tool_call_id not in results:
            results[result.tool_call_id or ""] = result
        else:
            stray.append(result)
    missing = Message(role="tool", content=NOT_RECORDED, is_error=True)
    return [(call, results.get(call.id, missing)) for call in calls], stray, i


def call_text(call: ToolCall) -> str:
    """A tool call written as text, for a history sent without tools."""
    return f"[called {call.name} with {canonical_json(call.arguments)}]"


def stray_text(message: Message) -> str:
    """A tool result that answers no call, written as text."""
    label = message.name or message.tool_call_id or "tool"
    prefix = "error from" if message.is_error else "result of"
    return f"[{prefix} {label}]\n{message.content}"
