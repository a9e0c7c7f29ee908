"""Streaming content routed to text or reasoning at ``<think>`` tags or harmony headers, even
when a tag is split.

Chat Completions servers that run reasoning models often send the reasoning inside the content,
as ``<think>…</think>`` (or ``<thinking>``) blocks, or, for gpt-oss on a server that does not
parse harmony, as harmony messages (``<|channel|>analysis<|message|>…<|end|>``). While a stream
is read, ``ThinkFilter`` says which pieces are answer and which are reasoning, so ``on_delta``
never shows reasoning as answer; the end of a piece that could be the start of a tag is held
back until the next piece (or ``flush`` at the end of the stream) decides. After the first
harmony token the rest of the stream is read as harmony (``_HarmonyStream``): analysis bodies
are reasoning, final and preamble bodies are text, headers are dropped and a tool-call message
is not shown at all (it becomes a call). The finished turn is split again, whole, by
``textcalls.split_reasoning``.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from ._harmony import _header, _is_message, is_call

__all__ = ["ThinkFilter"]

Piece = tuple[Literal["text", "reasoning"], str]


class ThinkFilter:
    """Routes streamed content to text or reasoning at ``<think>`` tags, even when split."""

    _TAGS: ClassVar[dict[str, str]] = {"<think>": "</think>", "<thinking>": "</thinking>"}

    def __init__(self) -> None:
        self._close: str | None = None
        self._pending = ""
        self._harmony: _HarmonyStream | None = None
        self._prev = ""  # the last character given out (a token right after a backtick is code)

    def flush(self) -> list[Piece]:
        """What was held back as a possible tag start, at the end of the stream."""
        if self._harmony is not None:
            return self._harmony.flush()
        if self._close is None and _HARMONY_TOKEN.search(self._pending):  # a token held at the very end
            self._harmony = _HarmonyStream(self._prev)
            pending, self._pending = self._pending, ""
            return self._harmony.feed(pending, final=True)
        pending, self._pending = self._pending, ""
        return [("text" if self._close is None else "reasoning", pending)] if pending else []

    def feed(self, text: str) -> list[Piece]:
        """The pieces of ``text`` that are known to be text or reasoning, in order."""
        if self._harmony is not None:
            return self._harmony.feed(text)
        out = self._feed(text)
        for _, piece in reversed(out):
            if piece:
                self._prev = piece[-1]
                break
        return out

    def _feed(self, text: str) -> list[Piece]:
        out: list[Piece] = []
        buf = self._pending + text
        self._pending = ""
        while buf:
            if self._close is None:
                token, hold = _next_token(buf, self._prev)
                found = min(((buf.find(t), t) for t in self._TAGS if t in buf), default=None)
                if token is None and hold < len(buf) and (found is None or hold < found[0]):
                    if hold:
                        out.append(("text", buf[:hold]))
                    self._pending = buf[hold:]
                    break
                if token is not None and (found is None or token.start() < found[0]):
                    if token.start():
                        out.append(("text", buf[: token.start()]))
                    self._harmony = _HarmonyStream(buf[token.start() - 1] if token.start() else self._prev)
                    return out + self._harmony.feed(buf[token.start() :])
                if found is not None:
                    at, tag = found
                    if at:
                        out.append(("text", buf[:at]))
                    self._close, buf = self._TAGS[tag], buf[at + len(tag) :]
                    continue
                keep = _partial_suffix(buf, (*self._TAGS, *_HARMONY_TOKENS))
            else:
                close = self._close
                at = buf.find(close)
                if at >= 0:
                    if at:
                        out.append(("reasoning", buf[:at]))
                    self._close, buf = None, buf[at + len(close) :]
                    continue
                keep = _partial_suffix(buf, (close,))
            kind: Literal["text", "reasoning"] = "text" if self._close is None else "reasoning"
            if len(buf) > keep:
                out.append((kind, buf[: len(buf) - keep]))
            self._pending = buf[len(buf) - keep :]
            break
        return out


def _partial_suffix(text: str, tags: Any) -> int:
    """Length of the longest end of ``text`` that could start one of ``tags``."""
    if "<" not in text[-12:]:
        return 0
    best = 0
    for tag in tags:
        for n in range(min(len(tag) - 1, len(text)), best, -1):
            if text.endswith(tag[:n]):
                best = n
                break
    return best


_HARMONY_TOKENS = (
    "<|start|>",
    "<|channel|>",
    "<|constrain|>",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
)
_HARMONY_TOKEN = re.compile(r"<\|(start|channel|constrain|message|end|call|return)\|>")
_MAX_HEADER = 800
"""A header longer than this is not one (``_harmony``'s header parts are bounded alike): it is text."""


class _HarmonyStream:
    """Streamed harmony messages routed by channel: analysis is reasoning, final and preambles
    are text, a tool call is not shown, header tokens are dropped. A header that names no known
    channel, no ``assistant`` role and no recipient is prose holding the tokens: shown as text."""

    def __init__(self, prev: str = "") -> None:
        self._state: Literal["out", "head", "body"] = "out"
        self._kind: Literal["text", "reasoning", "hidden"] = "text"
        self._head = ""  # the header so far, tokens and all
        self._pending = ""
        self._prev = prev  # the last character of the text before the buffer

    def flush(self) -> list[Piece]:
        out = self.feed("", final=True)
        self._pending = ""
        return out  # a header cut off before its message is dropped, as the whole-turn split does

    def feed(self, text: str, *, final: bool = False) -> list[Piece]:
        out: list[Piece] = []
        buf = self._pending + text
        self._pending = ""
        while buf:
            if self._state == "head":
                at = buf.find("<|message|>")
                if at < 0:
                    keep = _partial_suffix(buf, ("<|message|>",))
                    self._head += buf[: len(buf) - keep]
                    self._pending = buf[len(buf) - keep :]
                    if len(self._head) > _MAX_HEADER:  # not a header after all
                        out += [("text", self._head)]
                        self._state, self._kind, self._head = "out", "text", ""
                    return out
                self._head += buf[:at]
                buf = buf[at + len("<|message|>") :]
                out += self._open()
                continue
            token, hold = _next_token(buf, self._prev, final=final)
            if token is None:
                keep = (
                    len(buf) - hold
                    if hold < len(buf)
                    else 0
                    if final
                    else _partial_suffix(buf, _HARMONY_TOKENS)
                )
                out += self._piece(buf[: len(buf) - keep])
                self._pending = buf[len(buf) - keep :]
                return out
            out += self._piece(buf[: token.start()])
            self._prev = ">"
            name, buf = token.group(1), buf[token.end() :]
            if name in ("end", "call", "return"):
                self._state, self._kind = "out", "text"
            elif name == "message":  # a message with no header: its body is text
                self._state, self._kind = "body", "text"
            else:
                self._state, self._head = "head", token.group(0)
        return out

    def _open(self) -> list[Piece]:
        """The header is complete: what its message's body is."""
        parts = dict.fromkeys(("start", "channel"), "")
        for m in re.finditer(r"<\|(start|channel|constrain)\|>([^<]*)", self._head):
            parts[m.group(1)] = m.group(2)
        header = _header(parts["start"], parts["channel"])
        head, self._head, self._state = self._head, "", "body"
        if not _is_message(header, parts["start"]):
            self._kind = "text"
            return [("text", head + "<|message|>")]
        if is_call(header):
            self._kind = "hidden"
        else:
            self._kind = "reasoning" if header.channel == "analysis" else "text"
        return []

    def _piece(self, text: str) -> list[Piece]:
        if text:
            self._prev = text[-1]
        if not text or self._kind == "hidden":
            return []
        return [(self._kind, text)]


def _next_token(buf: str, prev: str, *, final: bool = False) -> tuple[re.Match[str] | None, int]:
    """The first harmony token in ``buf`` that is not written as code (a backtick right before
    or after it), and where to hold the buffer back from: a token at its very end waits for the
    next character, to see whether a backtick follows (unless the stream is ``final``).
    ``prev``: the character before ``buf``."""
    for m in _HARMONY_TOKEN.finditer(buf):
        before = buf[m.start() - 1] if m.start() else prev
        if m.end() == len(buf) and not final:
            return (None, m.start()) if before != "`" else (None, len(buf))
        if before == "`" or buf[m.end() : m.end() + 1] == "`":
            continue
        return m, m.start()
    return None, len(buf)
