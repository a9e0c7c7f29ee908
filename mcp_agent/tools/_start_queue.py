"""The queue of background starts: servers whose tool lists are cached start after their owner
is ready for them, a few at a time, and a call to one of them jumps the queue.

Each Python MCP server spends about a second of CPU importing the SDK. Eight of them starting at
once on two cores take the CPU from the gateway just when it answers its first ``initialize``
and ``tools/list`` from the cache (and forking each blocks its event loop for a few ms). So the
gateway holds these starts until it serves (``release``; at most ``hold_seconds`` in any case),
then lets ``limit`` of them start at once. A start keeps its place until its server is up or has
failed, or for ``SLOT_SECONDS`` at most, so a server that hangs at start-up delays the others by
that much, not by its whole start-up timeout. First starts the hub waits for (no cached list)
and restarts after a crash do not queue.
"""

from __future__ import annotations

import os
import time

import anyio

SLOT_SECONDS = 2.0
"""The longest a start keeps its place in the queue."""


def default_limit() -> int:
    """Background starts at once: half the CPUs (at least one), leaving the rest to the gateway."""
    return max(1, (os.cpu_count() or 2) // 2)


class Slot:
    """A place in the queue, given back by ``release`` (idempotent)."""

    def __init__(self, limiter: anyio.CapacityLimiter | None = None) -> None:
        self._limiter = limiter

    def release(self) -> None:
        limiter, self._limiter = self._limiter, None
        if limiter is not None:
            limiter.release_on_behalf_of(self)


class StartQueue:
    """Background starts: held until ``release`` (or ``hold_seconds``), then ``limit`` at once.

    Args:
        limit: how many start at once.
        held: whether starts wait for ``release``.
        hold_seconds: the longest they wait for it.
    """

    def __init__(self, *, limit: int | None = None, held: bool = False, hold_seconds: float = 5.0) -> None:
        self._limiter = anyio.CapacityLimiter(limit or default_limit())
        self._released = anyio.Event()
        self._deadline = time.monotonic() + hold_seconds
        if not held:
            self._released.set()

    def release(self) -> None:
        """Let the held starts begin."""
        self._released.set()

    @property
    def held(self) -> bool:
        """Whether starts still wait for ``release`` (or the end of ``hold_seconds``)."""
        return not self._released.is_set() and time.monotonic() < self._deadline

    async def turn(self, wanted: anyio.Event) -> Slot:
        """Wait for a place; a place with nothing to give back at once when ``wanted`` is (or
        becomes) set: a call is waiting for this server."""
        if wanted.is_set():
            return Slot()
        slot = Slot()
        async with anyio.create_task_group() as tg:

            async def jump() -> None:
                await wanted.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(jump)
            with anyio.move_on_after(max(0.0, self._deadline - time.monotonic())):
                await self._released.wait()
            await self._limiter.acquire_on_behalf_of(slot)
            slot._limiter = self._limiter
            tg.cancel_scope.cancel()
        return slot
