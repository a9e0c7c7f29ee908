"""Conversations in Redis, and the per-session lock that holds across replicas.

A session is a hash (``_redis_scripts`` draws the keys) that expires after
``session_ttl_seconds`` without use. ``hold`` takes the session's lock in two steps: first a lock
of this process (so that its own runs on the session queue here, not against Redis), then the
lease in Redis: ``SET lock:<id> <replica>:<random> NX PX <lease>``, in the same script that reads
(or creates) the session, one round trip. While the block runs, a task
renews the lease (and the session's TTL, and this replica's liveness) every third of
``lease_seconds``; leaving the block deletes the lease only if it still holds our token (a
compare-and-delete script) and publishes a wake-up, so that a run waiting on another replica
starts at once (a ``save(release=True)`` does that in its own script, a round trip less). A
waiter that finds the holder's replica dead (its liveness lease lapsed, or, on this host, its
process gone) breaks the lock rather than wait out the lease. The lock's
token fences the save: the save script writes only while the lock is still that token's, so a
replica that stalled past its lease (and was taken for dead) gets ``LeaseLost`` instead of
writing over the run that took the lock.

Releasing never raises: a Redis that went away while the run went on must not cost the run its
result; the lease then lapses by itself.

Transcripts are parsed once per version: the store keeps the ``PARSED_SESSIONS`` it read or saved
last, by (``created``, ``runs``), and a read sends that version along, so that Redis leaves the
transcript out when it has not changed (a conversation's next turn on the same replica moves
and parses no JSON at all).
"""

from __future__ import annotations

import collections
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Any

import anyio

from ..exceptions import LeaseLost, SessionTooLarge, StateError
from ..messages import Message
from ._redis_base import Backend, dumps, ms, text
from ._redis_session_scripts import (
    BREAK,
    DELETE_SESSION,
    FORGET_SESSIONS,
    HOLD_SESSION,
    OPEN_SESSION,
    READ_SESSION,
    RELEASE,
    RENEW,
    SAVE_SESSION,
)
from .memory import KeyedLocks
from .records import Session, SessionInfo, StateLimits, new_session_id

logger = logging.getLogger(__name__)

_FIELDS = ("owner", "created", "updated", "runs", "messages")
PARSED_SESSIONS = 128
"""Transcripts kept parsed, the most recently used, with the version they are."""

Version = tuple[str, int]
"""A transcript's version: its session's ``created`` (as Redis has it) and ``runs``."""


