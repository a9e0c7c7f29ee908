"""Telling listeners what happened without making the teller wait: run events fanned out to live
listeners (the ``/api/v1/events`` streams), and the ToolHub's change notices (``ChangeNotices``,
below) delivered to the transports.

``EventBus.emit`` is an ``EventSink``: it is called from inside runs, returns at once and never
raises. Each listener has its own bounded buffer; a listener that reads too slowly loses events
(counted in ``dropped``) rather than slowing the run or growing without bound. ``close`` ends
every listener, so long-lived streams do not hold a shutdown open. With several replicas
sharing a state backend, ``SharedEvents`` (the backend's channel) carries each replica's events to
the others' buses (``lifespan.share_events``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from types import TracebackType

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..events import Event, EventSink

logger = logging.getLogger(__name__)

DEFAULT_QUEUE_SIZE = 256


class Listener:
    """One subscriber's view of the bus: an async iterator of events, bounded.

    Use as a context manager (``with bus.listen() as events: async for event in events``) so that
    it is removed from the bus when the reader goes away.
    """

    def __init__(self, bus: EventBus, visible: Callable[[Event], bool] | None, queue_size: int) -> None:
        self._bus = bus
        self.visible = visible
        self.dropped = 0
        send, receive = anyio.create_memory_object_stream[Event](queue_size)
        self._send: MemoryObjectSendStream[Event] = send
        self._receive: MemoryObjectReceiveStream[Event] = receive

    def offer(self, event: Event) -> None:
        """Queue ``event`` if this listener may see it; drop it if the buffer is full."""
        if self.visible is not None and not self.visible(event):
            return
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
            self._bus.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def close(self) -> None:
        """End the stream: the reader's loop finishes after the events already queued."""
        self._send.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._bus._remove(self)
        self._send.close()
        self._receive.close()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._receive.__aiter__()


class EventBus:
    """Fans run events out to listeners. An EventSink: ``emit`` never blocks and never raises."""

    def __init__(self, *, queue_size: int = DEFAULT_QUEUE_SIZE) -> None:
        self.queue_size = queue_size
        self.dropped = 0
        self.closed = False
        self._listeners: set[Listener] = set()

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    def emit(self, event: Event) -> None:
        for listener in tuple(self._listeners):
            listener.offer(event)

    def listen(
        self, *, visible: Callable[[Event], bool] | None = None, queue_size: int | None = None
    ) -> Listener:
        """A new listener for every event (or only those ``visible`` accepts).

        A bus that is closed gives a listener that is already ended.
        """
        listener = Listener(self, visible, queue_size or self.queue_size)
        if self.closed:
            listener.close()
        else:
            self._listeners.add(listener)
        return listener

    def close(self) -> None:
        """End every listener (shutdown); later listeners end at once."""
        self.closed = True
        for listener in tuple(self._listeners):
            listener.close()

    def _remove(self, listener: Listener) -> None:
        self._listeners.discard(listener)


class FanOut:
    """An EventSink that passes each event to several sinks, isolating them from each other.

    A sink that raises is logged (once) and skipped; the run never sees the exception.
    """

    def __init__(self, sinks: Iterable[EventSink | None]) -> None:
        self.sinks = [sink for sink in sinks if sink is not None]
        self._failed: set[int] = set()

    def emit(self, event: Event) -> None:
        for sink in self.sinks:
            try:
                sink.emit(event)
            except Exception:
                if id(sink) not in self._failed:
                    self._failed.add(id(sink))
                    logger.exception("event sink %r raised; its events are skipped", sink)


class BufferedSink:
    """An EventSink that queues events for one consumer task, dropping when its buffer is full.

    The run calls ``emit`` (never blocks); a task of the consumer's own reads the events with
    ``async for``. ``close`` ends the iteration after the queued events.
    """

    def __init__(self, size: int = 64, *, accept: tuple[type, ...] | None = None) -> None:
        if size <= 0:
            size = math.inf  # type: ignore[assignment]
        send, receive = anyio.create_memory_object_stream[Event](size)
        self._send = send
        self._receive = receive
        self.accept = accept
        """Only events of these types are queued (None: all)."""
        self.dropped = 0

    def emit(self, event: Event) -> None:
        if self.accept is not None and not isinstance(event, self.accept):
            return
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def close(self) -> None:
        self._send.close()

    def aclose_receiver(self) -> None:
        self._receive.close()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._receive.__aiter__()


class Relay:
    """An EventSink that passes each event on to whatever ``target`` is now, or drops it."""

    def __init__(self) -> None:
        self.target: EventSink | None = None

    def emit(self, event: Event) -> None:
        if self.target is not None:
            self.target.emit(event)


# Notices of change from the ToolHub (its tools, its resources and prompts), delivered to the
# transports' async listeners by one task each (``lifespan`` runs ``deliver``).
#
# The hub tells of a change synchronously, from wherever it learns it; ``notify`` only marks it.
# ``deliver`` then calls every listener once per kind marked since it last ran, so a burst of
# changes is told once, and a failing listener is logged without stopping the others.


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
