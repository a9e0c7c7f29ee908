"""The Provider protocol: one async method from messages and tools to a Turn.

A provider hides one model server's wire format. The loop only ever sees this seam, so any
server (OpenAI-compatible, Anthropic, Gemini, or the scripted fake) plugs in the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..messages import Delta, Message, ToolSpec, Turn
from ..telemetry.base import NO_NOTES, ModelNotes

ToolChoice = Literal["auto", "required", "none"]
"""Whether the model may (``auto``), must (``required``) or may not (``none``) call a tool."""

DeltaCallback = Callable[[Delta], None]
"""Called with each piece of a streaming turn. Must return at once and must not raise."""


@dataclass(frozen=True)
class ModelRequest:
    """One model call.

    Attributes:
        messages: the conversation, system prompt first. Every assistant tool call in it is
            answered by exactly one ``tool`` message, right after it.
        tools: the tools offered this turn (empty: the model must answer in text).
        max_output_tokens: a cap on the answer's length, or None for the server's default.
        temperature: sampling temperature, or None for the server's default.
        tool_choice: whether the model may, must or may not call one of ``tools`` (sent where
            the server takes it; ``llm.toolChoice`` asks ``required`` of the first round only).
        notes: where the provider says what only it knows about the call (the server it called,
            streamed or not, each retry): the loop passes the notes of the call's span, which
            its event and trace read. By default nothing is kept. Not part of the request's
            value (equality, repr).
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_output_tokens: int | None = None
    temperature: float | None = None
    tool_choice: ToolChoice = "auto"
    notes: ModelNotes = field(default=NO_NOTES, compare=False, repr=False)


class Provider(Protocol):
    """A model server.

    ``complete`` returns the model's turn: content, reasoning, tool calls (exposed names,
    parsed arguments, ids) and usage. Tool calls written as text are already extracted (only
    for offered tools). It raises ``ProviderError`` (or a subclass) when the call fails after
    the provider's own retries: ``ContextLengthError`` when the request is too long,
    ``error.terminal`` when retrying cannot help. Cancellation propagates as usual and closes
    any open stream.
    """

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn: ...
