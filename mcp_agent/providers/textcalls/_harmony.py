"""gpt-oss harmony messages in a model's text: reasoning, answer and tool calls told apart (pure).

gpt-oss writes its output as harmony messages (OpenAI's "harmony response format"). A server
that does not parse them hands the special tokens back inside the content::

    <|channel|>analysis<|message|>Need the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Tokyo"}<|call|>
    <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>

A message is an optional ``<|start|>ROLE``, an optional ``<|channel|>CHANNEL``, an optional
``<|constrain|>TYPE`` and ``<|message|>``, then its body up to ``<|end|>``, ``<|call|>``,
``<|return|>``, the next header or the end of the text. The first message usually has no
``<|start|>assistant`` (the prompt ends with it). A recipient (``to=functions.NAME``) may sit in the
role or the channel part of the header and makes the message a tool call. ``split_harmony``
sorts the messages: the analysis channel is reasoning, a call message stays as written (for the
call scanner, which reads it with ``read_header``), anything else (final, a commentary preamble)
is content. Nothing here does I/O or raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["HARMONY_ENDS", "Header", "is_call", "read_header", "split_harmony"]

HARMONY_ENDS = ("<|call|>", "<|end|>", "<|return|>")
"""The tokens that end a harmony message (a new header or the end of the text also does)."""

_TOKEN = re.compile(r"<\|(start|channel|constrain|message|end|call|return)\|>")
_HEAD = re.compile(
    r"(?:<\|start\|>([^<]{0,300}))?(?:<\|channel\|>([^<]{0,300}))?(?:<\|constrain\|>([^<]{0,100}))?<\|message\|>"
)
_CHANNELS = frozenset({"analysis", "commentary", "final"})
_RECIPIENT = re.compile(r"(?:^|\s)to=([^\s<]{1,250})")


@dataclass(frozen=True)
class Header:
    """A harmony message's header: its channel's first word (lowercase) and its recipient."""

    channel: str
    recipient: str


def _header(role: str, channel: str) -> Header:
    words = channel.split()
    found = _RECIPIENT.search(role) or _RECIPIENT.search(channel)
    return Header(words[0].lower() if words else "", found.group(1) if found else "")


def is_call(header: Header) -> bool:
    """Whether a message with this header is a tool call.

    A recipient makes it one, except ``assistant`` (a tool's answer written by the model) and,
    on the analysis channel, a built-in tool (``python``, ``browser.search``): those are part of
    the reasoning. A ``functions.*`` recipient is a call on any channel.
    """
    if not header.recipient or header.recipient == "assistant":
        return False
    return header.channel != "analysis" or header.recipient.startswith("functions.")


def read_header(text: str, i: int) -> tuple[Header, int] | None:
    """The header of the harmony message that starts at i, and where its body starts."""
    m = _HEAD.match(text, i)
    if m is None or (m.group(1) is None and m.group(2) is None):
        return None
    return _header(m.group(1) or "", m.group(2) or ""), m.end()


def split_harmony(text: str) -> tuple[list[str], list[str]]:
    """The reasoning and the content pieces of a text of harmony messages, in order.

    Analysis messages are reasoning; a call message stays in the content as written, tokens and
    all, so the call scanner finds it (and a call to a tool nobody offered stays visible); the
    body of any other message, and text outside messages, is content. Header tokens are
    dropped, and so is a header cut off before its ``<|message|>``. A header that names no
    known channel, no ``assistant`` role and no recipient is prose that happens to hold the
    tokens: it stays as written, and so does a token written as code (`` `<|channel|>` ``).
    """
    reasoning: list[str] = []
    content: list[str] = []
    state = "text"  # text | header | body
    pos = 0  # start of the text not yet given out (prose, or tokens that made no message)
    msg_start = body_start = 0
    parts: dict[str, str] = {}
    part, part_start = "", 0

    def close(end: int, after: int) -> int:
        """Give out the message that ends at end (after its end token); where the text goes on."""
        role = parts.get("start", "")
        header = _header(role, parts.get("channel", ""))
        if not _is_message(header, role):
            return pos  # prose holding tokens: it stays in the text run
        content.append(text[pos:msg_start])
        if state == "header":
            pass  # a header with no message: dropped
        elif is_call(header):
            content.append(text[msg_start:after])
        elif header.channel == "analysis":
            reasoning.append(text[body_start:end])
        else:
            content.append(text[body_start:end])
        return after

    for m in _TOKEN.finditer(text):
        if text[m.start() - 1 : m.start()] == "`" or text[m.end() : m.end() + 1] == "`":
            continue  # a token written as code
        token = m.group(1)
        if token in ("start", "channel", "constrain"):
            if state == "body":
                pos, state = close(m.start(), m.start()), "text"
            if state == "text":
                msg_start, parts, state = m.start(), {}, "header"
            else:
                parts[part] = text[part_start : m.start()]
            part, part_start = token, m.end()
        elif token == "message":
            if state == "header":
                parts[part] = text[part_start : m.start()]
                body_start, state = m.end(), "body"
        elif state != "text":  # an end token
            if state == "header":
                parts[part] = text[part_start : m.start()]
            pos, state = close(m.start(), m.end()), "text"
    if state == "header":
        parts[part] = text[part_start:]
    if state != "text":
        pos = close(len(text), len(text))
    content.append(text[pos:])
    return reasoning, content


def _is_message(header: Header, role: str) -> bool:
    """Whether a header is a harmony message's: a known channel, the assistant role or a recipient."""
    return header.channel in _CHANNELS or role.strip().startswith("assistant") or bool(header.recipient)
