"""The SQLite store's database: the file (opening it safely), its schema and the migrations
between versions, and ``Database``, the one connection every call of the store goes through
(with how a lock's holder is known to be alive).

``connect(path, url)`` opens (creating when missing) one database file, refuses what it cannot
use with a ``ConfigError`` naming ``state.url``, and never writes into a file that is not ours:

- a directory, a file without read or write permission, a folder that cannot be created:
  refused, nothing touched;
- garbage bytes or a damaged database (``PRAGMA quick_check``): refused, the file left as it is
  (move it away, or point ``state.url`` elsewhere, to start afresh);
- a database written by a newer mcp-agent (``PRAGMA user_version`` above ``SCHEMA_VERSION``):
  refused, so an older gateway never damages a newer one's data;
- a store that was there and whose data is not: an empty file (0 bytes: truncated, a copy that
  failed), or no file but its write-ahead log (``-wal``, not empty) left beside the path (the
  database deleted or moved away). Refused, nothing touched, rather than kept aside and replaced
  by a new store: the gateway would then start, looking healthy, with every conversation, run and
  approval gone, and the operator would learn it from the users; refused, the supervisor's log
  says which file and what to do (restore it, or delete it to start afresh), and a file that
  comes back (a volume mounted late, a restore) is used as it is.

Only those files tell "a store existed" from "a new path": not the other files of the state
folder (the tool cache, recordings), which outlive a deliberate ``rm state.db`` (the way to start
afresh) and are not there when ``state.url`` points elsewhere. So that an empty file can only be
a lost store, a new store is never seen half-made: it is made beside the path (``.NAME.new-*``,
schema and WAL mode) and hard-linked into place whole; of two processes creating it at once, one
links its file and the other opens that one.

The schema's version is ``PRAGMA user_version``. ``MIGRATIONS[n]`` takes a database from version
``n`` to ``n + 1``; all pending ones run in one transaction at open, so a crash mid-migration
leaves the old version whole. The file runs in WAL mode (readers never block the writer; two
processes on one machine share it, waiting up to ``BUSY_TIMEOUT`` seconds for each other's
writes) with ``synchronous=NORMAL``: a crash of the process loses nothing committed, a power
cut may lose the last commits but never leaves a damaged file.

A new file is the user's alone: made 0600 (in a folder created 0700) before SQLite opens it (the
file made beside the path, which the hard link keeps), because SQLite gives the ``-wal`` and
``-shm`` files it creates the database file's mode.

``Database`` runs one call at a time, on the event loop's thread when it need not wait, else in
a worker thread (``__init__.py`` says why calls run where they do). ``sqlite3.Error`` becomes
``StateError`` in ``Database.failures``, around every call on the connection (the statements of
``run``, the checkpoints of ``run``, ``beat`` and ``close``), and nowhere else: a full disk, an
I/O error, a lock held too long or a damaged file reach the gateway as ``StateError``, whatever
call met it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio

from ...exceptions import ConfigError, StateError
from ..folder import create_private, private_dirs

logger = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT = 10.0
"""Seconds a write waits for another process's write to finish before it fails."""


