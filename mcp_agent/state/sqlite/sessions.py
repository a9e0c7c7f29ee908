"""The SQLite store's conversations: ``SqliteSessionStore`` (see ``sqlite/__init__.py`` for the locks).

A ``save(release=True)`` deletes the hold's lock row in the save's own write transaction."""

from __future__ import annotations

import collections
import json
import logging
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio

from ...exceptions import LeaseLost, SessionTooLarge, StateError
from ...messages import Message
from ..memory import KeyedLocks, transcript_bytes
from ..records import Session, SessionInfo, StateLimits, new_session_id
from .database import OWNER_KEY, POLL_SECONDS, Database, first_row, holder_alive, owner_key

logger = logging.getLogger(__name__)

PARSED_SESSIONS = 128
"""Transcripts kept parsed (the most recently read), so a conversation's next turn skips the JSON."""


def _transcript(text: str) -> tuple[Message, ...]:
    return tuple(Message.from_dict(m) for m in json.loads(text))


_IDLE = "NOT EXISTS (SELECT 1 FROM session_locks l WHERE l.session_id = s.id AND l.expires > ?)"
"""A session no run holds now (? is now)."""
_LIVE = "(s.used >= ? OR EXISTS (SELECT 1 FROM session_locks l WHERE l.session_id = s.id AND l.expires > ?))"
"""A session not expired: used within the TTL, or held now (the first ? is the cutoff)."""