def _sole(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class RedisSessionStore:
    """The ``SessionStore`` of the Redis backend (see the module docstring).

    ``max_per_owner`` starts as ``limits.max_sessions_per_owner``; the gateway may set it to
    each caller's share.
    """

    def __init__(
        self,
        backend: Backend,
        limits: StateLimits,
        replica: str,
        *,
        holder_alive: Callable[[str], Awaitable[bool]],
        keepalive: Callable[[], Awaitable[None]],
    ) -> None:
        self._backend = backend
        self._keys = backend.keys
        self.limits = limits
        self.replica = replica
        self.max_per_owner = limits.max_sessions_per_owner
        self._holder_alive = holder_alive
        self._keepalive = keepalive
        self._local = KeyedLocks()
        self._let_go: set[str] = set()
        """Tokens whose lock a ``save(release=True)`` let go: leaving their block has nothing to do."""
        self._parsed: collections.OrderedDict[str, tuple[Version, tuple[Message, ...]]] = (
            collections.OrderedDict()
        )
        client = backend.client
        self._open_script = client.register_script(OPEN_SESSION)
        self._read_script = client.register_script(READ_SESSION)
        self._save_script = client.register_script(SAVE_SESSION)
        self._hold_script = client.register_script(HOLD_SESSION)
        self._renew_script = client.register_script(RENEW)
        self._release_script = client.register_script(RELEASE)
        self._break_script = client.register_script(BREAK)
        self._delete_script = client.register_script(DELETE_SESSION)
        self._forget_script = client.register_script(FORGET_SESSIONS)

    # ---------------------------------------------------------------- the lock

    @property
    def _ttl(self) -> int:
        """The idle TTL of a session nobody holds (ms; 0 = none)."""
        return ms(self.limits.session_ttl_seconds)

    @property
    def _held_ttl(self) -> int:
        """The TTL of a held session: one lease beyond its idle TTL, so that it cannot expire
        between two renewals (the release sets the idle TTL again)."""
        return self._ttl and self._ttl + ms(self.limits.lease_seconds)

    def hold(self, session_id: str, *, owner: str | None = None) -> AbstractAsyncContextManager[Session]:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("a session id must be a non-empty string")
        return self._hold(session_id, owner)

    @asynccontextmanager
    async def _hold(self, session_id: str, owner: str | None) -> AsyncIterator[Session]:
        async with self._local.hold(session_id):
            token = f"{self.replica}:{secrets.token_hex(8)}"
            taken: list[bool] = []
            try:
                session = await self._take(session_id, owner, token, taken)
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._renew, session_id, token)
                        try:
                            yield session
                        finally:
                            tg.cancel_scope.cancel()
                except BaseExceptionGroup as group:
                    # the renewal never raises: the group carries the block's own exception,
                    # which propagates as it is
                    inner = _sole(group)
                    if inner is group:
                        raise
                    raise inner from None
            finally:
                if token in self._let_go:  # the last save took the lock with it
                    self._let_go.discard(token)
                elif taken:
                    with anyio.CancelScope(shield=True):
                        await self._release(session_id, token)

    async def _take(self, session_id: str, owner: str | None, token: str, taken: list[bool]) -> Session:
        """Take the session's lock and open the session (one script), waiting while another run
        holds it; ``taken`` gets an item once the lock is ours."""
        keys = self._keys
        script_keys = [
            keys.session(session_id),
            keys.sessions,
            keys.lock(session_id),
            keys.locks_of(self.replica),
        ]
        lease = ms(self.limits.lease_seconds)

        async def attempt() -> Session | None:
            args = [*self._open_args(session_id, owner, create=True, ttl=self._held_ttl), token, lease]
            with self._backend.failures(f"taking session {session_id!r}'s lock"):
                reply = await self._hold_script(keys=script_keys, args=args)
                if reply[0] == 1:
                    taken.append(True)
                    found = self._session(session_id, reply[1:])
                    if found is None:  # the version parsed here went meanwhile: read it whole
                        found = await self._open(session_id, owner, create=True, ttl=self._held_ttl)
                    if found is not None:
                        found.lease = token  # the save's fencing token
                    return found
                holder = text(await self._backend.client.get(keys.lock(session_id)))
            if holder and not await self._holder_alive(holder.partition(":")[0]):
                dead = holder.partition(":")[0]
                logger.warning(
                    "session %s: its lock is held by replica %s, which is gone; breaking it", session_id, dead
                )
                with self._backend.failures(f"breaking session {session_id!r}'s lock"):
                    await self._break_script(
                        keys=[keys.lock(session_id)], args=[f"{dead}:", keys.lock_released(session_id)]
                    )
            return None

        session = await attempt()
        if session is None:
            session = await self._backend.wait_until(
                keys.lock_released(session_id),
                attempt,
                what=f"waiting for session {session_id!r}'s lock",
                max_pause=max(min(self.limits.lease_seconds / 3, 1.0), 0.05),
            )
        return session

    async def _renew(self, session_id: str, token: str) -> None:
        keys = self._keys
        every = max(self.limits.lease_seconds / 3, 0.05)
        args: list[str | int] = [token, ms(self.limits.lease_seconds), self._held_ttl]
        while True:
            await anyio.sleep(every)
            try:
                with self._backend.failures("renewing a session lock"):
                    kept = await self._renew_script(
                        keys=[keys.lock(session_id), keys.session(session_id)], args=args
                    )
                await self._keepalive()
            except StateError as exc:
                logger.warning("session %s: could not renew its lock (%s); trying again", session_id, exc)
                continue
            if kept != 1:
                if token in self._let_go:  # the last save let it go
                    return
                logger.warning(
                    "session %s: its lock lapsed while this run held it (this process stalled, or Redis "
                    "lost it); another run may have started on it",
                    session_id,
                )
                return

    async def _release(self, session_id: str, token: str) -> None:
        keys = self._keys
        try:
            with anyio.fail_after(10), self._backend.failures("releasing a session lock"):
                await self._release_script(
                    keys=[keys.lock(session_id), keys.locks_of(self.replica), keys.session(session_id)],
                    args=[token, session_id, keys.lock_released(session_id), self._ttl],
                )
        except (StateError, TimeoutError) as exc:
            logger.warning(
                "session %s: could not release its lock (%s); it lapses in %g s",
                session_id,
                exc,
                self.limits.lease_seconds,
            )

    # ---------------------------------------------------------------- transcripts parsed once

    def _known(self, session_id: str) -> list[str]:
        """The version of ``session_id``'s transcript parsed here, as script arguments."""
        cached = self._parsed.get(session_id)
        return [cached[0][0], str(cached[0][1])] if cached is not None else ["", ""]

    def _remember(self, session_id: str, version: Version, transcript: tuple[Message, ...]) -> None:
        self._parsed[session_id] = (version, transcript)
        self._parsed.move_to_end(session_id)
        while len(self._parsed) > PARSED_SESSIONS:
            self._parsed.popitem(last=False)

    def _session(self, session_id: str, reply: Sequence[Any]) -> Session | None:
        """A Session from a script's ``read`` (None: the transcript was left out, but the version
        parsed here is gone meanwhile: read again without it)."""
        owner, created, updated, runs, _messages, transcript = reply
        version = (text(created) or "", int(runs or 0))
        if transcript is not None:
            parsed = tuple(Message.from_dict(m) for m in json.loads(transcript))
            self._remember(session_id, version, parsed)
        else:
            cached = self._parsed.get(session_id)
            if cached is None or cached[0] != version:
                return None
            self._parsed.move_to_end(session_id)
            parsed = cached[1]
        return Session(
            id=session_id,
            transcript=parsed,
            created=float(created or 0),
            updated=float(updated or 0),
            runs=version[1],
            owner=json.loads(owner or b"null"),
        )

    # ---------------------------------------------------------------- the store

    def _open_args(self, session_id: str, owner: str | None, *, create: bool, ttl: int) -> list[str | int]:
        """``OPEN_SESSION``'s arguments (the version parsed here included)."""
        now = time.time()
        return [
            self._keys.prefix,
            session_id,
            dumps(owner),
            repr(now),
            int(now * 1000),
            ttl,
            self.limits.max_sessions,
            self.max_per_owner,
            "1" if create else "0",
            *self._known(session_id),
        ]

    async def _open(self, session_id: str, owner: str | None, *, create: bool, ttl: int) -> Session | None:
        keys = [self._keys.session(session_id), self._keys.sessions]
        while True:
            with self._backend.failures(f"opening session {session_id!r}"):
                reply = await self._open_script(
                    keys=keys, args=self._open_args(session_id, owner, create=create, ttl=ttl)
                )
            if not reply:
                return None
            session = self._session(session_id, reply)
            if session is not None:
                return session
            self._parsed.pop(session_id, None)  # read it whole next time

    async def create(self, owner: str | None = None) -> Session:
        session = await self._open(new_session_id(), owner, create=True, ttl=self._ttl)
        assert session is not None
        return session

    async def get(self, session_id: str) -> Session | None:
        if not isinstance(session_id, str) or not session_id:
            return None
        while True:
            with self._backend.failures(f"reading session {session_id!r}"):
                reply = await self._read_script(
                    keys=[self._keys.session(session_id)], args=self._known(session_id)
                )
            if not reply:
                return None
            session = self._session(session_id, reply)
            if session is not None:
                return session
            self._parsed.pop(session_id, None)  # read it whole next time

    async def save(self, session: Session, transcript: Sequence[Message], *, release: bool = False) -> bool:
        messages = tuple(transcript)
        data = dumps([m.to_dict() for m in messages])
        size = len(data.encode())
        if self.limits.max_session_bytes and size > self.limits.max_session_bytes:
            raise SessionTooLarge(session.id, size, self.limits.max_session_bytes)
        now = time.time()
        keys = self._keys
        lease = session.lease if release else None  # the hold's last write: the lock goes with it
        with self._backend.failures(f"saving session {session.id!r}"):
            runs = await self._save_script(
                keys=[
                    keys.session(session.id),
                    keys.sessions,
                    keys.lock(session.id),
                    keys.locks_of(self.replica),
                ],
                args=[
                    data,
                    len(messages),
                    repr(now),
                    int(now * 1000),
                    self._held_ttl,
                    session.id,
                    session.lease or "",
                    keys.prefix,
                    "1" if lease is not None else "0",
                    keys.lock_released(session.id),
                    self._ttl,
                ],
            )
        if lease is not None:
            self._let_go.add(lease)
        if runs == -1:
            raise LeaseLost(session.id)
        if runs is None:
            self._parsed.pop(session.id, None)
            return False
        session.transcript = messages
        session.updated = now
        session.runs = int(runs)
        cached = self._parsed.get(session.id)
        if cached is not None:
            self._remember(session.id, (cached[0][0], session.runs), messages)
        return True

    async def list(self) -> list[SessionInfo]:
        keys, client = self._keys, self._backend.client
        with self._backend.failures("listing sessions"):
            ids = [text(i) or "" for i in await client.zrange(keys.sessions, 0, -1)]
            pipe = client.pipeline(transaction=False)
            for session_id in ids:
                pipe.hmget(keys.session(session_id), _FIELDS)
                pipe.exists(keys.lock(session_id))
            replies = await pipe.execute()
            found: list[SessionInfo] = []
            gone: list[str] = []
            for index, session_id in enumerate(ids):
                owner, created, updated, runs, messages = replies[2 * index]
                if owner is None:  # expired: the index forgets it too
                    gone.append(session_id)
                    continue
                found.append(
                    SessionInfo(
                        session_id,
                        int(messages or 0),
                        int(runs or 0),
                        float(created or 0),
                        float(updated or 0),
                        bool(replies[2 * index + 1]),
                        json.loads(owner),
                    )
                )
            if gone:
                with suppress(Exception):
                    await self._forget_script(args=[keys.prefix, *gone])
        return found

    async def delete(self, session_id: str) -> bool:
        if not isinstance(session_id, str) or not session_id:
            return False
        with self._backend.failures(f"deleting session {session_id!r}"):
            deleted = await self._delete_script(
                keys=[self._keys.session(session_id)], args=[self._keys.prefix, session_id]
            )
        self._parsed.pop(session_id, None)
        return bool(deleted)
