"""``sqlite:///PATH``: conversations, approvals and run records in one SQLite file.

This module is the store (``SqliteState``, with its approvals and run records) and
``open_sqlite_state``; beside it, ``database.py`` (the file, its schema and migrations, the one
connection), ``sessions.py`` (conversations and their locks), ``pages.py`` (paged results) and
``tasks.py`` (the tasks of the MCP Tasks extension).

The default store of ``serve`` and ``query --session``. Stdlib ``sqlite3`` on one connection,
one call at a time (``Database``): on the event loop's thread when the call has nothing to wait
for (tens of microseconds: WAL commits do not sync, checkpoints are moved off the loop), else
in an anyio worker thread, which waits for another process's write lock up to
``BUSY_TIMEOUT``. Why not always a thread: two thread switches per call, six calls per query,
cost more than the work itself (``bench/bench_state.py``); why not ``aiosqlite``: it is that
same thread per call. Every operation is one transaction (``BEGIN IMMEDIATE`` for writes), so
a transcript is saved whole or not at all, and a process killed at any point leaves a readable
database (WAL mode; ``database.py`` opens, checks and migrates the file).

Two processes on one machine may share the file:

- a session's lock is a row in ``session_locks`` with a lease (``lease_seconds``, renewed by the
  holder every third of it). A run in another process waits for it (polling, from 20 ms up to
  ``POLL_SECONDS``); runs of this process queue on an in-process lock first. A lease whose
  holder's process is gone (same host, its pid dead) or that lapsed is taken over; the save
  checks, in its write transaction, that the lock is still its hold's (``LeaseLost`` if not:
  a stalled run never writes over the run that took its lock);
- an approval's ``add`` counts the pending ones (in all, and its caller's: from indexes, no
  record is read) and inserts it in one write transaction, so processes adding at once never
  overshoot ``approvals.maxPending`` or a caller's share of it;
- a decision on an approval wakes a waiter in this process at once, and one in another process
  within ``POLL_SECONDS`` (it polls the row);
- each process registers itself in ``replicas`` (``beat`` renews it) so that ``recover`` can
  tell which in-flight runs and pending approvals were left by a process that died;
- the paged results of a session (``pages.py``) are rows that go with the session's, so
  a run in one process reads the pages a run in another process paged.

``sqlite3.Error`` is translated to ``StateError`` in one place (``Database.failures``), and
``beat`` also checks that the file is still the one opened (``Database.check_file``). Transcripts
read lately are kept parsed (``PARSED_SESSIONS``), by version, so a conversation's next turn
does not parse its JSON again.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from dataclasses import replace
from typing import Any

import anyio

from ...exceptions import ConfigError, StateError
from ..records import (
    INTERRUPTED,
    Approval,
    Decision,
    Recovery,
    RunRecord,
    StateLimits,
    check_room,
    new_replica_id,
    to_json,
)
from .database import (
    CANNOT_USE,
    HOST,
    POLL_SECONDS,
    Database,
    connect,
    database_path,
    first_row,
    holder_alive,
    process_token,
)
from .pages import SqlitePageStore
from .pins import SqlitePinStore
from .sessions import SqliteSessionStore
from .tasks import SqliteTaskStore

logger = logging.getLogger(__name__)

__all__ = [
    "SqliteApprovalStore",
    "SqlitePageStore",
    "SqliteRunStore",
    "SqliteSessionStore",
    "SqliteState",
    "SqliteTaskStore",
    "open_sqlite_state",
]

PRUNE_EVERY = 100
"""Retention is applied after this many ``RunStore.end`` calls (and on every ``beat``)."""


def _record(approval: Approval) -> str:
    return to_json(approval.to_record())


def _count(db: sqlite3.Connection, where: str, *args: Any) -> int:
    """How many approvals are pending (and match ``where``): read from an index, never a record."""
    row = db.execute(f"SELECT count(*) FROM approvals WHERE decided IS NULL {where}", args).fetchone()
    return int(row[0])


class SqliteApprovalStore:
    """Approvals in the ``approvals`` table (the whole record as JSON, plus what is queried)."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._decided: dict[str, anyio.Event] = {}  # waiters in this process

    async def add(self, approval: Approval, *, max_pending: int = 0, max_per_caller: int = 0) -> None:
        decided = approval.decision.at if approval.decision is not None else None
        caller = approval.caller

        def add(db: sqlite3.Connection) -> None:  # one write transaction: the counts, then the insert
            if approval.pending and (max_pending or max_per_caller):
                waiting = _count(db, "") if max_pending else 0
                mine = _count(db, "AND caller = ?", caller) if max_per_caller and caller is not None else 0
                check_room(
                    waiting, mine, max_pending=max_pending, max_per_caller=max_per_caller, caller=caller
                )
            db.execute(
                "INSERT INTO approvals (id, replica, created, decided, caller, record) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (approval.id, approval.replica, approval.created, decided, caller, _record(approval)),
            )

        await self._db.run(add, write=True)

    async def decide(self, approval_id: str, decision: Decision) -> bool:
        def decide(db: sqlite3.Connection) -> bool:
            row = first_row(
                db.execute("SELECT record FROM approvals WHERE id = ? AND decided IS NULL", (approval_id,))
            )
            if row is None:
                return False
            decided = replace(Approval.from_record(json.loads(row[0])), decision=decision)
            db.execute(
                "UPDATE approvals SET decided = ?, record = ? WHERE id = ?",
                (decision.at, _record(decided), approval_id),
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
            lambda db: first_row(db.execute("SELECT record FROM approvals WHERE id = ?", (approval_id,)))
        )
        return None if row is None else Approval.from_record(json.loads(row[0]))

    async def pending(self) -> list[Approval]:
        rows = await self._db.run(
            lambda db: db.execute(
                "SELECT record FROM approvals WHERE decided IS NULL ORDER BY created"
            ).fetchall()
        )
        return [Approval.from_record(json.loads(row[0])) for row in rows]


