"""Counts in words, for every message that shows a count: ``counted(1, "tool")`` is ``1 tool``,
``counted(2, "tool call")`` is ``2 tool calls`` (pure)."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``count`` and the noun in the form it takes: ``singular`` for 1, else ``plural``
    (``singular`` and an ``s`` unless given).

    >>> counted(1, "round"), counted(0, "tool"), counted(3, "entry", "entries")
    ('1 round', '0 tools', '3 entries')
    """
    return f"{count} {singular if count == 1 else plural or singular + 's'}"
