"""A text being scanned for tool-call blocks, and the position helpers its readers share (pure).

``Cursor`` holds one text and answers "where is the next X from here" with ``str.find`` or a
pattern, remembering each search's last answer. ``Hit`` is a format's marker found in the text,
``Block`` the calls of one block and where it ends. The readers are ``_tag_readers.TagReaders``
(tag and special-token formats) and ``_scan.Scanner`` (markers and JSON-bearing formats).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...messages import ToolSpec
from ._calls import RawCall
from ._values import skip_ws

__all__ = ["Block", "Cursor", "Hit", "consume", "past_any", "skip_fence", "strip_newline"]


@dataclass(frozen=True)
class Hit:
    """A format's marker found in the text."""

    kind: str
    start: int
    end: int


@dataclass
class Block:
    """The calls of one block, and where the block ends."""

    end: int
    calls: list[RawCall]


class Cursor:
    """One text, and searches in it that remember their last answer.

    Args:
        text: the text to scan.
        resolve: the offered tool a written name means, or None; the Qwen XML reader uses it to
            know which ``<parameter=`` lines are structural.
        complete: text is the whole message (not a head cut off a longer one), so a block that
            reaches its end ends the message.
    """

    def __init__(
        self, text: str, resolve: Callable[[str], ToolSpec | None], *, complete: bool = True
    ) -> None:
        self.text = text
        self.resolve = resolve
        self.complete = complete
        self._cache: dict[Any, tuple[int, int]] = {}

    # Each search remembers where it looked and what it found, so a text with many markers
    # and no closing tags costs one scan per closing tag, not one per marker.
    def find(self, what: str | re.Pattern[str], start: int) -> int:
        """The first occurrence of ``what`` at or after start, or len(text)."""
        hit = self._cache.get(what)
        if hit is not None and hit[0] <= start and (start <= hit[1]):
            return hit[1]
        if isinstance(what, str):
            i = self.text.find(what, start)
            found = i if i != -1 else len(self.text)
        else:
            m = what.search(self.text, start)
            found = m.start() if m else len(self.text)
        self._cache[what] = (start, found)
        return found

    def first(self, start: int, *whats: str | re.Pattern[str]) -> int:
        """The first occurrence of any of ``whats`` at or after start, or len(text)."""
        return min(self.find(w, start) for w in whats)


def skip_fence(text: str, i: int) -> int:
    """Past an opening code fence (```json\\n) at i, if there is one."""
    if text.startswith("```", i):
        nl = text.find("\n", i, i + 40)
        if nl != -1:
            return skip_ws(text, nl + 1)
    return i


def past_any(text: str, i: int, closers: tuple[str, ...]) -> int:
    """Past whichever of ``closers`` follows i (whitespace skipped), if one does."""
    j = skip_ws(text, i)
    for closer in closers:
        if text.startswith(closer, j):
            return j + len(closer)
    return i


def consume(text: str, i: int, *closers: str) -> int:
    """Past each of ``closers`` that follows i in turn (each optional; whitespace skipped)."""
    for closer in closers:
        j = skip_ws(text, i)
        if text.startswith(closer, j):
            i = j + len(closer)
    return i


def strip_newline(value: str) -> str:
    """Value without one leading and one trailing newline (Qwen XML puts them around values)."""
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value