def clean_text(text: str) -> str:
    """``text`` with anything UTF-8 cannot encode replaced (``?``): a column that is only searched
    gets a UTF-8-safe copy (the record itself is kept exact, by ``to_json``)."""
    return text.encode("utf-8", "replace").decode("utf-8")


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

    def __init__(self, database: Database, limits: StateLimits) -> None:
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
                "INSERT INTO runs (id, started, ended, caller, reason, replica, query, answer, record) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET started = excluded.started, "
                "ended = excluded.ended, caller = excluded.caller, reason = excluded.reason, "
                "replica = excluded.replica, query = excluded.query, answer = excluded.answer, "
                "record = excluded.record",
                row,
            ),
            write=True,
        )

    async def get(self, run_id: str) -> RunRecord | None:
        row = await self._db.run(
            lambda db: first_row(db.execute("SELECT record FROM runs WHERE id = ?", (run_id,)))
        )
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

    def __init__(self, database: Database, limits: StateLimits, replica: str) -> None:
        self._database = database
        self._limits = limits
        self._replica = replica
        self._sessions = SqliteSessionStore(database, limits, replica)
        self._approvals = SqliteApprovalStore(database)
        self._runs = SqliteRunStore(database, limits)
        self._pages = SqlitePageStore(database, limits)
        self._tasks = SqliteTaskStore(database)
        self._pins = SqlitePinStore(database)

    @property
    def replica(self) -> str:
        return self._replica

    @property
    def events(self) -> None:
        """None: SQLite carries no run events between replicas (each replica's event streams
        show its own runs)."""
        return None

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
    def pages(self) -> SqlitePageStore:
        return self._pages

    @property
    def tasks(self) -> SqliteTaskStore:
        return self._tasks

    @property
    def pins(self) -> SqlitePinStore:
        return self._pins

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
            (
                self._replica,
                HOST,
                os.getpid(),
                process_token(os.getpid()),
                now,
                now + self._limits.lease_seconds,
            ),
        )

    async def beat(self) -> None:
        self._database.check_file()

        def beat(db: sqlite3.Connection) -> None:
            self._register(db)
            self._runs.prune(db)
            self._sessions.expire(db, time.time())
            self._tasks.expire(db, time.time())

        await self._database.run(beat, write=True)
        await self._database.run(lambda db: db.execute("PRAGMA incremental_vacuum").fetchall())
        await self._database.checkpoint()

    async def recover(self) -> Recovery:
        return await self._database.run(self._recover, write=True)

    def _recover(self, db: sqlite3.Connection) -> Recovery:
        now = time.time()
        known = {
            id_: holder_alive(host, pid, process, expires, now)
            for id_, host, pid, process, expires in db.execute(
                "SELECT id, host, pid, process, expires FROM replicas"
            )
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
                db.execute(
                    "DELETE FROM session_locks WHERE session_id = ? AND replica = ?", (session_id, replica)
                )
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
        ConfigError: the file cannot be used (see ``database.connect``), naming ``state.url``.
    """
    path = database_path(url)
    db = await anyio.to_thread.run_sync(connect, path, url)
    db.create_function("contains_folded", 2, _contains_folded, deterministic=True)
    state = SqliteState(Database(db, url, path), limits, replica or new_replica_id())
    try:
        await state._database.run(state._register, write=True)
    except StateError as exc:  # its first write (a full disk: no room for the WAL)
        await state._database.close()
        raise ConfigError(
            f"state.url {url!r} ({path}): {CANNOT_USE.format(exc.__cause__ or exc)}", "state.url"
        ) from None
    except BaseException:
        await state._database.close()
        raise
    return state
