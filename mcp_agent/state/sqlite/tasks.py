"""Tasks (``TaskRecord``) in the ``tasks`` table of the SQLite file, shared by the processes that
open it: a row per task with its record (JSON), when it expires, and whether a cancellation was
asked. ``put`` rewrites the record and leaves the ``cancel`` column alone, so an owner's rewrite
never loses a cancellation another process asked meanwhile. Expired rows are never answered and
are deleted on ``State.beat`` (``expire``).
"""

from __future__ import annotations

import json
import sqlite3
import time

from ..records import TaskRecord, to_json
from .database import Database, first_row


class SqliteTaskStore:
    """``TaskStore`` over the ``tasks`` table (see the module docstring)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def put(self, record: TaskRecord) -> None:
        row = (record.id, record.expires, to_json(record.to_dict()))
        await self._db.run(
            lambda db: db.execute(
                "INSERT INTO tasks (id, expires, record) VALUES (?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET expires = excluded.expires, record = excluded.record",
                row,
            ),
            write=True,
        )

    async def get(self, task_id: str) -> TaskRecord | None:
        now = time.time()
        row = await self._db.run(
            lambda db: first_row(
                db.execute("SELECT record, cancel FROM tasks WHERE id = ? AND expires > ?", (task_id, now))
            )
        )
        if row is None:
            return None
        return TaskRecord.from_dict(json.loads(row[0]), cancel_requested=bool(row[1]))

    async def request_cancel(self, task_id: str) -> bool:
        now = time.time()
        changed: int = await self._db.run(
            lambda db: (
                db.execute(
                    "UPDATE tasks SET cancel = 1 WHERE id = ? AND expires > ?", (task_id, now)
                ).rowcount
            ),
            write=True,
        )
        return changed > 0

    @staticmethod
    def expire(db: sqlite3.Connection, now: float) -> None:
        """Delete the expired tasks, in the caller's transaction."""
        db.execute("DELETE FROM tasks WHERE expires <= ?", (now,))