class SqliteSessionStore:
    """Conversations in the ``sessions`` table; see the module docstring for the locks."""

    def __init__(self, database: Database, limits: StateLimits, replica: str) -> None:
        self._db = database
        self.ttl_seconds = limits.session_ttl_seconds
        self.max_sessions = limits.max_sessions
        self.max_per_owner = limits.max_sessions_per_owner
        self.max_session_bytes = limits.max_session_bytes
        self.lease_seconds = limits.lease_seconds
        self._replica = replica
        self._local = KeyedLocks()
        self._let_go: set[str] = set()
        """Holders whose lock a ``save(release=True)`` deleted: leaving their block has nothing to do."""
        self._parsed: collections.OrderedDict[str, tuple[tuple[float, int], tuple[Message, ...]]] = (
            collections.OrderedDict()
        )  # transcripts read lately, by (created, runs): touched only in the database's thread

    def _read(self, db: sqlite3.Connection, session_id: str, now: float) -> Session | None:
        """A live session, its transcript parsed once per version (``created``, ``runs``)."""
        row = first_row(
            db.execute(
                f"SELECT owner, created, updated, runs FROM sessions s WHERE id = ? AND {_LIVE}",
                (session_id, self._cutoff(now), now),
            )
        )
        if row is None:
            return None
        owner, created, updated, runs = row
        cached = self._parsed.get(session_id)
        if cached is not None and cached[0] == (created, runs):
            self._parsed.move_to_end(session_id)
            transcript = cached[1]
        else:
            (text,) = first_row(db.execute("SELECT transcript FROM sessions WHERE id = ?", (session_id,)))
            transcript = _transcript(text)
            self._remember(session_id, (created, runs), transcript)
        return Session(session_id, transcript, created, updated, runs, owner)

    def _remember(self, session_id: str, version: tuple[float, int], transcript: tuple[Message, ...]) -> None:
        self._parsed[session_id] = (version, transcript)
        self._parsed.move_to_end(session_id)
        while len(self._parsed) > PARSED_SESSIONS:
            self._parsed.popitem(last=False)

    def _cutoff(self, now: float) -> float:
        return now - self.ttl_seconds if self.ttl_seconds else float("-inf")

    def hold(self, session_id: str, *, owner: str | None = None) -> AbstractAsyncContextManager[Session]:
        if not session_id:
            raise ValueError("a session id must be a non-empty string")
        return self._hold(session_id, owner)

    @asynccontextmanager
    async def _hold(self, session_id: str, owner: str | None) -> AsyncIterator[Session]:
        async with self._local.hold(session_id):
            holder = secrets.token_hex(8)
            session = await self._acquire(session_id, owner, holder)
            session.lease = holder  # the save's fencing token
            error: BaseException | None = None
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._renew, session_id, holder)
                    try:
                        yield session
                    except BaseException as exc:  # raised again below, not wrapped in a group
                        error = exc
                    finally:
                        tg.cancel_scope.cancel()
            finally:
                if holder in self._let_go:  # the last save took the lock with it
                    self._let_go.discard(holder)
                else:
                    with anyio.CancelScope(shield=True):
                        await self._release(session_id, holder)
            if error is not None:
                raise error

    async def _acquire(self, session_id: str, owner: str | None, holder: str) -> Session:
        pause = 0.02
        while True:
            session = await self._db.run(
                lambda db: self._try_acquire(db, session_id, owner, holder), write=True
            )
            if session is not None:
                return session
            await anyio.sleep(pause)
            pause = min(pause * 2, POLL_SECONDS)

    def _try_acquire(
        self, db: sqlite3.Connection, session_id: str, owner: str | None, holder: str
    ) -> Session | None:
        now = time.time()
        row = first_row(
            db.execute(
                "SELECT l.replica, l.expires, r.host, r.pid, r.process FROM session_locks l "
                "LEFT JOIN replicas r ON r.id = l.replica WHERE l.session_id = ?",
                (session_id,),
            )
        )
        if row is not None:
            replica, expires, host, pid, process = row
            # a row of this replica's is stale (its runs queue on the local lock first)
            if replica != self._replica and holder_alive(host, pid, process, expires, now):
                return None  # held by a live run
        db.execute(
            "INSERT OR REPLACE INTO session_locks (session_id, holder, replica, expires) VALUES (?, ?, ?, ?)",
            (session_id, holder, self._replica, now + self.lease_seconds),
        )
        found = self._read(db, session_id, now)
        if found is not None:
            db.execute("UPDATE sessions SET used = ? WHERE id = ?", (now, session_id))
            return found
        db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))  # expired, not yet evicted
        return self._insert(db, Session(session_id, created=now, updated=now, owner=owner), now)

    def _insert(self, db: sqlite3.Connection, session: Session, now: float) -> Session:
        self._evict(db, now, session.owner)
        db.execute(
            "INSERT INTO sessions (id, owner, created, updated, used) VALUES (?, ?, ?, ?, ?)",
            (session.id, session.owner, session.created, session.updated, now),
        )
        return session

    def expire(self, db: sqlite3.Connection, now: float) -> None:
        """Sessions idle beyond the TTL go (not one a run holds), in the caller's transaction."""
        if self.ttl_seconds:
            db.execute(f"DELETE FROM sessions AS s WHERE s.used < ? AND {_IDLE}", (self._cutoff(now), now))

    def _evict(self, db: sqlite3.Connection, now: float, owner: str | None) -> None:
        """Expired idle sessions go; then the caps make room for one more (idle ones only). The
        counts come from ``session_owners`` (kept by triggers), the oldest sessions from indexes."""
        self.expire(db, now)
        if self.max_per_owner:
            found = first_row(db.execute("SELECT n FROM session_owners WHERE key = ?", (owner_key(owner),)))
            excess = (found[0] if found else 0) - (self.max_per_owner - 1)
            if excess > 0:
                db.execute(
                    f"DELETE FROM sessions WHERE id IN (SELECT id FROM sessions AS s WHERE s.owner IS ? AND {_IDLE} "
                    "ORDER BY s.used LIMIT ?)",
                    (owner, now, excess),
                )
        if self.max_sessions:
            excess = first_row(db.execute("SELECT count(*) FROM sessions"))[0] - (self.max_sessions - 1)
            for _ in range(max(excess, 0)):
                victim = self._victim(db, now)
                if victim is None:
                    return  # every session left is busy
                db.execute("DELETE FROM sessions WHERE id = ?", (victim,))

    @staticmethod
    def _victim(db: sqlite3.Connection, now: float) -> str | None:
        """The least recently used idle session of the owner holding the most (of the owners with
        an idle one; between owners holding as many, the least recently used of all): each owner's
        oldest idle session from the ``(owner, used)`` index, or, when many owners hold as many,
        the oldest idle session of theirs from the ``used`` index."""
        for (count,) in db.execute("SELECT DISTINCT n FROM session_owners ORDER BY n DESC").fetchall():
            owners = db.execute("SELECT owner FROM session_owners WHERE n = ? LIMIT 17", (count,)).fetchall()
            if len(owners) > 16:
                found = first_row(
                    db.execute(
                        f"SELECT s.id FROM sessions AS s INDEXED BY sessions_by_use WHERE "
                        f"(SELECT n FROM session_owners WHERE key = {OWNER_KEY.format('s.owner')}) = ? AND {_IDLE} "
                        "ORDER BY s.used LIMIT 1",
                        (count, now),
                    )
                )
                if found is not None:
                    return str(found[0])
                continue
            oldest = [
                first_row(
                    db.execute(
                        f"SELECT s.used, s.id FROM sessions AS s WHERE s.owner IS ? AND {_IDLE} ORDER BY s.used LIMIT 1",
                        (owner, now),
                    )
                )
                for (owner,) in owners
            ]
            idle = [row for row in oldest if row is not None]
            if idle:
                return str(min(idle)[1])
        return None

    async def _renew(self, session_id: str, holder: str) -> None:
        while True:
            await anyio.sleep(self.lease_seconds / 3)
            try:
                renewed = await self._db.run(
                    lambda db: (
                        db.execute(
                            "UPDATE session_locks SET expires = ? WHERE session_id = ? AND holder = ?",
                            (time.time() + self.lease_seconds, session_id, holder),
                        ).rowcount
                    ),
                    write=True,
                )
            except StateError as exc:
                logger.warning("session %s: could not renew its lock: %s", session_id, exc)
                continue
            if not renewed:
                if holder not in self._let_go:
                    logger.warning("session %s: its lock lapsed and was taken by another run", session_id)
                return

    async def _release(self, session_id: str, holder: str) -> None:
        try:
            await self._db.run(
                lambda db: db.execute(
                    "DELETE FROM session_locks WHERE session_id = ? AND holder = ?", (session_id, holder)
                ),
                write=True,
            )
        except StateError as exc:  # the lease lapses by itself
            logger.warning("session %s: could not release its lock: %s", session_id, exc)

    async def create(self, owner: str | None = None) -> Session:
        now = time.time()
        session = Session(new_session_id(), created=now, updated=now, owner=owner)
        return await self._db.run(lambda db: self._insert(db, session, now), write=True)

    async def get(self, session_id: str) -> Session | None:
        now = time.time()
        return await self._db.run(lambda db: self._read(db, session_id, now))

    async def save(self, session: Session, transcript: Sequence[Message], *, release: bool = False) -> bool:
        data = transcript_bytes(transcript)
        if self.max_session_bytes and len(data) > self.max_session_bytes:
            raise SessionTooLarge(session.id, len(data), self.max_session_bytes)
        text = data.decode()
        now = time.time()
        saved = tuple(transcript)
        lease = session.lease if release else None  # the hold's last write: the lock goes with it

        def save(db: sqlite3.Connection) -> int | None:
            if (
                session.lease is not None
                and first_row(
                    db.execute(
                        "SELECT 1 FROM session_locks WHERE session_id = ? AND holder = ?",
                        (session.id, session.lease),
                    )
                )
                is None
                and first_row(db.execute("SELECT 1 FROM sessions WHERE id = ?", (session.id,))) is not None
            ):
                raise LeaseLost(session.id)  # in the write transaction: nobody takes the lock meanwhile
            cursor = db.execute(
                "UPDATE sessions SET transcript = ?, messages = ?, updated = ?, used = ?, runs = runs + 1 "
                "WHERE id = ? RETURNING created, runs",
                (text, len(transcript), now, now, session.id),
            )
            rows = cursor.fetchall()  # all: the statement is done before the commit
            if lease is not None:
                db.execute(
                    "DELETE FROM session_locks WHERE session_id = ? AND holder = ?", (session.id, lease)
                )
            if not rows:
                return None
            [(created, runs)] = rows
            self._remember(session.id, (created, runs), saved)
            return int(runs)

        runs = await self._db.run(save, write=True)
        if lease is not None:
            self._let_go.add(lease)
        if runs is None:
            return False
        session.transcript, session.updated, session.runs = saved, now, runs
        return True

    async def list(self) -> list[SessionInfo]:
        now = time.time()
        rows = await self._db.run(
            lambda db: db.execute(
                "SELECT s.id, s.messages, s.runs, s.created, s.updated, "
                "EXISTS (SELECT 1 FROM session_locks l WHERE l.session_id = s.id AND l.expires > ?), s.owner "
                f"FROM sessions s WHERE {_LIVE} ORDER BY s.created",
                (now, self._cutoff(now), now),
            ).fetchall()
        )
        return [
            SessionInfo(id_, n, runs, c, u, bool(busy), owner) for id_, n, runs, c, u, busy, owner in rows
        ]

    async def delete(self, session_id: str) -> bool:
        deleted = await self._db.run(
            lambda db: db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount, write=True
        )
        return bool(deleted)
