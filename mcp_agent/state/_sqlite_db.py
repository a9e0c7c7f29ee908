"""The SQLite store's connection: one call at a time, on the event loop's thread when it need
not wait, else in a worker thread (``Database``); and how a holder is known to be alive.

See ``sqlite.py`` for why calls run where they do. ``sqlite3.Error`` becomes ``StateError``
here, in ``Database.failures``, around every call on the connection (the statements of ``run``,
the checkpoints of ``run``, ``beat`` and ``close``), and nowhere else: a full disk, an I/O error, a
lock held too long or a damaged file reach the gateway as ``StateError``, whatever call met it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio

from ..exceptions import StateError
from ._sqlite_schema import BUSY_TIMEOUT

logger = logging.getLogger(__name__)

T = TypeVar("T")

POLL_SECONDS = 0.25
"""The longest wait between two looks at a lock or an approval another process holds."""
CHECKPOINT_EVERY = 100
"""Writes between two checkpoints of the WAL (besides the one on every ``beat``)."""
HOST = socket.gethostname()


def pid_alive(pid: int) -> bool:
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


def holder_alive(host: str | None, pid: int | None, process: str | None, expires: float, now: float) -> bool:
    """Whether a holder (a replica, or a lock's holder) is alive: on this host, whether its
    process still runs (the same process: a pid reused later has another start time);
    elsewhere, whether its lease has not lapsed."""
    if host == HOST and pid is not None:
        return pid_alive(pid) and (process is None or process_token(pid) in (None, process))
    return expires > now


def first_row(cursor: sqlite3.Cursor) -> Any:
    """The first row of a query, or None; the statement is run to its end, so that none is left
    in progress (an unfinished one would stop the transaction's commit)."""
    rows = cursor.fetchall()
    return rows[0] if rows else None


def write_transaction(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
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


class Database:
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

    def __init__(self, db: sqlite3.Connection, url: str, path: Path | None = None) -> None:
        self.db = db
        self.url = url
        self.path = Path(os.path.abspath(path)) if path is not None else None
        self.closed = False
        self._limiter = anyio.CapacityLimiter(1)
        self._writes = 0
        self._identity = _identity(self.path) if self.path is not None else None
        self.lost: str | None = None
        """Why the file opened is no longer the store (``check_file`` found it), or None: every
        call fails with it, rather than read a stale cache or write where nobody will look."""
        db.execute("PRAGMA busy_timeout = 0")
        db.execute("PRAGMA wal_autocheckpoint = 0")

    @contextlib.contextmanager
    def failures(self) -> Iterator[None]:
        """Raise ``sqlite3.Error`` again as ``StateError`` naming ``state.url`` (STYLE rule 14)."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StateError(f"state.url {self.url!r}: {type(exc).__name__}: {exc}") from exc

    async def run(self, work: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        if self.closed:
            raise StateError(f"state.url {self.url!r}: the store is closed")
        if self.lost is not None:
            raise StateError(self.lost)
        if write:
            self._writes += 1
            if self._writes % CHECKPOINT_EVERY == 0:
                try:
                    await self.checkpoint()
                except (
                    StateError
                ) as exc:  # upkeep, not this write's: the next beat tries again and reports it
                    logger.warning("%s (a checkpoint of the WAL)", exc)
        with self.failures():
            if self._limiter.borrowed_tokens == 0:  # nobody else on the connection: try at once
                try:
                    return write_transaction(self.db, work) if write else work(self.db)
                except sqlite3.OperationalError as exc:
                    if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _BUSY:
                        raise
            return await anyio.to_thread.run_sync(self._waiting, work, write, limiter=self._limiter)

    def _waiting(self, work: Callable[[sqlite3.Connection], T], write: bool) -> T:
        """``work`` in a worker thread, waiting for another process's write lock if need be."""
        self.db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        try:
            return write_transaction(self.db, work) if write else work(self.db)
        finally:
            self.db.execute("PRAGMA busy_timeout = 0")

    async def checkpoint(self) -> None:
        """Copy the WAL back into the database file (in a worker thread; never waits for readers).

        Raises:
            StateError: it failed (a full disk: the file cannot grow; an I/O error).
        """
        with self.failures():
            await anyio.to_thread.run_sync(
                self.db.execute, "PRAGMA wal_checkpoint(PASSIVE)", limiter=self._limiter
            )

    def check_file(self) -> None:
        """Raise ``StateError`` when the file opened is no longer at its path (deleted, moved away
        or replaced under the running process: SQLite goes on writing into the file it holds,
        which nobody will open again, so the writes would be lost without a word), or was emptied
        (SQLite answers from its cache for a while, then calls the file malformed). Until a later
        check finds the file back (moved back into place), every ``run`` fails the same way.

        Raises:
            StateError: the file is gone or another one is in its place (the message says what to do).
        """
        if self.path is None or self._identity is None:
            return
        try:
            found = _identity(self.path)
            emptied = found == self._identity and self.path.stat().st_size == 0
        except OSError as exc:
            raise StateError(
                f"state.url {self.url!r}: cannot look at {self.path}: {exc.strerror or exc}"
            ) from exc
        self.lost = None
        if emptied:
            self.lost = (
                f"state.url {self.url!r}: the database file {self.path} was emptied (truncated to 0 bytes) while "
                "this process used it; what it held is gone: stop it and restore the file from a backup (or delete "
                "it, and its -wal and -shm, to start afresh)"
            )
        elif found != self._identity:
            what = "deleted or moved away" if found is None else "replaced by another file"
            self.lost = (
                f"state.url {self.url!r}: the database file {self.path} was {what} while this process used it: "
                "put it back, or stop this process (what it stored since is not in the file) and move the -wal "
                "and -shm away too, to start afresh"
            )
        if self.lost is not None:
            raise StateError(self.lost)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.lost is None:  # never copy pages into a file that is not the store any more
                with contextlib.suppress(StateError):
                    await self.checkpoint()
            await anyio.to_thread.run_sync(self.db.close, limiter=self._limiter)


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` is (device and inode), or None when there is none.

    Raises:
        OSError: it cannot be looked at (other than missing).
    """
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


_BUSY = frozenset({sqlite3.SQLITE_BUSY})