def _v1(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            owner TEXT,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            used REAL NOT NULL,
            runs INTEGER NOT NULL DEFAULT 0,
            messages INTEGER NOT NULL DEFAULT 0,
            transcript TEXT NOT NULL DEFAULT '[]'
        );
        CREATE INDEX sessions_by_use ON sessions (used);
        CREATE INDEX sessions_by_owner ON sessions (owner, used);
        CREATE TABLE session_locks (
            session_id TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            replica TEXT NOT NULL,
            expires REAL NOT NULL
        );
        CREATE TABLE approvals (
            id TEXT PRIMARY KEY,
            replica TEXT NOT NULL,
            created REAL NOT NULL,
            decided REAL,
            record TEXT NOT NULL
        );
        CREATE INDEX approvals_pending ON approvals (decided, created);
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            started REAL NOT NULL,
            ended REAL,
            caller TEXT,
            reason TEXT,
            replica TEXT NOT NULL,
            query TEXT NOT NULL,
            answer TEXT NOT NULL,
            record TEXT NOT NULL
        );
        CREATE INDEX runs_by_start ON runs (started);
        CREATE INDEX runs_by_caller ON runs (caller, started);
        CREATE INDEX runs_in_flight ON runs (replica) WHERE ended IS NULL;
        CREATE TABLE replicas (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            process TEXT,
            started REAL NOT NULL,
            expires REAL NOT NULL
        );
        """,
    )


def _v2(db: sqlite3.Connection) -> None:
    """Each approval's caller in a column of its own, indexed among the pending approvals: the
    caps ``add`` checks count them without reading a record (and without a walk of the table)."""
    db.execute("ALTER TABLE approvals ADD COLUMN caller TEXT")
    for approval_id, record in db.execute("SELECT id, record FROM approvals").fetchall():
        caller = json.loads(record).get("caller")
        db.execute("UPDATE approvals SET caller = ? WHERE id = ?", (caller, approval_id))
    db.execute("CREATE INDEX approvals_pending_by_caller ON approvals (caller) WHERE decided IS NULL")


def _v3(db: sqlite3.Connection) -> None:
    """Each owner's session count, kept by triggers (``session_owners``): the caps read an
    owner's count, and find the owners holding the most, without a walk of the sessions."""
    db.execute("CREATE TABLE session_owners (key TEXT PRIMARY KEY, owner TEXT, n INTEGER NOT NULL)")
    db.execute("CREATE INDEX session_owners_by_count ON session_owners (n)")
    db.execute(
        f"CREATE TRIGGER sessions_counted AFTER INSERT ON sessions BEGIN "
        f"INSERT INTO session_owners (key, owner, n) VALUES ({OWNER_KEY.format('NEW.owner')}, NEW.owner, 1) "
        f"ON CONFLICT (key) DO UPDATE SET n = n + 1; END"
    )
    db.execute(
        f"CREATE TRIGGER sessions_uncounted AFTER DELETE ON sessions BEGIN "
        f"UPDATE session_owners SET n = n - 1 WHERE key = {OWNER_KEY.format('OLD.owner')}; "
        f"DELETE FROM session_owners WHERE key = {OWNER_KEY.format('OLD.owner')} AND n <= 0; END"
    )
    db.execute(
        f"INSERT INTO session_owners (key, owner, n) "
        f"SELECT {OWNER_KEY.format('owner')}, owner, count(*) FROM sessions GROUP BY owner"
    )


OWNER_KEY = "ifnull('s:' || {}, 'n')"
"""``session_owners.key`` of an owner column (SQL): one key for every owner, NULL included."""


def owner_key(owner: str | None) -> str:
    """``OWNER_KEY``, in Python."""
    return "n" if owner is None else f"s:{owner}"


def _v4_pages(db: sqlite3.Connection) -> None:
    """Paged tool results of the sessions (``pages.py``): one row a result, one a page;
    a session's rows go with it, and ``page_totals`` keeps the sum of their sizes (triggers)."""
    for statement in (
        """CREATE TABLE paged_results (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            handle TEXT NOT NULL,
            tool TEXT NOT NULL,
            pages INTEGER NOT NULL,
            total_chars INTEGER NOT NULL,
            kept_chars INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            used INTEGER,
            evicted INTEGER,
            PRIMARY KEY (session_id, handle)
        )""",
        "CREATE INDEX paged_results_by_use ON paged_results (used)",
        "CREATE INDEX paged_results_of_session ON paged_results (session_id, used)",
        """CREATE TABLE result_pages (
            session_id TEXT NOT NULL,
            handle TEXT NOT NULL,
            number INTEGER NOT NULL,
            start INTEGER NOT NULL,
            text BLOB NOT NULL,
            PRIMARY KEY (session_id, handle, number),
            FOREIGN KEY (session_id, handle) REFERENCES paged_results (session_id, handle) ON DELETE CASCADE
        )""",
        "CREATE TABLE page_totals (id INTEGER PRIMARY KEY CHECK (id = 1), bytes INTEGER NOT NULL, clock INTEGER NOT NULL)",
        "INSERT INTO page_totals (id, bytes, clock) VALUES (1, 0, 0)",
        """CREATE TRIGGER paged_results_added AFTER INSERT ON paged_results BEGIN
            UPDATE page_totals SET bytes = bytes + NEW.bytes WHERE id = 1;
        END""",
        """CREATE TRIGGER paged_results_resized AFTER UPDATE OF bytes ON paged_results BEGIN
            UPDATE page_totals SET bytes = bytes + NEW.bytes - OLD.bytes WHERE id = 1;
        END""",
        """CREATE TRIGGER paged_results_dropped AFTER DELETE ON paged_results BEGIN
            UPDATE page_totals SET bytes = bytes - OLD.bytes WHERE id = 1;
        END""",
    ):
        db.execute(statement)


