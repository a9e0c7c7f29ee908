"""Who runs now and who waits: query slots with a bounded, fair queue.

``Admissions.acquire(caller)`` returns a ``Slot`` when one is free, else waits in a queue:

- at most ``max_running`` slots are held at once (queries and exposed tool calls alike);
- at most ``max_queued`` requests wait, each at most ``queue_timeout`` seconds; beyond either
  the answer is ``Busy`` (REST: 429 with ``Retry-After``);
- no caller holds more than its share of the slots, nor of the queue places (``share``: all of
  them with one caller, ``gateway.callerShare`` of them with several), so one caller's flood
  leaves room for the others;
- a freed slot goes to the longest-waiting request whose caller is under its share.

A waiter that is cancelled (its client left) leaves the queue; a slot granted at that very
moment is given back. ``close`` (shutdown) turns every waiter away with ``Closed``.
0 means "no limit" for ``max_running`` and ``queue_timeout``; ``max_queued`` 0 means no queue.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

RETRY_AFTER_SECONDS = 2


class Busy(Exception):
    """No slot now, and no place (or no more patience) in the queue; retry later."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.retry_after = RETRY_AFTER_SECONDS


class Closed(Exception):
    """The gateway is shutting down: no more slots."""


@dataclass(eq=False)
class Slot:
    """A slot held by ``caller``; give it back with ``Admissions.release`` (idempotent)."""

    caller: str
    released: bool = False


@dataclass(eq=False)
class _Waiter:
    caller: str
    granted: anyio.Event = field(default_factory=anyio.Event)
    slot: Slot | None = None


class Admissions:
    """Query slots and their queue (see the module docstring)."""

    def __init__(
        self,
        *,
        max_running: int,
        max_queued: int,
        queue_timeout: float,
        share: Callable[[int], int] = lambda limit: limit,
    ) -> None:
        self.max_running = max_running
        self.max_queued = max_queued
        self.queue_timeout = queue_timeout
        self.share = share
        self.running = 0
        self._by_caller: collections.Counter[str] = collections.Counter()
        self._waiting: collections.deque[_Waiter] = collections.deque()
        self._closed = False

    @property
    def queued(self) -> int:
        return len(self._waiting)

    async def acquire(self, caller: str) -> Slot:
        """A slot for ``caller``, now or after waiting in the queue.

        Raises:
            Busy: the queue is full (or the caller's share of it is), or the wait timed out.
            Closed: the gateway is shutting down.
        """
        if self._closed:
            raise Closed()
        if self._can_run(caller):
            return self._grant(caller)
        self._check_queue(caller)
        waiter = _Waiter(caller)
        self._waiting.append(waiter)
        try:
            with anyio.move_on_after(self.queue_timeout or math.inf):
                await waiter.granted.wait()
        except BaseException:
            if waiter.slot is not None:  # granted as we were cancelled: give it back
                self.release(waiter.slot)
            raise
        finally:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
        if waiter.slot is None:
            if self._closed:
                raise Closed()
            raise Busy(
                f"busy: every query slot stayed taken for {self.queue_timeout:g} s "
                "(gateway.maxConcurrentQueries, gateway.queueTimeoutSeconds); retry later"
            )
        return waiter.slot

    def release(self, slot: Slot) -> None:
        """Give ``slot`` back and hand it to the next eligible waiter."""
        if slot.released:
            return
        slot.released = True
        self.running -= 1
        self._by_caller[slot.caller] -= 1
        if not self._by_caller[slot.caller]:
            del self._by_caller[slot.caller]
        self._hand_out()

    def close(self) -> None:
        """Refuse every new request and turn the waiting ones away (shutdown)."""
        self._closed = True
        for waiter in list(self._waiting):
            waiter.granted.set()

    # ---------------------------------------------------------------- internals

    def _can_run(self, caller: str) -> bool:
        if self.max_running and self.running >= self.max_running:
            return False
        share = self.share(self.max_running)
        return not share or self._by_caller[caller] < share

    def _grant(self, caller: str) -> Slot:
        self.running += 1
        self._by_caller[caller] += 1
        return Slot(caller)

    def _check_queue(self, caller: str) -> None:
        if not self.max_queued:
            raise Busy(
                f"busy: {self.running} queries are running (gateway.maxConcurrentQueries) and "
                "queueing is off (gateway.maxQueuedQueries 0); retry later"
            )
        if len(self._waiting) >= self.max_queued:
            raise Busy(
                f"busy: {self.running} queries are running and {len(self._waiting)} waiting "
                "(gateway.maxConcurrentQueries, gateway.maxQueuedQueries); retry later"
            )
        mine = sum(1 for waiter in self._waiting if waiter.caller == caller)
        if mine >= self.share(self.max_queued):
            raise Busy(
                f"busy: caller {caller!r} already has {mine} queries waiting, its share of "
                "gateway.maxQueuedQueries; retry later"
            )

    def _hand_out(self) -> None:
        for waiter in list(self._waiting):
            if waiter.slot is None and self._can_run(waiter.caller):
                waiter.slot = self._grant(waiter.caller)
                self._waiting.remove(waiter)
                waiter.granted.set()
            if self.max_running and self.running >= self.max_running:
                return
