"""Run events shared by every replica over one Redis pub/sub channel (``/api/v1/events`` fan-out).

``RedisEvents`` is an ``EventSink``: ``emit`` queues the event (bounded; a full queue drops and
counts, as ``EventBus`` does) and returns at once, so a run never waits on Redis. ``relay(sink)``
runs for the gateway's lifetime in its task group: it publishes the queued events (many in one
round trip when they pile up), and hands every other replica's events to ``sink`` (the
gateway's ``EventBus``), rebuilt by ``events.event_from_dict``. A replica skips its own events
(its bus had them already). When Redis goes away both halves log once, drop what they cannot
send, and reconnect with a growing pause; events are live news, not records: none is replayed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextlib import suppress

import anyio
import anyio.abc
from redis.exceptions import RedisError

from ..events import Event, EventSink, event_from_dict
from ._redis_base import Backend, dumps

logger = logging.getLogger(__name__)

QUEUE_SIZE = 4096
BATCH = 256
MAX_PAUSE = 5.0


class RedisEvents:
    """Publishes this replica's events, relays the others' (see the module docstring)."""

    def __init__(self, backend: Backend, replica: str, *, queue_size: int = QUEUE_SIZE) -> None:
        self._backend = backend
        self.replica = replica
        self.dropped = 0
        self.relayed = 0
        send, receive = anyio.create_memory_object_stream[Event](queue_size)
        self._send = send
        self._receive = receive
        self._relaying = False

    def emit(self, event: Event) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

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
            wanted: when given and False, arriving events are not even decoded (nobody listens).
        """
        self._relaying = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._publish)
                tg.start_soon(self._subscribe, sink, wanted)
                task_status.started()
        finally:
            self._relaying = False
            self._receive.close()

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
                    pipe.publish(channel, dumps({"replica": self.replica, "event": event.to_dict()}))
                await pipe.execute()
                pause = 0.1
            except (RedisError, OSError) as exc:
                self.dropped += len(batch)
                if pause == 0.1:
                    logger.warning("run events cannot be shared with other replicas: %s", exc)
                await anyio.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE)

    async def _subscribe(self, sink: EventSink, wanted: Callable[[], bool] | None) -> None:
        client, channel = self._backend.client, self._backend.keys.events
        pause = 0.1
        while True:
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                pause = 0.1
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None or (wanted is not None and not wanted()):
                        continue
                    self._deliver(sink, message.get("data"))
            except (RedisError, OSError) as exc:
                if pause == 0.1:
                    logger.warning("events of other replicas cannot be received: %s", exc)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2), suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await anyio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)

    def _deliver(self, sink: EventSink, data: object) -> None:
        try:
            message = json.loads(data)  # type: ignore[arg-type]
            if message.get("replica") == self.replica:
                return
            event = event_from_dict(message["event"])
        except (TypeError, ValueError, KeyError, AttributeError):
            logger.warning("an unreadable event on the shared channel was skipped: %.200r", data)
            return
        if event is not None:
            self.relayed += 1
            sink.emit(event)
