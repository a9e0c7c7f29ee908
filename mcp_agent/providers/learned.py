"""What a provider learned about its model server by talking to it, kept for the process's life.

A provider holds one ``Learned`` and reads it before each request; ``None`` in a field means
"not learned: go by configuration and the server's kind". It is the hook for keeping the lesson
longer than the process: whatever caches what a server is (``server_info.py``) may save these
fields and set them again on a new provider before its first request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Learned"]


@dataclass
class Learned:
    """Lessons about one model server (mutable: the provider sets them as it learns).

    Attributes:
        stream_tools: False once a streamed request with tools came back with nothing (an empty
            200 stream, or only keep-alive pings until the server closed it) and the same request
            without streaming answered: llama-cpp-python with ``tool_choice: auto`` fails like
            that every time. Requests with tools are then sent without streaming. None: not
            learned; True is never set by the provider itself (a saved lesson may say it).
    """

    stream_tools: bool | None = None
    keep: Callable[..., Any] = field(default=lambda **lesson: None, repr=False)
    """Called with each lesson as it is learned (``stream_tools=False``), to keep it beyond the
    process (the factory points it at the server-info cache)."""

    def learn(self, **lesson: Any) -> None:
        """Take ``lesson`` (field=value) now, and hand it to ``keep``."""
        for name, value in lesson.items():
            setattr(self, name, value)
        with contextlib.suppress(Exception):  # keeping it is a bonus: the lesson holds here regardless
            self.keep(**lesson)
