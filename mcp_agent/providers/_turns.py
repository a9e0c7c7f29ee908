"""What every provider does around a turn: fresh call ids, ``on_delta`` made safe, the finishing step.

``DeltaReporter`` wraps the caller's ``on_delta``: a callback that raises is logged once and
otherwise ignored, and the count of deltas handed out tells a provider whether asking again would
repeat them. ``finish_turn`` is the last step of every provider, whatever its wire format:
``<think>`` blocks in the content become reasoning; when the turn has no structured calls and
``toolCallStyle`` is not ``native``, calls written as text are extracted (offered tools only, see
``textcalls.py``) and the turn then says ``tool_calls``; a call whose arguments exceed
``llm.maxToolArgumentChars`` keeps none of them and carries the error instead
(``bound_arguments``: the loop answers it, the model reads why); usage the server did not report
is estimated at about four characters a token (``estimate_usage``) and marked ``estimated``;
usage the server reported is trusted only as far as it makes sense (``_usage.trusted_usage``).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from ..exceptions import ProviderError
from ..messages import (
    DEFAULT_MAX_ARGUMENT_CHARS,
    KEPT_ARGUMENT_CHARS,
    Delta,
    ToolCall,
    Turn,
    Usage,
    arguments_too_long,
    json_chars,
)
from ._usage import token_count, trusted_usage
from .base import DeltaCallback, ModelRequest
from .textcalls import extract_tool_calls, split_reasoning

__all__ = [
    "DeltaReporter",
    "bound_arguments",
    "estimate_usage",
    "finish_turn",
    "join_reasoning",
    "new_call_id",
    "token_count",
]

logger = logging.getLogger(__name__)


def new_call_id() -> str:
    """A fresh tool-call id: ``call_`` and 24 hex digits."""
    return "call_" + secrets.token_hex(12)


def join_reasoning(*parts: str) -> str:
    """The non-empty pieces of reasoning, separated by a blank line."""
    return "\n\n".join(part for part in parts if part)


class DeltaReporter:
    """``on_delta`` made safe, counting the deltas it hands out.

    Args:
        callback: the caller's ``on_delta`` (None: deltas are only counted). An exception from
            it is logged once and otherwise ignored: a callback must not break the call.

    Attributes:
        count: how many deltas were handed out (asking again is safe only while it is 0).
        text: the text and reasoning handed out (what a stream that broke off had cost).
    """

    def __init__(self, callback: DeltaCallback | None) -> None:
        self._callback = callback
        self._warned = False
        self.count = 0
        self.text = ""

    def __call__(self, delta: Delta) -> None:
        self.count += 1
        self.text += delta.text
        if self._callback is None:
            return
        try:
            self._callback(delta)
        except Exception:
            if not self._warned:
                self._warned = True
                logger.warning("on_delta callback raised; further errors from it are ignored", exc_info=True)

    @contextmanager
    def no_retry_once_reported(self) -> Iterator[None]:
        """A ``ProviderError`` raised in the block is not retried once deltas were handed out."""
        try:
            yield
        except ProviderError as exc:
            if self.count and exc.retryable:
                exc.retryable = False  # pieces were already reported: a retry would repeat them
            raise


def _call_chars(calls: Sequence[ToolCall]) -> int:
    return sum(len(c.name) + len(json.dumps(c.arguments, ensure_ascii=False)) for c in calls)


def estimate_usage(request: ModelRequest, output_chars: int) -> Usage:
    """Usage estimated at about four characters a token, marked ``estimated``.

    The prompt counts every message's content, reasoning and calls (name and arguments) and
    every offered tool's name, description and schema.
    """
    chars = sum(len(m.content) + len(m.reasoning) + _call_chars(m.tool_calls) for m in request.messages)
    for spec in request.tools:
        chars += len(spec.name) + len(spec.description) + len(json.dumps(spec.schema_for("openai")))
    prompt, completion = -(-chars // 4), -(-output_chars // 4)
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion, estimated=True
    )


def bound_arguments(calls: Sequence[ToolCall], max_chars: int) -> tuple[ToolCall, ...]:
    """``calls`` with every call whose arguments exceed ``max_chars`` characters emptied (pure).

    The size is that of the argument text as sent (``raw_arguments``) or else of the arguments'
    compact JSON. Such a call keeps no arguments, says why in ``error`` and keeps the first
    ``KEPT_ARGUMENT_CHARS`` characters as ``raw_arguments``; the loop answers it with an error
    result, so the transcript stays valid. 0 = no limit.
    """
    if not max_chars:
        return tuple(calls)
    bounded: list[ToolCall] = []
    for call in calls:
        raw = call.raw_arguments
        size = len(raw) if raw is not None else json_chars(call.arguments)
        if size > max_chars:
            head = raw if raw is not None else json.dumps(call.arguments, ensure_ascii=False, default=str)
            call = replace(
                call,
                arguments={},
                error=arguments_too_long(size, max_chars),
                raw_arguments=head[:KEPT_ARGUMENT_CHARS],
            )
        bounded.append(call)
    return tuple(bounded)


def finish_turn(
    turn: Turn,
    request: ModelRequest,
    *,
    style: str = "auto",
    max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS,
) -> Turn:
    """The turn as the loop gets it (see the module docstring); ``turn`` itself when nothing changes.

    The content is left exactly as it came unless ``<think>`` blocks or calls are taken out of it
    (Gemini replays its parts only while the text matches them). A usage of all zeros counts as
    not reported.

    Args:
        turn: the turn as parsed from the answer.
        request: the request it answers (its tools; its size for the usage estimate).
        style: ``toolCallStyle``; ``native`` turns the text fallback off.
        max_argument_chars: ``llm.maxToolArgumentChars`` (``bound_arguments``).
    """
    content, reasoning, calls, finish = turn.content, turn.reasoning, turn.tool_calls, turn.finish_reason
    think, rest = split_reasoning(content)
    if think:
        content, reasoning = rest, join_reasoning(reasoning, think)
    if not calls and style != "native" and request.tools and content.strip():
        found = extract_tool_calls(content, request.tools)
        if found.calls:
            calls, content, finish = found.calls, found.content, "tool_calls"
            reasoning = join_reasoning(reasoning, found.reasoning)
    calls = bound_arguments(calls, max_argument_chars)
    usage = turn.usage
    output = len(turn.content) + len(turn.reasoning) + _call_chars(turn.tool_calls)
    if usage == Usage():
        usage = estimate_usage(request, output)
    else:
        usage = trusted_usage(usage, lambda: estimate_usage(request, output))
    if (content, reasoning, calls, finish, usage) == (
        turn.content,
        turn.reasoning,
        turn.tool_calls,
        turn.finish_reason,
        turn.usage,
    ):
        return turn
    return replace(
        turn, content=content, reasoning=reasoning, tool_calls=calls, finish_reason=finish, usage=usage
    )
