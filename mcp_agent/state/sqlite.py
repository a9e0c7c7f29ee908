"""``sqlite:///PATH``: conversations, approvals and run records in one SQLite file.

The default store of ``serve`` and ``query --session``. Stdlib ``sqlite3`` on one connection,
one call at a time (``_Database``): on the event loop's thread when the call has nothing to wait
for (tens of microseconds: WAL commits do not sync, checkpoints are moved off the loop), else
in an anyio worker thread, which waits for another process's write lock up to
``BUSY_TIMEOUT``. Why not always a thread: two thread switches per call, six calls per query,
cost more than the work itself (``bench/bench_state.py``); why not ``aiosqlite``: it is that
same thread per call. Every operation is one transaction (``BEGIN IMMEDIATE`` for writes), so
a transcript is saved whole or not at all, and a process killed at any point leaves a readable
database (WAL mode; ``_sqlite_schema.py`` opens, checks and migrates the file).

Two processes on one machine may share the file:

- a session's lock is a row in ``session_locks`` with a lease (``lease_seconds``, renewed by the
  holder every third of it). A run in another process waits for it (polling, from 20 ms up to
  ``POLL_SECONDS``); runs of this process queue on an in-process lock first. A lease whose
  holder's process is gone (same host, its pid dead) or that lapsed is taken over;
- a decision on an approval wakes a waiter in this process at once, and one in another process
  within ``POLL_SECONDS`` (it polls the row);
- each process registers itself in ``replicas`` (``beat`` renews it) so that ``recover`` can
  tell which in-flight runs and pending approvals were left by a process that died.

``sqlite3.Error`` is translated to ``StateError`` in one place (``_Database.run``). Transcripts
read lately are kept parsed (``PARSED_SESSIONS``), by version, so a conversation's next turn
does not parse its JSON again.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

import anyio

from ..exceptions import SessionTooLarge, StateError
from ..messages import Message
from ._encode import clean_text, to_json
from ._keyed import KeyedLocks
from ._sqlite_schema import BUSY_TIMEOUT, connect, database_path
from .base import (
    INTERRUPTED,
    Approval,
    Decision,
    Recovery,
    RunRecord,
    Session,
    SessionInfo,
    StateLimits,
    new_replica_id,
    new_session_id,
)
from .memory import transcript_bytes

logger = logging.getLogger(__name__)

__all__ = ["SqliteApprovalStore", "SqliteRunStore", "SqliteSessionStore", "SqliteState", "open_sqlite_state"]

T = TypeVar("T")

POLL_SECONDS = 0.25
"""The longest wait between two looks at a lock or an approval another process holds."""
PARSED_SESSIONS = 128
"""Transcripts kept parsed (the most recently read), so a conversation's next turn skips the JSON."""
CHECKPOINT_EVERY = 500
"""Writes between two checkpoints of the WAL (besides the one on every ``beat``)."""
PRUNE_EVERY = 100
"""Retention is applied after this many ``RunStore.end`` calls (and on every ``beat``)."""
HOST = socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_token(pid: int) -> str | None:
    """What tells this process from a later one given the same pid: its start time in clock
    ticks since boot (``/proc/PID/stat``, Linux); None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            fields = file.read().rpartition(")")[2].split()
        return fields[19]  # field 22 of stat: starttime (the first two fields precede ")")
    except (OSError, IndexError):
        return None


def _alive(host: str | None, pid: int | None, process: str | None, expires: float, now: float) -> bool:
    """Whether a holder (a replica, or a lock's holder) is alive: on this host, whether its
    process still runs (the same process: a pid reused later has another start time);
    elsewhere, whether its lease has not lapsed."""
    if host == HOST and pid is not None:
        return _pid_alive(pid) and (process is None or process_token(pid) in (None, process))
    return expires > now


def _one(cursor: sqlite3.Cursor) -> Any:
    """The first row of a query, or None; the statement is run to its end, so that none is left
    in progress (an unfinished one would stop the transaction's commit)."""
    rows = cursor.fetchall()
    return rows[0] if rows else None


def _write(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """``work`` in one write transaction (taken at once: no upgrade deadlock between processes);
    any failure, the commit's too, rolls it back whole."""
    db.execute("BEGIN IMMEDIATE")
    try:
        result = work(db)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return result


class _Database:
    """The one connection: used on the event loop's thread when that cannot wait, else in a
    worker thread, one call at a time either way.

    A call runs at once on the loop's thread when the connection is free and nothing has to be
    waited for: SQLite's busy timeout is 0 there, so a write lock held by another process makes
    the call give up at once (``SQLITE_BUSY``), and it runs again in a worker thread, which
    waits up to ``BUSY_TIMEOUT`` for the lock. Commits do not sync to disk (WAL,
    ``synchronous=NORMAL``) and never checkpoint on the loop's thread (auto-checkpoints are off):
    ``checkpoint`` runs in a worker thread every ``CHECKPOINT_EVERY`` writes, on ``beat`` and at
    the end. So the loop's thread spends tens of microseconds on a call, as on any in-memory
    work, instead of two thread switches.
    """

    def __init__(self, db: sqlite3.Connection, url: str) -> None:
        self.db = db
        self.url = url
        self.closed = False
        self._limiter = anyio.CapacityLimiter(1)
        self._writes = 0
        db.execute("PRAGMA busy_timeout = 0")
        db.execute("PRAGMA wal_autocheckpoint = 0")

    async def run(self, work: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        if self.closed:
            raise StateError(f"state.url {self.url!r}: the store is closed")
        try:
            if write:
                self._writes += 1
                if self._writes % CHECKPOINT_EVERY == 0:
                    await self.checkpoint()
            if self._limiter.borrowed_tokens == 0:  # nobody else on the connection: try at once
                try:
                    return _write(self.db, work) if write else work(self.db)
                except sqlite3.OperationalError as exc:
                    if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _BUSY:
                        raise
            return await anyio.to_thread.run_sync(self._waiting, work, write, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise StateError(f"state.url {self.url!r}: {type(exc).__name__}: {exc}") from exc

    def _waiting(self, work: Callable[[sqlite3.Connection], T], write: bool) -> T:
        """``work`` in a worker thread, waiting for another process's write lock if need be."""
        self.db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        try:
            return _write(self.db, work) if write else work(self.db)
        finally:
            self.db.execute("PRAGMA busy_timeout = 0")

    async def checkpoint(self) -> None:
        """Copy the WAL back into the database file (in a worker thread; never waits for readers)."""
        await anyio.to_thread.run_sync(self.db.execute, "PRAGMA wal_checkpoint(PASSIVE)", limiter=self._limiter)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(sqlite3.Error):
                await self.checkpoint()
            await anyio.to_thread.run_sync(self.db.close, limiter=self._limiter)


_BUSY = frozenset({sqlite3.SQLITE_BUSY})


def _transcript(text: str) -> tuple[Message, ...]:
    return tuple(Message.from_dict(m) for m in json.loads(text))


_LIVE = "(s.used >= ? OR EXISTS (SELECT 1 FROM session_locks l WHERE l.session_id = s.id AND l.expires > ?))"
"""A session not expired: used within the TTL, or held now (the first ? is the cutoff)."""


class SqliteSessionStore:
    """Conversations in the ``sessions`` table; see the module docstring for the locks."""

    def __init__(self, database: _Database, limits: StateLimits, replica: str) -> None:
        self._db = database
        self.ttl_seconds = limits.session_ttl_seconds
        self.max_sessions = limits.max_sessions
        self.max_per_owner = limits.max_sessions_per_owner
        self.max_session_bytes = limits.max_session_bytes
        self.lease_seconds = limits.lease_seconds
        self._replica = replica
        self._local = KeyedLocks()
        self._parsed: collections.OrderedDict[str, tuple[tuple[float, int], tuple[Message, ...]]] = (
            collections.OrderedDict()
        )  # transcripts read lately, by (created, runs): touched only in the database's thread

    def _read(self, db: sqlite3.Connection, session_id: str, now: float) -> Session | None:
        """A live session, its transcript parsed once per version (``created``, ``runs``)."""
        row = _one(db.execute(
            f"SELECT owner, created, updated, runs FROM sessions s WHERE id = ? AND {_LIVE}",
            (session_id, self._cutoff(now), now),
        ))
        if row is None:
            return None
        owner, created, updated, runs = row
        cached = self._parsed.get(session_id)
        if cached is not None and cached[0] == (created, runs):
            self._parsed.move_to_end(session_id)
            transcript = cached[1]
        else:
            (text,) = _one(db.execute("SELECT transcript FROM sessions WHERE id = ?", (session_id,)))
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
                with anyio.CancelScope(shield=True):
                    await self._release(session_id, holder)
            if error is not None:
                raise error

    async def _acquire(self, session_id: str, owner: str | None, holder: str) -> Session:
        pause = 0.02
        while True:
            session = await self._db.run(lambda db: self._try_acquire(db, session_id, owner, holder), write=True)
            if session is not None:
                return session
            await anyio.sleep(pause)
            pause = min(pause * 2, POLL_SECONDS)

    def _try_acquire(self, db: sqlite3.Connection, session_id: str, owner: str | None, holder: str) -> Session | None:
        now = time.time()
        row = _one(db.execute(
            "SELECT l.replica, l.expires, r.host, r.pid, r.process FROM session_locks l "
            "LEFT JOIN replicas r ON r.id = l.replica WHERE l.session_id = ?",
            (session_id,),
        ))
        if row is not None:
            replica, expires, host, pid, process = row
            # a row of this replica's is stale (its runs queue on the local lock first)
            if replica != self._replica and _alive(host, pid, process, expires, now):
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

    def _evict(self, db: sqlite3.Connection, now: float, owner: str | None) -> None:
        """Expired idle sessions go; then the caps make room for one more (idle ones only)."""
        idle = "NOT EXISTS (SELECT 1 FROM session_locks l WHERE l.session_id = s.id AND l.expires > ?)"
        if self.ttl_seconds:
            db.execute(f"DELETE FROM sessions AS s WHERE s.used < ? AND {idle}", (self._cutoff(now), now))
        if self.max_per_owner:
            mine = _one(db.execute("SELECT count(*) FROM sessions WHERE owner IS ?", (owner,)))[0]
            excess = mine - (self.max_per_owner - 1)
            if excess > 0:
                db.execute(
                    f"DELETE FROM sessions WHERE id IN (SELECT id FROM sessions AS s WHERE s.owner IS ? AND {idle} "
                    "ORDER BY s.used LIMIT ?)",
                    (owner, now, excess),
                )
        if self.max_sessions:
            excess = _one(db.execute("SELECT count(*) FROM sessions"))[0] - (self.max_sessions - 1)
            for _ in range(max(excess, 0)):  # the oldest idle one of the owner holding the most
                victim = _one(db.execute(
                    f"SELECT s.id FROM sessions AS s JOIN (SELECT owner, count(*) AS n FROM sessions GROUP BY owner) "
                    f"AS c ON c.owner IS s.owner WHERE {idle} ORDER BY c.n DESC, s.used LIMIT 1",
                    (now,),
                ))
                if victim is None:
                    return  # every session left is busy
                db.execute("DELETE FROM sessions WHERE id = ?", victim)

    async def _renew(self, session_id: str, holder: str) -> None:
        while True:
            await anyio.sleep(self.lease_seconds / 3)
            try:
                renewed = await self._db.run(
                    lambda db: db.execute(
                        "UPDATE session_locks SET expires = ? WHERE session_id = ? AND holder = ?",
                        (time.time() + self.lease_seconds, session_id, holder),
                    ).rowcount,
                    write=True,
                )
            except StateError as exc:
                logger.warning("session %s: could not renew its lock: %s", session_id, exc)
                continue
            if not renewed:
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

    async def save(self, session: Session, transcript: Sequence[Message]) -> bool:
        data = transcript_bytes(transcript)
        if self.max_session_bytes and len(data) > self.max_session_bytes:
            raise SessionTooLarge(session.id, len(data), self.max_session_bytes)
        text = data.decode()
        now = time.time()
        saved = tuple(transcript)

        def save(db: sqlite3.Connection) -> int | None:
            cursor = db.execute(
                "UPDATE sessions SET transcript = ?, messages = ?, updated = ?, used = ?, runs = runs + 1 "
                "WHERE id = ? RETURNING created, runs",
                (text, len(transcript), now, now, session.id),
            )
            rows = cursor.fetchall()  # all: the statement is done before the commit
            if not rows:
                return None
            [(created, runs)] = rows
            self._remember(session.id, (created, runs), saved)
            return int(runs)

        runs = await self._db.run(save, write=True)
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
        return [SessionInfo(id_, n, runs, c, u, bool(busy), owner) for id_, n, runs, c, u, busy, owner in rows]

    async def delete(self, session_id: str) -> bool:
        deleted = await self._db.run(
            lambda db: db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount, write=True
        )
        return bool(deleted)


def _record(approval: Approval) -> str:
    return to_json(approval.to_record())


class SqliteApprovalStore:
    """Approvals in the ``approvals`` table (the whole record as JSON, plus what is queried)."""

    def __init__(self, database: _Database) -> None:
        self._db = database
        self._decided: dict[str, anyio.Event] = {}  # waiters in this process

    async def add(self, approval: Approval) -> None:
        decided = approval.decision.at if approval.decision is not None else None
        await self._db.run(
            lambda db: db.execute(
                "INSERT INTO approvals (id, replica, created, decided, record) VALUES (?, ?, ?, ?, ?)",
                (approval.id, approval.replica, approval.created, decided, _record(approval)),
            ),
            write=True,
        )

    async def decide(self, approval_id: str, decision: Decision) -> bool:
        def decide(db: sqlite3.Connection) -> bool:
            row = _one(db.execute("SELECT record FROM approvals WHERE id = ? AND decided IS NULL", (approval_id,)))
            if row is None:
                return False
            decided = replace(Approval.from_record(json.loads(row[0])), decision=decision)
            db.execute(
                "UPDATE approvals SET decided = ?, record = ? WHERE id = ?", (decision.at, _record(decided), approval_id)
            )
            return True

        won = await self._db.run(decide, write=True)
        if won and (event := self._decided.get(approval_id)) is not None:
            event.set()
        return won

    async def wait(self, approval_id: str) -> Decision:
        event = self._decided.setdefault(approval_id, anyio.Event())
        try:
            while True:
                approval = await self.get(approval_id)
                if approval is None:
                    raise KeyError(approval_id)
                if approval.decision is not None:
                    return approval.decision
                with anyio.move_on_after(POLL_SECONDS):
                    await event.wait()
        finally:
            if self._decided.get(approval_id) is event:
                del self._decided[approval_id]

    async def get(self, approval_id: str) -> Approval | None:
        row = await self._db.run(
            lambda db: _one(db.execute("SELECT record FROM approvals WHERE id = ?", (approval_id,)))
        )
        return None if row is None else Approval.from_record(json.loads(row[0]))

    async def pending(self) -> list[Approval]:
        rows = await self._db.run(
            lambda db: db.execute("SELECT record FROM approvals WHERE decided IS NULL ORDER BY created").fetchall()
        )
        return [Approval.from_record(json.loads(row[0])) for row in rows]


def _run_row(record: RunRecord) -> tuple[Any, ...]:
    return (
        record.id,
        record.started,
        record.ended,
        record.caller,
        record.termination_reason,
        record.replica,
        clean_text(record.query),
        clean_text(record.answer),
        to_json(record.to_dict()),
    )


class SqliteRunStore:
    """Run records in the ``runs`` table, kept within ``max_runs`` and ``max_run_age_days``."""

    def __init__(self, database: _Database, limits: StateLimits) -> None:
        self._db = database
        self.max_runs = limits.max_runs
        self.max_age_seconds = limits.max_run_age_days * 86400
        self._ends = 0

    async def begin(self, record: RunRecord) -> None:
        await self._put(record)

    async def end(self, record: RunRecord) -> None:
        await self._put(record)
        self._ends += 1
        if self._ends % PRUNE_EVERY == 0:
            await self._db.run(self.prune, write=True)

    async def _put(self, record: RunRecord) -> None:
        row = _run_row(record)
        await self._db.run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO runs (id, started, ended, caller, reason, replica, query, answer, record) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            ),
            write=True,
        )

    async def get(self, run_id: str) -> RunRecord | None:
        row = await self._db.run(lambda db: _one(db.execute("SELECT record FROM runs WHERE id = ?", (run_id,))))
        return None if row is None else RunRecord.from_dict(json.loads(row[0]))

    async def list(
        self,
        *,
        caller: str | None = None,
        reason: str | None = None,
        text: str | None = None,
        limit: int = 50,
        before: float | None = None,
    ) -> list[RunRecord]:
        where, args = ["1"], list[Any]()
        if caller is not None:
            where.append("caller = ?")
            args.append(caller)
        if reason is not None:
            where.append("reason = ?")
            args.append(reason)
        if before is not None:
            where.append("started < ?")
            args.append(before)
        if text:
            where.append("(contains_folded(query, ?) OR contains_folded(answer, ?))")
            args.extend([text.casefold()] * 2)
        sql = f"SELECT record FROM runs WHERE {' AND '.join(where)} ORDER BY started DESC LIMIT ?"
        rows = await self._db.run(lambda db: db.execute(sql, (*args, max(limit, 0))).fetchall())
        return [RunRecord.from_dict(json.loads(row[0])) for row in rows]

    def prune(self, db: sqlite3.Connection) -> None:
        """Retention, in the caller's transaction: finished records beyond the count or the age."""
        if self.max_age_seconds:
            cutoff = time.time() - self.max_age_seconds
            db.execute("DELETE FROM runs WHERE ended IS NOT NULL AND ended < ?", (cutoff,))
            db.execute("DELETE FROM approvals WHERE decided IS NOT NULL AND decided < ?", (cutoff,))
        if self.max_runs:
            db.execute(
                "DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE ended IS NOT NULL "
                "ORDER BY started DESC LIMIT -1 OFFSET ?)",
                (self.max_runs,),
            )


def _contains_folded(haystack: str | None, needle: str) -> bool:
    return haystack is not None and needle in haystack.casefold()


class SqliteState:
    """The SQLite backend's ``State`` (see the module docstring)."""

    def __init__(self, database: _Database, limits: StateLimits, replica: str) -> None:
        self._database = database
        self._limits = limits
        self._replica = replica
        self._sessions = SqliteSessionStore(database, limits, replica)
        self._approvals = SqliteApprovalStore(database)
        self._runs = SqliteRunStore(database, limits)

    @property
    def replica(self) -> str:
        return self._replica

    @property
    def sessions(self) -> SqliteSessionStore:
        return self._sessions

    @property
    def approvals(self) -> SqliteApprovalStore:
        return self._approvals

    @property
    def runs(self) -> SqliteRunStore:
        return self._runs

    @property
    def limits(self) -> StateLimits:
        return self._limits

    @property
    def url(self) -> str:
        return self._database.url

    def _register(self, db: sqlite3.Connection) -> None:
        now = time.time()
        db.execute(
            "INSERT INTO replicas (id, host, pid, process, started, expires) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET expires = excluded.expires",
            (self._replica, HOST, os.getpid(), process_token(os.getpid()), now, now + self._limits.lease_seconds),
        )

    async def beat(self) -> None:
        def beat(db: sqlite3.Connection) -> None:
            self._register(db)
            self._runs.prune(db)

        await self._database.run(beat, write=True)
        await self._database.run(lambda db: db.execute("PRAGMA incremental_vacuum").fetchall())
        await self._database.checkpoint()

    async def recover(self) -> Recovery:
        return await self._database.run(self._recover, write=True)

    def _recover(self, db: sqlite3.Connection) -> Recovery:
        now = time.time()
        known = {
            id_: _alive(host, pid, process, expires, now)
            for id_, host, pid, process, expires in db.execute("SELECT id, host, pid, process, expires FROM replicas")
        }
        known[self._replica] = True

        def dead(replica: str) -> bool:
            return not known.get(replica, False)

        runs = 0
        for (data,) in db.execute("SELECT record FROM runs WHERE ended IS NULL").fetchall():
            record = RunRecord.from_dict(json.loads(data))
            if dead(record.replica):
                ended = replace(
                    record,
                    ended=now,
                    termination_reason="terminal_error",
                    detail=INTERRUPTED,
                    elapsed_ms=(now - record.started) * 1000,
                )
                db.execute(
                    "UPDATE runs SET ended = ?, reason = ?, record = ? WHERE id = ?",
                    (now, "terminal_error", _run_row(ended)[-1], record.id),
                )
                runs += 1
        approvals = 0
        for (data,) in db.execute("SELECT record FROM approvals WHERE decided IS NULL").fetchall():
            approval = Approval.from_record(json.loads(data))
            if dead(approval.replica):
                expired = Decision(False, f"expired: the run was {INTERRUPTED}", by="recovery", at=now)
                db.execute(
                    "UPDATE approvals SET decided = ?, record = ? WHERE id = ?",
                    (now, _record(replace(approval, decision=expired)), approval.id),
                )
                approvals += 1
        locks = 0
        for session_id, replica in db.execute("SELECT session_id, replica FROM session_locks").fetchall():
            if dead(replica):
                db.execute("DELETE FROM session_locks WHERE session_id = ? AND replica = ?", (session_id, replica))
                locks += 1
        for replica, alive in known.items():
            if not alive:
                db.execute("DELETE FROM replicas WHERE id = ?", (replica,))
        return Recovery(runs, approvals, locks)

    async def aclose(self) -> None:
        if self._database.closed:
            return
        try:
            with anyio.CancelScope(shield=True):
                await self._database.run(
                    lambda db: db.execute("DELETE FROM replicas WHERE id = ?", (self._replica,)), write=True
                )
        except StateError as exc:
            logger.warning("could not unregister replica %s: %s", self._replica, exc)
        finally:
            with anyio.CancelScope(shield=True):
                await self._database.close()


async def open_sqlite_state(url: str, *, limits: StateLimits, replica: str | None = None) -> SqliteState:
    """``sqlite:///PATH``: the file opened, checked and migrated, this process registered.

    Raises:
        ConfigError: the file cannot be used (see ``_sqlite_schema.connect``), naming ``state.url``.
    """
    path = database_path(url)
    db = await anyio.to_thread.run_sync(connect, path, url)
    db.create_function("contains_folded", 2, _contains_folded, deterministic=True)
    state = SqliteState(_Database(db, url), limits, replica or new_replica_id())
    try:
        await state._database.run(state._register, write=True)
    except BaseException:
        await state._database.close()
        raise
    return state
