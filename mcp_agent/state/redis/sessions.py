"""Conversations in Redis, the per-session lock that holds across replicas, and the Lua scripts
that do both.

A session is a hash (``backend.py`` draws the keys) that expires after
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

What must not interleave with another replica's steps (open, hold, read, save, renew, release,
break, delete) is one Lua script, below, which Redis runs atomically in one round trip: ``_INDEX``
keeps the session indexes of the key table (``backend.py``) and evicts beyond the caps,
``_PAGES`` drops a session's paged results with it (``pages.py`` runs the rest of them), and
``BREAK`` also serves ``recover`` (a dead replica's locks).
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

from ...exceptions import LeaseLost, SessionTooLarge, StateError
from ...messages import Message
from ..memory import KeyedLocks
from ..records import Session, SessionInfo, StateLimits, new_session_id
from .backend import Backend, dumps, ms, text

logger = logging.getLogger(__name__)

_READ = """
-- A session's fields, the transcript only when it is not the version the caller has parsed:
-- {owner, created, updated, runs, messages, transcript or nil}
local function read(key, known_created, known_runs)
  local f = redis.call('HMGET', key, 'owner', 'created', 'updated', 'runs', 'messages')
  if f[2] == known_created and f[4] == known_runs then
    f[6] = false
  else
    f[6] = redis.call('HGET', key, 'transcript')
  end
  return f
end
"""

_PAGES = """
-- A session's paged results live in its hash (see the key table); ``pages`` and
-- ``pages:totals`` follow them across sessions.
local function pages_index(key)
  local raw = redis.call('HGET', key, 'pages')
  if raw then return cjson.decode(raw) end
  return {live = {}, gone = {}, bytes = 0}
end

local function page_member(handle, bytes, id)
  return handle .. ' ' .. bytes .. ' ' .. id
end

-- the session ``id`` (its hash ``key``) goes: its results leave ``pages`` and the sum
local function forget_pages(prefix, key, id)
  local raw = redis.call('HGET', key, 'pages')
  if not raw then return end
  for _, entry in ipairs(cjson.decode(raw).live) do
    redis.call('ZREM', prefix .. 'pages', page_member(entry[1], entry[2], id))
    redis.call('HINCRBY', prefix .. 'pages:totals', 'bytes', -entry[2])
  end
end
"""

_INDEX = (
    _PAGES
    + """
-- The session indexes (see the key table): every session id is in ``sessions`` and, with its
-- owner, in ``sessions:owner``, ``sessions:of:<owner>`` and the owner's count in
-- ``sessions:owners``.
local function forget(prefix, id)
  redis.call('ZREM', prefix .. 'sessions', id)
  local owner = redis.call('HGET', prefix .. 'sessions:owner', id)
  if owner then
    redis.call('HDEL', prefix .. 'sessions:owner', id)
    if redis.call('ZREM', prefix .. 'sessions:of:' .. owner, id) == 1 then
      if tonumber(redis.call('ZINCRBY', prefix .. 'sessions:owners', -1, owner)) <= 0 then
        redis.call('ZREM', prefix .. 'sessions:owners', owner)
      end
    end
  end
end

-- the session was used now (a session of an earlier build, not indexed yet, is taken in)
local function touch(prefix, id, owner, now_ms)
  redis.call('ZADD', prefix .. 'sessions', now_ms, id)
  if redis.call('HSETNX', prefix .. 'sessions:owner', id, owner) == 1 then
    redis.call('ZINCRBY', prefix .. 'sessions:owners', 1, owner)
  else
    owner = redis.call('HGET', prefix .. 'sessions:owner', id)
  end
  redis.call('ZADD', prefix .. 'sessions:of:' .. owner, now_ms, id)
end

