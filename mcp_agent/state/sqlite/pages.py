"""The SQLite store's paged results: ``SqlitePageStore`` (the tables are ``database._v4_pages``).

A result is a row of ``paged_results`` (its session, handle, tool, sizes, and ``used``: a logical
clock from ``page_totals``, bumped by every put and read, so least recently used is the smallest),
its pages rows of ``result_pages`` (each page's UTF-8 bytes, a lone surrogate kept as such, and
where it starts). Reading a page reads that one row. A row belongs to its session (a foreign key
with ``ON DELETE CASCADE``): whichever way a session goes (deleted, expired, evicted), its results
go in the same statement. Triggers keep ``page_totals.bytes``, the sum of every result's size, so
the total cap costs one row read and then what it evicts, through the index on ``used``.

An evicted result keeps its row as a tombstone (``used`` NULL, ``evicted`` set, its pages gone):
reading it answers "expired"; each session keeps the last ``EXPIRED_KEPT``.

Every operation is one call of the store's ``Database``, one transaction (reads write too: they
mark the result used).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..records import EXPIRED_KEPT, Page, PageInfo, StateLimits, new_page_handle, paged_size
from .database import Database, first_row

_INFO = "handle, tool, pages, total_chars, kept_chars, bytes"


def _info(row: Sequence[Any]) -> PageInfo:
    handle, tool, pages, total, kept, size = row
    return PageInfo(str(handle), str(tool), int(pages), int(total), int(kept), int(size))


class SqlitePageStore:
    """The ``PageStore`` of the SQLite backend (see the module docstring)."""

    def __init__(self, database: Database, limits: StateLimits) -> None:
        self._db = database
        self.max_bytes = limits.max_paged_bytes_total

    async def put(
        self, scope: str, tool: str, pages: Sequence[str], total_chars: int, *, max_scope_bytes: int = 0
    ) -> PageInfo | None:
        kept = tuple(pages)
        size = paged_size(kept)
        rows, at = [], 0
        for number, page in enumerate(kept, 1):
            rows.append((number, at, page.encode("utf-8", "surrogatepass")))
            at += len(page)

        def put(db: sqlite3.Connection) -> PageInfo | None:
            if first_row(db.execute("SELECT 1 FROM sessions WHERE id = ?", (scope,))) is None:
                return None
            self._make_room(db, scope, size, max_scope_bytes)
            handle = new_page_handle()
            while first_row(
                db.execute("SELECT 1 FROM paged_results WHERE session_id = ? AND handle = ?", (scope, handle))
            ):
                handle = new_page_handle()
            db.execute(
                "INSERT INTO paged_results (session_id, handle, tool, pages, total_chars, kept_chars, bytes, used) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (scope, handle, tool, len(kept), total_chars, at, size, _tick(db)),
            )
            db.executemany(
                "INSERT INTO result_pages (session_id, handle, number, start, text) VALUES (?, ?, ?, ?, ?)",
                [(scope, handle, *row) for row in rows],
            )
            return PageInfo(handle, tool, len(kept), total_chars, at, size)

        return await self._db.run(put, write=True)

    async def read(self, scope: str, handle: str, number: int) -> Page | None:
        def read(db: sqlite3.Connection) -> Page | None:
            row = first_row(
                db.execute(
                    f"SELECT {_INFO}, used FROM paged_results WHERE session_id = ? AND handle = ?",
                    (scope, handle),
                )
            )
            if row is None:
                return None
            if row[-1] is None:
                return Page(handle, number, None)
            info = _info(row[:-1])
            db.execute(
                "UPDATE paged_results SET used = ? WHERE session_id = ? AND handle = ?",
                (_tick(db), scope, handle),
            )
            if not 1 <= number <= info.pages:
                return Page(handle, number, info)
            start, text = first_row(
                db.execute(
                    "SELECT start, text FROM result_pages WHERE session_id = ? AND handle = ? AND number = ?",
                    (scope, handle, number),
                )
            )
            return Page(handle, number, info, int(start), bytes(text).decode("utf-8", "surrogatepass"))

        return await self._db.run(read, write=True)

    async def entries(self, scope: str) -> list[PageInfo]:
        rows = await self._db.run(
            lambda db: db.execute(
                f"SELECT {_INFO} FROM paged_results WHERE session_id = ? AND used > 0 ORDER BY used", (scope,)
            ).fetchall()
        )
        return [_info(row) for row in rows]

    async def release(self, scope: str) -> None:
        await self._db.run(
            lambda db: db.execute("DELETE FROM paged_results WHERE session_id = ?", (scope,)), write=True
        )

    def _make_room(self, db: sqlite3.Connection, scope: str, size: int, max_scope_bytes: int) -> None:
        """Evict the scope's least recently used results beyond its cap, then anyone's beyond
        the total cap (each step reads one row through an index)."""
        if max_scope_bytes:
            held = first_row(
                db.execute("SELECT total(bytes) FROM paged_results WHERE session_id = ?", (scope,))
            )[0]
            while held + size > max_scope_bytes:
                victim = first_row(
                    db.execute(
                        "SELECT handle, bytes FROM paged_results WHERE session_id = ? AND used > 0 "
                        "ORDER BY used LIMIT 1",
                        (scope,),
                    )
                )
                if victim is None:
                    break
                _evict(db, scope, victim[0])
                held -= victim[1]
        if self.max_bytes:
            (total,) = first_row(db.execute("SELECT bytes FROM page_totals WHERE id = 1"))
            while total + size > self.max_bytes:
                victim = first_row(
                    db.execute(
                        "SELECT session_id, handle, bytes FROM paged_results WHERE used > 0 ORDER BY used LIMIT 1"
                    )
                )
                if victim is None:
                    break
                _evict(db, victim[0], victim[1])
                total -= victim[2]


def _tick(db: sqlite3.Connection) -> int:
    """The next value of the logical clock that orders uses."""
    (clock,) = db.execute("UPDATE page_totals SET clock = clock + 1 WHERE id = 1 RETURNING clock").fetchall()[
        0
    ]
    return int(clock)


def _evict(db: sqlite3.Connection, scope: str, handle: str) -> None:
    """Drop a result's pages, keep its row as a tombstone, and only the scope's last
    ``EXPIRED_KEPT`` tombstones."""
    db.execute("DELETE FROM result_pages WHERE session_id = ? AND handle = ?", (scope, handle))
    db.execute(
        "UPDATE paged_results SET bytes = 0, used = NULL, evicted = ? WHERE session_id = ? AND handle = ?",
        (_tick(db), scope, handle),
    )
    db.execute(
        "DELETE FROM paged_results WHERE session_id = ? AND handle IN (SELECT handle FROM paged_results "
        "WHERE session_id = ? AND evicted IS NOT NULL ORDER BY evicted DESC LIMIT -1 OFFSET ?)",
        (scope, scope, EXPIRED_KEPT),
    )
