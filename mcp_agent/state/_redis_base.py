"""What the Redis stores share: the client they talk through, the one place Redis's exceptions
become ``StateError``, and the wait for a wake-up on a pub/sub channel.

``Backend.failures(what)`` is the boundary (STYLE rule 14): inside it a ``redis.RedisError`` or
an ``OSError`` is raised again as ``StateError`` naming ``state.url`` (credentials masked) and
what was being done. ``Backend.wait_until(channel, ready)`` subscribes to ``channel`` *before*
it first asks ``ready()``, so that a wake-up published in between is not missed, and polls with
a growing pause besides: a lost message (pub/sub keeps nothing for a subscriber that is not
listening) costs at most one pause, never a hang.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from .._redact import redact_url
from ..exceptions import StateError
from ._redis_scripts import Keys

T = TypeVar("T")

FIRST_PAUSE = 0.02
"""Seconds between the first polls while waiting; the pause doubles up to ``MAX_PAUSE``."""
MAX_PAUSE = 1.0


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def text(value: object) -> str | None:
    """A reply as text (Redis answers bytes); None stays None."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1) if seconds > 0 else 0


class Backend:
    """The client, the key names and the limits the stores of one state share."""

    def __init__(self, client: aioredis.Redis, url: str, keys: Keys) -> None:
        self.client = client
        self.url = url
        self.keys = keys
        self.shown_url = redact_url(url)

    @contextmanager
    def failures(self, what: str) -> Iterator[None]:
        """Raise Redis's own errors (and socket errors) as ``StateError``."""
        try:
            yield
        except (RedisError, OSError) as exc:
            reason = str(exc) or type(exc).__name__
            raise StateError(f"state.url {self.shown_url}: Redis failed while {what}: {reason}") from exc

    async def wait_until(
        self,
        channel: str,
        ready: Callable[[], Awaitable[T | None]],
        *,
        what: str,
        max_pause: float = MAX_PAUSE,
    ) -> T:
        """Await ``ready()`` until it returns something other than None; between tries, wait for a
        message on ``channel`` or a pause (doubling from ``FIRST_PAUSE`` to ``max_pause``).

        No timeout of its own; cancellable. Raises ``StateError`` when Redis fails.
        """
        pause = FIRST_PAUSE
        with self.failures(what):
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                while True:
                    value = await ready()
                    if value is not None:
                        return value
                    deadline = time.monotonic() + pause
                    woken = False
                    while not woken and (left := deadline - time.monotonic()) > 0:
                        woken = await pubsub.get_message(timeout=left) is not None
                    pause = FIRST_PAUSE if woken else min(pause * 2, max_pause)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5), suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed since redis 8