-- once: index the sessions of a build that kept only ``sessions``
local function indexed(prefix)
  if redis.call('EXISTS', prefix .. 'sessions:indexed') == 1 then return end
  local all = redis.call('ZRANGE', prefix .. 'sessions', 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local owner = redis.call('HGET', prefix .. 'session:' .. all[i], 'owner')
    if owner then touch(prefix, all[i], owner, all[i + 1]) else forget(prefix, all[i]) end
  end
  redis.call('SET', prefix .. 'sessions:indexed', '1')
end

-- forget sessions unused for longer than ``ttl`` whose hash has expired (100 at most a call)
local function sweep(prefix, now_ms, ttl)
  if ttl <= 0 then return end
  local old = redis.call('ZRANGEBYSCORE', prefix .. 'sessions', '-inf', now_ms - ttl, 'LIMIT', 0, 100)
  for _, id in ipairs(old) do
    if redis.call('EXISTS', prefix .. 'session:' .. id) == 0 then forget(prefix, id) end
  end
end

-- the owner's least recently used idle session and its last use, or nil; gone ones met on the
-- way are forgotten
local function oldest_idle(prefix, owner)
  local of, start = prefix .. 'sessions:of:' .. owner, 0
  while true do
    local page = redis.call('ZRANGE', of, start, start + 15, 'WITHSCORES')
    if #page == 0 then return nil end
    local kept = 0
    for i = 1, #page, 2 do
      local id = page[i]
      if redis.call('EXISTS', prefix .. 'session:' .. id) == 0 then
        forget(prefix, id)
      elseif redis.call('EXISTS', prefix .. 'lock:' .. id) == 0 then
        return id, tonumber(page[i + 1])
      else
        kept = kept + 1
      end
    end
    start = start + kept
  end
end

local function drop(prefix, id)
  forget_pages(prefix, prefix .. 'session:' .. id, id)
  redis.call('DEL', prefix .. 'session:' .. id)
  forget(prefix, id)
end

-- room for one more session of ``owner``: first the owner's own least recently used idle ones
-- beyond its cap, then, beyond the total cap, the least recently used idle session of the owner
-- holding the most (between owners holding as many, the least recently used of all)
local function make_room(prefix, owner, max_owner, max_total)
  if max_owner > 0 then
    while redis.call('ZCARD', prefix .. 'sessions:of:' .. owner) > max_owner - 1 do
      local id = oldest_idle(prefix, owner)
      if not id then break end
      drop(prefix, id)
    end
  end
  if max_total > 0 then
    while redis.call('ZCARD', prefix .. 'sessions') > max_total - 1 do
      local best, most, since, start = nil, nil, nil, 0
      while true do
        local page = redis.call('ZREVRANGE', prefix .. 'sessions:owners', start, start + 15, 'WITHSCORES')
        if #page == 0 then break end
        local done = false
        for i = 1, #page, 2 do
          local count = tonumber(page[i + 1])
          if most and count < most then done = true break end
          local id, used = oldest_idle(prefix, page[i])
          if id and (not best or used < since) then best, most, since = id, count, used end
        end
        if done then break end
        start = start + 16
      end
      if not best then break end
      drop(prefix, best)
    end
  end
end
"""
)

_LET_GO = """
-- let_go(lock, locks of the holder's replica, session key, token, id, wake channel, idle ttl):
-- deletes the lock only when it holds the token (and gives the session its idle TTL again, 0 =
-- none), and tells the waiters; 1 when it did.
local function let_go(lock, locks, key, token, id, channel, ttl)
  redis.call('SREM', locks, id)
  if token ~= '' and redis.call('GET', lock) == token then
    redis.call('DEL', lock)
    if tonumber(ttl) > 0 then redis.call('PEXPIRE', key, ttl) end
    redis.call('PUBLISH', channel, '1')
    return 1
  end
  return 0
end
"""

_OPEN = (
    _READ
    + _INDEX
    + """
-- KEYS: session key, sessions index
-- ARGV: prefix, id, owner (JSON), now (s), now (ms), ttl (ms, 0 = none), max sessions,
--       max per owner, create (1: create when missing; 0: only open an existing one),
--       the created and runs of the transcript the caller has parsed ("" when none)
-- open() returns the session (``read``), touched; or an empty list when missing and not created.
local function open()
  local key, prefix, id, owner = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
  local ttl, max_total, max_owner = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  if redis.call('EXISTS', key) == 1 then
    if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
    touch(prefix, id, redis.call('HGET', key, 'owner'), ARGV[5])
    return read(key, ARGV[10], ARGV[11])
  end
  if ARGV[9] ~= '1' then return {} end
  indexed(prefix)
  forget(prefix, id)  -- an id whose session expired starts afresh, maybe for another owner
  sweep(prefix, tonumber(ARGV[5]), ttl)
  make_room(prefix, owner, max_owner, max_total)
  redis.call('HSET', key, 'owner', owner, 'created', ARGV[4], 'updated', ARGV[4], 'runs', 0,
             'messages', 0, 'transcript', '[]')
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  touch(prefix, id, owner, ARGV[5])
  return read(key, '', '')
end
"""
)

OPEN_SESSION = _OPEN + "return open()\n"

HOLD_SESSION = (
    _OPEN
    + """
-- KEYS: session key, sessions index, lock, locks of this replica
-- ARGV: open()'s, then the lock's token and lease (ms)
-- Takes the session's lock when it is free (or ours already: a retried call whose first answer
-- was lost) and opens the session in the same step: {1, the session (``read``)}; {0} when
-- another holds the lock.
if redis.call('SET', KEYS[3], ARGV[12], 'NX', 'PX', ARGV[13]) or redis.call('GET', KEYS[3]) == ARGV[12] then
  redis.call('SADD', KEYS[4], ARGV[2])
  local found, out = open(), {1}
  for i = 1, 6 do out[i + 1] = found[i] end
  return out
end
return {0}
"""
)

READ_SESSION = (
    _READ
    + """
-- KEYS: session key. ARGV: the created and runs of the transcript the caller has parsed
-- Returns the session (``read``), or an empty list when there is none.
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
return read(KEYS[1], ARGV[1], ARGV[2])
"""
)

SAVE_SESSION = (
    _INDEX
    + _LET_GO
    + """
-- KEYS: session key, sessions index, the session's lock, locks of this replica
-- ARGV: transcript (JSON), messages, now (s), now (ms), ttl (ms), id, lock token ("" = none), prefix,
--       release (1: the hold's last write, the lock goes with it), wake channel, idle ttl (ms)
-- Returns the new run count, nil when the session is gone (deleted or expired), or -1 when the
-- lock is no longer the token's (it lapsed: another run may have written; nothing is written).
local function done(reply)  -- whatever the save did, a last save lets the lock go
  if ARGV[9] == '1' then let_go(KEYS[3], KEYS[4], KEYS[1], ARGV[7], ARGV[6], ARGV[10], ARGV[11]) end
  return reply
end
if redis.call('EXISTS', KEYS[1]) == 0 then return done(false) end
if ARGV[7] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[7] then return done(-1) end
redis.call('HSET', KEYS[1], 'transcript', ARGV[1], 'messages', ARGV[2], 'updated', ARGV[3])
local runs = redis.call('HINCRBY', KEYS[1], 'runs', 1)
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
touch(ARGV[8], ARGV[6], redis.call('HGET', KEYS[1], 'owner'), ARGV[4])
return done(runs)
"""
)

DELETE_SESSION = (
    _INDEX
    + """
-- KEYS: session key. ARGV: prefix, id
-- Deletes the session (its paged results too) and its index entries: 1 when it was there.
forget_pages(ARGV[1], KEYS[1], ARGV[2])
local deleted = redis.call('DEL', KEYS[1])
forget(ARGV[1], ARGV[2])
return deleted
"""
)

FORGET_SESSIONS = (
    _INDEX
    + """
-- ARGV: prefix, then session ids whose hash has expired
-- Forgets their index entries (each only if its hash is still gone).
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. 'session:' .. ARGV[i]) == 0 then forget(ARGV[1], ARGV[i]) end
end
return 1
"""
)

RENEW = """
-- KEYS: lock, session key. ARGV: token, lease (ms), session ttl (ms, 0 = none)
-- Returns 1 while the lock is still ours (renewed), 0 when it was lost.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return 1
"""

RELEASE = _LET_GO + "return let_go(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4])\n"
"""KEYS: lock, locks of the holder's replica, session key. ARGV: token, session id, wake channel,
the session's idle TTL (ms, 0 = none)."""

BREAK = """
-- KEYS: lock. ARGV: the dead replica's token prefix ("<replica>:"), wake channel
-- Deletes the lock only when a run of that replica holds it (recovery, or a waiter that found
-- the holder dead), and tells the waiters.
local token = redis.call('GET', KEYS[1])
if token and string.sub(token, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
"""


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
