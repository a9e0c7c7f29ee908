"""A run's stop switch that says why it was pulled.

A run takes ``cancel``: a plain ``anyio.Event`` or a ``Cancel``. Setting either ends the run
``cancelled`` and cuts off its in-flight calls; with a ``Cancel`` the ending's detail says who
stopped it (the gateway shutting down, a client that went away) instead of the default "cancelled
by the caller", so a caller reading ``Agent terminated (cancelled): …`` knows whether retrying
makes sense. A ``Cancel`` also cancels the scopes a run opened with ``scope()`` itself, the moment
it is set; a plain event needs a task of the run's that waits for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

BY_CALLER = "cancelled by the caller"


class Cancel:
    """A cancel event with a reason; the first reason given wins.

    It has the three methods a run uses of an ``anyio.Event`` (``set``, ``is_set``, ``wait``).
    """

    __slots__ = ("_event", "_scopes", "reason")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._scopes: list[anyio.CancelScope] = []
        self.reason = BY_CALLER

    def set(self, reason: str = BY_CALLER) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()
            for scope in self._scopes:
                scope.cancel()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()

    @contextmanager
    def scope(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope cut off when this is set (at once when it already is)."""
        with anyio.CancelScope() as scope:
            if self._event.is_set():
                scope.cancel()
            self._scopes.append(scope)
            try:
                yield scope
            finally:
                self._scopes.remove(scope)


CancelSwitch = anyio.Event | Cancel
"""What a run accepts as its ``cancel``."""


def why(cancel: CancelSwitch) -> str:
    """Why a set ``cancel`` ended the run (the default for a plain event)."""
    return cancel.reason if isinstance(cancel, Cancel) else BY_CALLER
