"""Run events shared by every replica over one Redis pub/sub channel (``/api/v1/events`` fan-out).

``RedisEvents`` is an ``EventSink``: ``emit`` queues the event (bounded; a full queue drops and
counts, as ``EventBus`` does) and returns at once, so a run never waits on Redis. ``relay(sink)``
runs for the gateway's lifetime in its task group: it publishes the queued events (many in one
round trip when they pile up), and hands every other replica's events to ``sink`` (the
gateway's ``EventBus``), rebuilt by ``events.event_from_dict``. A replica skips its own events
unread (each message starts with its replica's id). When Redis goes away both halves log once,
drop what they cannot send, and reconnect with a growing pause; events are live news, not
records: none is replayed.

**Nobody listening costs nothing.** Most of the time no dashboard is open, and publishing every
event of every run (and reading each back) would cost a replica about as much as the rest of
its Redis traffic. So a replica publishes only while it knows of an *audience*: another replica
with ``/api/v1/events`` listeners. Those say so on a second channel, ``events:listeners``:
``+<replica>`` when their first listener arrives (``listening()``, awaited by the route before
the stream says ``: listening``) and again every ``ANNOUNCE_EVERY`` seconds while they have
listeners; a replica that starts asks ``?<replica>`` and the listening ones answer at once. An
announcement is believed for ``AUDIENCE_SECONDS``; events emitted with no audience are counted
in ``unheard`` and go nowhere.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from contextlib import suppress

import anyio
import anyio.abc
from redis.exceptions import RedisError

from ...events import Event, EventSink, event_from_dict
from .backend import Backend, dumps

logger = logging.getLogger(__name__)

QUEUE_SIZE = 4096
BATCH = 256
MAX_PAUSE = 5.0
ANNOUNCE_EVERY = 5.0
"""Seconds between a listening replica's announcements."""
AUDIENCE_SECONDS = 3 * ANNOUNCE_EVERY
"""How long an announcement is believed: three missed announcements end an audience."""
ANNOUNCE_BOUND = 2.0
"""Seconds ``listening()`` waits for Redis at most (a stream opens even when Redis is away)."""


class RedisEvents:
    """Publishes this replica's events while someone listens; relays the others' (see the module
    docstring)."""

    def __init__(self, backend: Backend, replica: str, *, queue_size: int = QUEUE_SIZE) -> None:
        self._backend = backend
        self.replica = replica
        self.dropped = 0
        self.unheard = 0
        self._audience: dict[str, float] = {}  # replica → when its listening was last heard (monotonic)
        self._wanted: Callable[[], bool] = lambda: False
        self._announced = 0.0
        self._prefix = f"{replica}\n"
        send, receive = anyio.create_memory_object_stream[Event](queue_size)
        self._send = send
        self._receive = receive
        self._relaying = False

    def heard(self) -> bool:
        """Whether another replica listens (an announcement of the last ``AUDIENCE_SECONDS``)."""
        if not self._audience:
            return False
        now = time.monotonic()
        for replica, at in list(self._audience.items()):
            if now - at > AUDIENCE_SECONDS:
                del self._audience[replica]
        return bool(self._audience)

    def emit(self, event: Event) -> None:
        if not self.heard():
            self.unheard += 1
            return
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def listening(self) -> None:
        """Tell the other replicas at once that this one has listeners (a new ``/api/v1/events``
        stream), so that they publish from now on. Never raises; bounded by ``ANNOUNCE_BOUND``."""
        with anyio.move_on_after(ANNOUNCE_BOUND):
            await self._announce()

    def close(self) -> None:
        """Stop taking events (a running ``relay`` publishes what is queued, then its publisher
        ends)."""
        self._send.close()
        if not self._relaying:
            self._receive.close()

    async def relay(
        self,
        sink: EventSink,
        *,
        wanted: Callable[[], bool] | None = None,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Until cancelled: publish what ``emit`` queued; give other replicas' events to ``sink``.

        Args:
            sink: where the other replicas' events go (never blocks, never raises).
            wanted: whether this replica has listeners of its own: while it returns True the
                replica announces itself (and decodes what arrives). None: always.
        """
        self._wanted = wanted if wanted is not None else lambda: True
        self._relaying = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._publish)
                await tg.start(self._subscribe, sink)
                task_status.started()
        finally:
            self._relaying = False
            self._receive.close()

    async def _announce(self) -> None:
        with suppress(RedisError, OSError):
            await self._backend.client.publish(self._backend.keys.listeners, f"+{self.replica}")
            self._announced = time.monotonic()

    async def _publish(self) -> None:
        client, channel = self._backend.client, self._backend.keys.events
        pause = 0.1
        async for first in self._receive:
            batch = [first]
            while len(batch) < BATCH:
                try:
                    batch.append(self._receive.receive_nowait())
                except anyio.WouldBlock:
                    break
            try:
                pipe = client.pipeline(transaction=False)
                for event in batch:
                    pipe.publish(channel, self._prefix + dumps(event.to_dict()))
                await pipe.execute()
                pause = 0.1
            except (RedisError, OSError) as exc:
                self.dropped += len(batch)
                if pause == 0.1:
                    logger.warning("run events cannot be shared with other replicas: %s", exc)
                await anyio.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE)

    async def _subscribe(
        self, sink: EventSink, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        client, keys = self._backend.client, self._backend.keys
        pause, started = 0.1, False
        while True:
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(keys.events, keys.listeners)
                await client.publish(keys.listeners, f"?{self.replica}")  # who listens?
                if not started:
                    task_status.started()
                    started = True
                pause = 0.1
                while True:
                    if self._wanted() and time.monotonic() - self._announced >= ANNOUNCE_EVERY:
                        await self._announce()
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        continue
                    if message.get("channel") == keys.listeners.encode():
                        await self._heard(message.get("data"))
                    elif self._wanted():
                        self._deliver(sink, message.get("data"))
            except (RedisError, OSError) as exc:
                if pause == 0.1:
                    logger.warning("events of other replicas cannot be received: %s", exc)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2), suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed since redis 8
            await anyio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)

    async def _heard(self, data: object) -> None:
        """An announcement (``+replica``) or a question (``?replica``) on the listeners channel."""
        said = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
        kind, replica = said[:1], said[1:]
        if replica == self.replica or not replica:
            return
        if kind == "+":
            self._audience[replica] = time.monotonic()
        elif kind == "?" and self._wanted():
            await self._announce()

    def _deliver(self, sink: EventSink, data: object) -> None:
        raw = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
        if raw.startswith(self._prefix):
            return  # this replica's own event: its bus had it already
        try:
            event = event_from_dict(json.loads(raw.partition("\n")[2]))
        except (TypeError, ValueError, KeyError, AttributeError):
            logger.warning("an unreadable event on the shared channel was skipped: %.200r", data)
            return
        if event is not None:
            sink.emit(event)
