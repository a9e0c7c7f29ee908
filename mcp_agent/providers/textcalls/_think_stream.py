"""Streaming content routed to text or reasoning at ``<think>`` tags, even when a tag is split.

Chat Completions servers that run reasoning models often send the reasoning inside the content,
as ``<think>…</think>`` (or ``<thinking>``) blocks. While a stream is read, ``ThinkFilter`` says
which pieces are answer and which are reasoning, so ``on_delta`` never shows reasoning as answer;
the end of a piece that could be the start of a tag is held back until the next piece (or
``flush`` at the end of the stream) decides. The finished turn is split again, whole, by
``textcalls.split_reasoning``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

__all__ = ["ThinkFilter"]

Piece = tuple[Literal["text", "reasoning"], str]


class ThinkFilter:
    """Routes streamed content to text or reasoning at ``<think>`` tags, even when split."""

    _TAGS: ClassVar[dict[str, str]] = {"<think>": "</think>", "<thinking>": "</thinking>"}

    def __init__(self) -> None:
        self._close: str | None = None
        self._pending = ""

    def flush(self) -> list[Piece]:
        """What was held back as a possible tag start, at the end of the stream."""
        pending, self._pending = self._pending, ""
        return [("text" if self._close is None else "reasoning", pending)] if pending else []

    def feed(self, text: str) -> list[Piece]:
        """The pieces of ``text`` that are known to be text or reasoning, in order."""
        out: list[Piece] = []
        buf = self._pending + text
        self._pending = ""
        while buf:
            if self._close is None:
                found = min(((buf.find(t), t) for t in self._TAGS if t in buf), default=None)
                if found is not None:
                    at, tag = found
                    if at:
                        out.append(("text", buf[:at]))
                    self._close, buf = self._TAGS[tag], buf[at + len(tag) :]
                    continue
                keep = _partial_suffix(buf, self._TAGS)
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
