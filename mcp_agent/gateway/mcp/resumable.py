"""Streamable HTTP streams that can be resumed, and runs that end when their client is gone.

**Resumable streams.** Every event the gateway sends on a Streamable HTTP stream gets an id and
is kept for a while, so a client whose stream broke reconnects with ``Last-Event-ID`` and gets
what it missed, the run's result included. MCP 1.x clients (langchain-mcp-adapters) rely on
this: without event ids a request whose stream broke waits forever. Each session has its own
store (``SessionEventStore``: the SDK's stream ids are request ids, which repeat across sessions,
so one shared store could replay one client's events to another); all stores share one byte
budget (``EventBudget``), oldest events evicted first, and each keeps at most
``PER_SESSION_EVENTS`` events. ``ResumableSessionManager`` gives every new session its store.

**Gone clients.** A client that aborts a request (closes its response stream) before the answer
came gives up on it, unless it resumes: ``WatchDisconnect`` marks the request's scope when its
connection goes before the response is complete, and ``agent_query`` then cancels the run after
``RESUME_GRACE_SECONDS`` unless the client resumed the stream meanwhile (``Streams.resumed``).
Every stream's first (priming) event tells the client to resume after ``RESUME_RETRY_MS``: an
MCP 1.x client otherwise waits 1 s, the whole grace, and its run was cancelled just before it
came back (langchain-mcp-adapters with an ``sse_read_timeout`` shorter than the run).
"""

from __future__ import annotations

import collections
import itertools
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCMessage
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...loop.cancel import Cancel
from .._internals import SessionStoreManager
from ..service import CLIENT_GONE

logger = logging.getLogger(__name__)

GONE_KEY = "mcp_agent.gone"
"""Scope key: an ``anyio.Event`` set when the client left before its response was complete."""
RESUME_GRACE_SECONDS = 1.0
RESUME_RETRY_MS = 250
"""The SSE ``retry`` of every priming event: how long a client waits before resuming, well
inside ``RESUME_GRACE_SECONDS``."""
PER_SESSION_EVENTS = 256
DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024
EVENT_TTL_SECONDS = 600.0


# ------------------------------------------------------------------------------------ event storage


@dataclass
class _Stored:
    stream_id: StreamId
    message: JSONRPCMessage | None
    size: int
    at: float


class EventBudget:
    """The bytes all sessions' stored events may take together; the oldest go first."""

    def __init__(self, max_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self._order: collections.deque[tuple[SessionEventStore, EventId]] = collections.deque()

    def add(self, store: SessionEventStore, event_id: EventId, size: int) -> None:
        self.used += size
        self._order.append((store, event_id))
        while self.used > self.max_bytes and self._order:
            owner, oldest = self._order.popleft()
            self.used -= owner._forget(oldest)

    def release(self, size: int) -> None:
        self.used -= size


class SessionEventStore(EventStore):
    """One session's events, for replay after ``Last-Event-ID`` (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        budget: EventBudget,
        on_resume: Callable[[str, StreamId], None] = lambda session, stream: None,
        *,
        max_events: int = PER_SESSION_EVENTS,
        ttl: float = EVENT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session_id = session_id
        self.budget = budget
        self.on_resume = on_resume
        self.max_events = max_events
        self.ttl = ttl
        self._clock = clock
        self._prefix = secrets.token_hex(4)
        self._counter = itertools.count(1)
        self._events: collections.OrderedDict[EventId, _Stored] = collections.OrderedDict()

    @property
    def count(self) -> int:
        """How many events are kept (no ``__len__``: the SDK tests a store for truth)."""
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = f"{self._prefix}-{next(self._counter)}"
        size = 0 if message is None else len(message.model_dump_json(by_alias=True, exclude_none=True))
        now = self._clock()
        self._events[event_id] = _Stored(stream_id, message, size, now)
        self.budget.add(self, event_id, size)
        while len(self._events) > self.max_events or (
            self._events and now - next(iter(self._events.values())).at > self.ttl
        ):
            oldest = next(iter(self._events))
            self.budget.release(self._forget(oldest))
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        stored = self._events.get(last_event_id)
        if stored is None:
            return None
        stream_id = stored.stream_id
        after = False
        for event_id, event in list(self._events.items()):
            if event_id == last_event_id:
                after = True
                continue
            if after and event.stream_id == stream_id and event.message is not None:
                await send_callback(EventMessage(event.message, event_id))
        self.on_resume(self.session_id, stream_id)
        return stream_id

    def _forget(self, event_id: EventId) -> int:
        stored = self._events.pop(event_id, None)
        return stored.size if stored is not None else 0


class ResumableSessionManager(SessionStoreManager):
    """The SDK's session manager, each new session with an event store of its own.

    The SDK hands one shared store to every session (``event_store=``); its stream ids are request
    ids, which repeat across sessions, so one shared store could replay one session's events to
    another (``_internals.SessionStoreManager`` sets the session's own).
    """

    def __init__(self, *args: Any, budget: EventBudget, streams: Streams, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.budget = budget
        self.streams = streams

    def event_store_for(self, session_id: str) -> SessionEventStore:
        return SessionEventStore(session_id, self.budget, self.streams.resume)


# ------------------------------------------------------------------------------------ gone clients


class Streams:
    """Which request streams were resumed, so a run whose client left but came back goes on."""

    def __init__(self) -> None:
        self._resumed: dict[tuple[str, str], anyio.Event] = {}

    def resume(self, session_id: str, stream_id: StreamId) -> None:
        self._event(session_id, str(stream_id)).set()

    def resumed(self, session_id: str, request_id: str) -> anyio.Event:
        return self._event(session_id, request_id)

    def forget(self, session_id: str, request_id: str) -> None:
        self._resumed.pop((session_id, request_id), None)

    def _event(self, session_id: str, stream_id: str) -> anyio.Event:
        key = (session_id, stream_id)
        if key not in self._resumed:
            self._resumed[key] = anyio.Event()
        return self._resumed[key]


class WatchDisconnect:
    """Marks a POST's scope (``GONE_KEY``) when its client leaves before the response is complete."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        gone = anyio.Event()
        scope[GONE_KEY] = gone
        complete = False

        async def tracking_send(message: Message) -> None:
            nonlocal complete
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        async def watching_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not complete:
                gone.set()
            return message

        await self.app(scope, watching_receive, tracking_send)


async def cancel_when_gone(
    gone: anyio.Event, cancel: Cancel, resumed: anyio.Event | None, grace: float = RESUME_GRACE_SECONDS
) -> None:
    """Set ``cancel`` once the client is ``gone``, unless it ``resumed`` within ``grace`` seconds."""
    await gone.wait()
    if resumed is not None:
        with anyio.move_on_after(grace):
            await resumed.wait()
            return
    logger.info("the client left before its answer; cancelling the run")
    cancel.set(CLIENT_GONE)