def _v5_tasks(db: sqlite3.Connection) -> None:
    """Tasks of the MCP Tasks extension (``tasks.py``): the record, when it expires, and whether
    a cancellation was asked (a column of its own: the owner's rewrites never clear it)."""
    db.execute(
        "CREATE TABLE tasks (id TEXT PRIMARY KEY, expires REAL NOT NULL, "
        "cancel INTEGER NOT NULL DEFAULT 0, record TEXT NOT NULL)"
    )
    db.execute("CREATE INDEX tasks_by_expiry ON tasks (expires)")


def _v6_pins(db: sqlite3.Connection) -> None:
    """Tool definitions pinned and last seen, per server (``pins.py``)."""
    db.execute(
        "CREATE TABLE tool_pins (server TEXT NOT NULL, kind TEXT NOT NULL, record TEXT NOT NULL, "
        "PRIMARY KEY (server, kind))"
    )


def _script(db: sqlite3.Connection, script: str) -> None:
    """Each statement of ``script``, inside the caller's transaction (``executescript`` would
    commit it first)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


MIGRATIONS: Sequence[Callable[[sqlite3.Connection], None]] = (_v1, _v2, _v3, _v4_pages, _v5_tasks, _v6_pins)
"""``MIGRATIONS[n]`` upgrades version ``n`` to ``n + 1`` (0 is a new, empty file). A new version
appends a step here; the steps already released never change."""
SCHEMA_VERSION = len(MIGRATIONS)


def database_path(url: str) -> Path:
    """The file of ``sqlite:///PATH`` (``~`` expanded; ``sqlite:////abs`` is ``/abs``).

    Raises:
        ConfigError: the URL has no path, or a host (``sqlite://host/…``).
    """
    rest = url.split("://", 1)[1] if "://" in url else ""
    if not rest.startswith("/"):
        raise ConfigError(
            f"state.url {url!r}: write sqlite:///PATH (three slashes; a host is not allowed)", "state.url"
        )
    path = rest[1:]
    if not path or path.endswith("/"):
        raise ConfigError(f"state.url {url!r}: no database file named after sqlite:///", "state.url")
    return Path(os.path.expanduser(path))


CANNOT_USE = (
    "cannot open or create the database ({}); nothing in it was changed: check the disk (free space, "
    "I/O errors) and the permissions of the file and its folder, then start again"
)
"""Why a store's file cannot be used when SQLite itself fails on it (not its content)."""


def connect(path: Path, url: str) -> sqlite3.Connection:
    """Open the store's file, checked and migrated (see the module docstring).

    Raises:
        ConfigError: the file cannot be used; the message names ``state.url`` and the path.
    """
    where = f"state.url {url!r} ({path})"
    if path.is_dir():
        raise ConfigError(f"{where}: is a directory, not a database file", "state.url")
    try:
        private_dirs(path.parent)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot create its folder: {exc.strerror or exc}", "state.url") from None
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise ConfigError(f"{where}: no permission to read and write it", "state.url")
    _refuse_a_lost_store(path, where)
    db: sqlite3.Connection | None = None
    try:
        if not os.path.lexists(path):
            _create(path)
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        _check(db, where)
        _configure(db)
        migrate(db)
    except (sqlite3.Error, OSError) as exc:
        if db is not None:
            db.close()
        raise ConfigError(f"{where}: {CANNOT_USE.format(exc)}", "state.url") from None
    except ConfigError:
        if db is not None:
            db.close()
        raise
    return db


def _refuse_a_lost_store(path: Path, where: str) -> None:
    """Refuse a path where a store was and its data is not (see the module docstring)."""
    wal = path.with_name(f"{path.name}-wal")
    try:
        size: int | None = path.stat().st_size
    except FileNotFoundError:
        size = None
    except OSError:
        return  # SQLite's own open says what is wrong
    if size == 0:
        raise ConfigError(
            f"{where}: the file is empty (0 bytes): a store was here and what it held is gone (the file was "
            "truncated, or a copy of it failed); it was left untouched: restore it from a backup, or delete it "
            "to start a fresh store",
            "state.url",
        )
    if size is None and wal.is_file() and wal.stat().st_size > 0:
        raise ConfigError(
            f"{where}: the database file is missing but its write-ahead log {wal} is there (the database was "
            f"deleted or moved away); put it back, or delete {wal.name} and {path.name}-shm to start a fresh store",
            "state.url",
        )


def _create(path: Path) -> None:
    """A new store at ``path``, made beside it and hard-linked into place whole (see the module
    docstring); when another process linked its own first, that one stays.

    Raises:
        sqlite3.Error, OSError: it could not be made.
    """
    temporary = path.with_name(f".{path.name}.new-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        create_private(temporary)  # 0600 before SQLite opens it: its journal, -wal and -shm then are too
        db = sqlite3.connect(temporary, isolation_level=None)
        try:
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # before the first table: freed pages can go back
            migrate(db)  # in the rollback journal: all of it is in the file when it commits
            db.execute("PRAGMA journal_mode = WAL")
        finally:
            db.close()
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made it first: that one is the store
        except OSError:  # a file system without hard links
            if not os.path.lexists(path):
                os.replace(temporary, path)
    finally:
        for leftover in [
            temporary,
            *(temporary.with_name(f"{temporary.name}-{end}") for end in ("journal", "wal", "shm")),
        ]:
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _check(db: sqlite3.Connection, where: str) -> None:
    """Refuse a file that is not a sound SQLite database (reads only)."""
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        problems = [row[0] for row in db.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.OperationalError:
        raise  # the disk, not the file: a full disk, an I/O error, a lock (connect says so)
    except sqlite3.DatabaseError as exc:
        raise ConfigError(
            f"{where}: not a readable mcp-agent database ({exc}); it was left untouched: move it away "
            "or point state.url elsewhere to start afresh",
            "state.url",
        ) from None
    if problems != ["ok"]:
        raise ConfigError(
            f"{where}: the database is damaged ({'; '.join(problems)}); it was left untouched: recover it "
            "with `sqlite3 FILE .recover`, or move it away to start afresh",
            "state.url",
        )
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"{where}: written by a newer mcp-agent (schema {version}; this one knows up to "
            f"{SCHEMA_VERSION}); upgrade mcp-agent or point state.url elsewhere",
            "state.url",
        )


def _configure(db: sqlite3.Connection) -> None:
    if db.execute("PRAGMA user_version").fetchone()[0] == 0:
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # before the first table: freed pages can go back
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise sqlite3.OperationalError(f"cannot switch to WAL mode (journal_mode is {mode})")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA journal_size_limit = 4194304")  # the WAL file shrinks back to 4 MB after checkpoints
    db.execute("PRAGMA foreign_keys = ON")


def migrate(
    db: sqlite3.Connection, migrations: Sequence[Callable[[sqlite3.Connection], None]] = MIGRATIONS
) -> int:
    """Bring the database up to ``len(migrations)``, every pending step in one transaction (a
    crash leaves the old version whole); the version it was at."""
    db.execute("BEGIN IMMEDIATE")
    try:
        # read again: another process may have migrated
        version: int = db.execute("PRAGMA user_version").fetchone()[0]
        for step in range(version, len(migrations)):
            migrations[step](db)
        if version < len(migrations):
            db.execute(f"PRAGMA user_version = {len(migrations)}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return version


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
