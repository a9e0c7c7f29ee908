"""Notices of change from the ToolHub (its tools, its resources and prompts), delivered to the
transports' async listeners by one task each (``lifespan`` runs ``deliver``).

The hub tells of a change synchronously, from wherever it learns it; ``notify`` only marks it.
``deliver`` then calls every listener once per kind marked since it last ran, so a burst of
changes is told once, and a failing listener is logged without stopping the others.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

logger = logging.getLogger(__name__)


class ChangeNotices:
    """Changes marked by kind (``tools``, ``resources``, ``prompts``), told to each listener."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._kinds: set[str] = set()
        self._marked = anyio.Event()
        self._listeners: list[Callable[[str], Awaitable[None]]] = []

    def notify(self, kind: str) -> None:
        """Mark a change of ``kind`` (sync: the hub calls it); ``deliver`` tells the listeners."""
        self._kinds.add(kind)
        self._marked.set()

    def listen(self, listener: Callable[[str], Awaitable[None]]) -> None:
        """Run ``listener(kind)`` (async) after each change."""
        self._listeners.append(listener)

    async def deliver(self) -> None:
        """Until cancelled: tell the listeners of what was marked, each kind once."""
        while True:
            await self._marked.wait()
            self._marked = anyio.Event()
            kinds, self._kinds = sorted(self._kinds), set()
            for kind in kinds:
                for listener in list(self._listeners):
                    try:
                        await listener(kind)
                    except Exception:
                        logger.exception("%s listener failed", self.what)
