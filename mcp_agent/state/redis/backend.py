"""What the Redis stores share: the client they talk through, the names of their keys, the one
place Redis's exceptions become ``StateError``, and the wait for a wake-up on a pub/sub channel.

``Backend.failures(what)`` is the boundary (STYLE rule 14): inside it a ``redis.RedisError`` or
an ``OSError`` is raised again as ``StateError`` naming ``state.url`` (credentials masked) and
what was being done. ``Backend.wait_until(channel, ready)`` subscribes to ``channel`` *before*
it first asks ``ready()``, so that a wake-up published in between is not missed, and polls with
a growing pause besides: a lost message (pub/sub keeps nothing for a subscriber that is not
listening) costs at most one pause, never a hang.

Every read-check-write that must not interleave with another replica's is one script, which
Redis runs atomically. Key layout, under a prefix (``mcp-agent:`` by default):

==============================  ================================================================
``session:<id>``                hash: ``owner`` (JSON), ``created``, ``updated``, ``runs``,
                                ``messages``, ``transcript`` (JSON); expires when idle (TTL;
                                while held, one lease later, renewed with the lock). Also its
                                paged results (``pages.py``), which so go with it:
                                ``pages`` (JSON: the results kept, least recently used first,
                                with their sizes; the handles evicted), ``p:<handle>`` (a
                                result: JSON; ``""`` once evicted), ``p:<handle>:<n>`` (page n:
                                ``<start>:`` and its UTF-8 text)
``sessions``                    sorted set: session id → last use (ms), for listing and eviction
``sessions:owner``              hash: session id → its owner (JSON), to find a session's entries
                                below once its hash has expired
``sessions:of:<owner>``         sorted set: the owner's (JSON) session ids → last use (ms)
``sessions:owners``             sorted set: owner (JSON) → how many sessions it holds
``sessions:indexed``            set once the three keys above cover every session (sessions of
                                a build before them are indexed by the first that needs them)
``lock:<id>``                   the session's lease: ``<replica>:<random>``, with a PX expiry
``locks:<replica>``             set: the session locks a replica holds (for ``recover``)
``approval:<id>``               hash: ``record`` (JSON), ``replica``, ``caller`` (when it has
                                one), ``decision`` (once decided)
``approvals:pending``           sorted set: pending approval id → created (its ZCARD is what
                                ``approvals.maxPending`` caps)
``approvals:decided``           sorted set: decided approval id → decided at (for retention)
``approvals:of:<replica>``      set: the pending approvals a replica's runs wait on
``approvals:caller:<name>``     set: a caller's pending approvals (what its share caps); added
                                to by ``ADD_APPROVAL``, removed from by ``DECIDE`` (the one
                                way out of pending: answers, timeouts, withdrawals, recovery)
``run:<id>``                    the run record (JSON)
``pages``                       sorted set: ``<handle> <size> <session id>`` → last use (the
                                logical clock below), for the total cap across sessions
``pages:totals``                hash: ``bytes`` (the sizes in ``pages`` summed), ``clock``
``runs``                        sorted set: run id → started
``runs:ended``                  sorted set: finished run id → ended (for retention by age)
``runs:live``                   set: runs in flight (never dropped by retention)
``runs:of:<replica>``           set: the runs in flight on a replica
``replica:<id>``                the replica's liveness lease (JSON: host, pid, started), PX expiry
``replicas``                    hash: replica → what process it is (JSON), kept beyond its lease
                                until it is recovered (or closed cleanly)
``recovering:<id>``             who recovers a dead replica now (so only one does)
``wake:lock:<id>``              channel: the session's lock was released
``wake:approval:<id>``          channel: the approval was decided
``events``                      channel: run events of every replica (``/api/v1/events`` fan-out)
``events:listeners``            channel: ``+<replica>`` (it has ``/api/v1/events`` listeners) and
                                ``?<replica>`` (it started: who listens?)
==============================  ================================================================

The scripts live with the stores that run them (``sessions.py``, ``pages.py``, ``records.py``).
They name only their main keys in ``KEYS``; the session indexes and eviction of the session
scripts and the retention of ``RETAIN`` (``records.py``) touch further keys under the prefix,
which a single Redis (not a Redis Cluster) allows.

A session's hash expires by itself (its TTL); the indexes learn it lazily: opening a new session
first forgets up to 100 sessions unused for longer than the TTL whose hash is gone, and the
eviction walks forget the gone ones they meet. So making room for a new session looks at the
owner's oldest sessions (and the owners holding the most), never at every session. A session
dropped or deleted by a script takes its paged results out of ``pages`` and ``pages:totals``;
one that expired leaves them there until the total cap reaches them (they are the least
recently used by then) and finds their session gone.
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

from ..._redact import redact_url
from ...exceptions import StateError

T = TypeVar("T")

FIRST_PAUSE = 0.02
"""Seconds between the first polls while waiting; the pause doubles up to ``MAX_PAUSE``."""
MAX_PAUSE = 1.0


DEFAULT_PREFIX = "mcp-agent:"


class Keys:
    """Key and channel names under one prefix."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix
        self.sessions = f"{prefix}sessions"
        self.pending = f"{prefix}approvals:pending"
        self.decided_index = f"{prefix}approvals:decided"
        self.runs = f"{prefix}runs"
        self.ended = f"{prefix}runs:ended"
        self.live = f"{prefix}runs:live"
        self.replicas = f"{prefix}replicas"
        self.pages = f"{prefix}pages"
        self.page_totals = f"{prefix}pages:totals"
        self.events = f"{prefix}events"
        self.listeners = f"{prefix}events:listeners"

    def session(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    def lock(self, session_id: str) -> str:
        return f"{self.prefix}lock:{session_id}"

    def locks_of(self, replica: str) -> str:
        return f"{self.prefix}locks:{replica}"

    def approval(self, approval_id: str) -> str:
        return f"{self.prefix}approval:{approval_id}"

    def approvals_of(self, replica: str) -> str:
        return f"{self.prefix}approvals:of:{replica}"

    def approvals_of_caller(self, caller: str) -> str:
        return f"{self.prefix}approvals:caller:{caller}"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}run:{run_id}"

    def runs_of(self, replica: str) -> str:
        return f"{self.prefix}runs:of:{replica}"

    def replica(self, replica: str) -> str:
        return f"{self.prefix}replica:{replica}"

    def recovering(self, replica: str) -> str:
        return f"{self.prefix}recovering:{replica}"

    def lock_released(self, session_id: str) -> str:
        return f"{self.prefix}wake:lock:{session_id}"

    def decided(self, approval_id: str) -> str:
        return f"{self.prefix}wake:approval:{approval_id}"


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
