"""What calls want of one tool server: whether one waits for it to start, how many run, and when
the last one ended. A lazy server starts on its first call and stops when idle by it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class Demand:
    """The calls of one server.

    Attributes:
        wanted: set when a call waits for the server to start (a new event after ``forget``).
        in_flight: the calls running now.
        last_used: ``time.monotonic()`` when the last call ended (or the server came up).
    """

    def __init__(self) -> None:
        self.wanted = anyio.Event()
        self.in_flight = 0
        self.last_used = time.monotonic()

    def forget(self) -> None:
        """The server stopped when idle: the next call asks for a new start."""
        self.wanted = anyio.Event()

    def touch(self) -> None:
        """Count now as a use (the server just came up)."""
        self.last_used = time.monotonic()

    @contextmanager
    def call(self) -> Iterator[None]:
        """One call, from its start to its end."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()

    async def until_idle(self, seconds: float) -> None:
        """Return once no call has run for ``seconds`` and none runs."""
        while True:
            left = self.last_used + seconds - time.monotonic()
            if left <= 0 and self.in_flight == 0:
                return
            await anyio.sleep(left if left > 0 else seconds)
