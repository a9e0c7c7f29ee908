"""MCP progress for one ``agent_query`` run: a notification per step, and a heartbeat while it waits.

Clients reset their request timeout on progress (the TypeScript SDK's ``resetTimeoutOnProgress``,
the Python SDK), so a healthy run that waits a long time — on the model, a tool, an approval —
must keep saying so: when nothing was sent for ``interval`` seconds, a heartbeat says what the
run waits for and for how long ("round 2/10: waiting for the model (15 s)"). Steps (round start,
tool call, tool result, approval asked and answered) are sent as they happen.

Only a caller that sent a progress token gets any of this (MCP has no other way to send it).
The run never waits for a slow client: events reach the sender through a bounded buffer that
drops the oldest news (``BufferedSink``), and only the kinds shown here are queued at all.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable

import anyio

from ...events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    ModelCallEnded,
    ModelCallStarted,
    RoundStarted,
    ToolCallEnded,
    ToolCallStarted,
    describe,
)
from ..eventbus import BufferedSink

logger = logging.getLogger(__name__)

SHOWN = (RoundStarted, ToolCallStarted, ToolCallEnded, ApprovalRequested, ApprovalResolved)
"""Events sent as a step of their own."""
TRACKED = (*SHOWN, ModelCallStarted, ModelCallEnded)
"""Events that change what the run waits for."""
BUFFER = 64

Send = Callable[[float, str], Awaitable[None]]
"""Sends one notification: (progress, message)."""


class Waiting:
    """What a run waits for now, kept up to date from its events (pure; the clock is injected)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.round = 0
        self.max_rounds = 0
        self._model_since: float | None = None
        self._tools: dict[str, tuple[str, float]] = {}  # call id -> (name, since)
        self._approvals: dict[str, tuple[str, float]] = {}  # approval id -> (name, since)
        self._since = clock()

    def update(self, event: Event) -> None:
        now = self._clock()
        if isinstance(event, RoundStarted):
            self.round, self.max_rounds = event.round, event.max_rounds
        elif isinstance(event, ModelCallStarted):
            self._model_since = now
        elif isinstance(event, ModelCallEnded):
            self._model_since = None
        elif isinstance(event, ToolCallStarted):
            self._tools[event.call_id] = (event.name, now)
        elif isinstance(event, ToolCallEnded):
            self._tools.pop(event.call_id, None)
        elif isinstance(event, ApprovalRequested):
            self._approvals[event.approval_id] = (event.name, now)
        elif isinstance(event, ApprovalResolved):
            self._approvals.pop(event.approval_id, None)

    def describe(self) -> str:
        """ "round 2/10: waiting for the model (15 s)", or for tools, or for approvals."""
        now = self._clock()
        if self._approvals:
            name, since = min(self._approvals.values(), key=lambda item: item[1])
            what = f"waiting for approval of {name}"
            more = len(self._approvals) - 1
        elif self._tools:
            name, since = min(self._tools.values(), key=lambda item: item[1])
            what = f"waiting for {name}"
            more = len(self._tools) - 1
        elif self._model_since is not None:
            what, since, more = "waiting for the model", self._model_since, 0
        else:
            what, since, more = "working", self._since, 0
        also = f" and {more} more" if more > 0 else ""
        head = f"round {self.round}/{self.max_rounds}: " if self.round and self.max_rounds else ""
        return f"{head}{what}{also} ({now - since:.0f} s)"


def progress_sink() -> BufferedSink:
    """The sink a run's progress sender reads: only the events that matter here are queued."""
    return BufferedSink(BUFFER, accept=TRACKED)


async def send_progress(
    sink: BufferedSink,
    send: Send,
    *,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Send a notification per step and a heartbeat after each ``interval`` s without one
    (0 = no heartbeat), until ``sink`` is closed. A failure to send ends the sending quietly."""
    waiting = Waiting(clock)
    count = 0
    last = clock()
    receive = sink.__aiter__()
    try:
        while True:
            event: Event | None = None
            wait = max(last + interval - clock(), 0) if interval > 0 else math.inf
            with anyio.move_on_after(wait):
                try:
                    event = await receive.__anext__()
                except StopAsyncIteration:
                    return
            if event is None:  # nothing for ``interval`` seconds: say what we wait for
                message: str | None = waiting.describe()
            else:
                waiting.update(event)
                message = describe(event, waiting.max_rounds) if isinstance(event, SHOWN) else None
            if message is not None:
                count += 1
                await send(count, message)
                last = clock()
    except Exception:
        logger.debug("progress notifications stopped", exc_info=True)
    finally:
        sink.aclose_receiver()
