"""History trimming that never separates a tool call from its result (pure).

Before each model call the loop trims the conversation to ``maxHistoryChars`` (DESIGN guard 7):

1. Drop whole turns, oldest first. A turn is a user message and everything up to the next user
   message, so a call and its result always leave together. The system prompt and the current
   turn (from the last user message on) are always kept.
2. If that is not enough (one long run), elide old tool results, oldest first: their content
   becomes ``[result elided: N chars]``; the message itself stays, so every call keeps its
   answer. The results of the latest round are kept unless ``keep_last_round=False`` (the hard
   trim after a context-length error).

Size is counted in characters: message content plus each tool call's name and canonical
arguments, plus ``IMAGE_CHARS`` for each image a tool message carries (what an image costs a
model is its pixels, not its bytes: about a thousand tokens for a screenshot). An elided result
loses its images too. Nothing here mutates its input; messages are frozen values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..messages import Message, canonical_json

IMAGE_CHARS = 4000
"""What one image counts for in the history size (about 1000 tokens, four characters each)."""


def message_chars(message: Message) -> int:
    """The size of one message as the trimmer counts it."""
    size = len(message.content) + IMAGE_CHARS * len(message.images)
    for call in message.tool_calls:
        size += len(call.name) + len(canonical_json(call.arguments))
    return size


def history_chars(messages: Sequence[Message]) -> int:
    """The size of a conversation as the trimmer counts it."""
    return sum(message_chars(m) for m in messages)


def elided(text: str) -> str:
    """The placeholder that replaces an elided tool result."""
    return f"[result elided: {len(text)} chars]"


def _split_turns(body: Sequence[Message]) -> list[list[Message]]:
    turns: list[list[Message]] = []
    for message in body:
        if message.role == "user" or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def _last_round_start(messages: Sequence[Message]) -> int:
    """Index of the latest assistant message that calls tools (len(messages) if none)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant" and messages[index].tool_calls:
            return index
    return len(messages)


def trim_history(
    messages: Sequence[Message], max_chars: int, *, keep_last_round: bool = True
) -> list[Message]:
    """The conversation trimmed to ``max_chars`` (0 = no limit).

    The result may still be larger than ``max_chars`` when what must be kept (the system prompt,
    the current user message, the latest round's results) is larger: the trimmer never drops
    those.

    Args:
        messages: the conversation, system prompt first if there is one.
        max_chars: the size to trim to; 0 means no trimming.
        keep_last_round: keep the latest round's tool results even when over the limit.
    """
    size = history_chars(messages)
    if not max_chars or size <= max_chars:
        return list(messages)
    head = list(messages[:1]) if messages and messages[0].role == "system" else []
    turns = _split_turns(messages[len(head) :])

    # 1. drop whole turns, oldest first; the current turn stays
    while len(turns) > 1 and size > max_chars:
        size -= history_chars(turns.pop(0))
    kept = [message for turn in turns for message in turn]

    # 2. elide old tool results, oldest first
    stop = _last_round_start(kept) if keep_last_round else len(kept)
    for index in range(stop):
        if size <= max_chars:
            break
        message = kept[index]
        placeholder = elided(message.content)
        if message.role != "tool" or message_chars(message) <= len(placeholder):
            continue
        size -= message_chars(message) - len(placeholder)
        kept[index] = replace(message, content=placeholder, images=())
    return head + kept


def hard_trim(messages: Sequence[Message]) -> list[Message]:
    """The conversation trimmed to half its size, latest results included (after a context error)."""
    return trim_history(messages, max(1, history_chars(messages) // 2), keep_last_round=False)
