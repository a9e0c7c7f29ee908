"""Tool pins (``ToolPin``) in the ``tool_pins`` table of the SQLite file, shared by the processes
that open it: a row per server and kind (``pinned``, ``seen``) with its record (JSON). ``put``
replaces the row; rows are kept until replaced.
"""

from __future__ import annotations

import builtins
import json

from ..records import ToolPin, to_json
from .database import Database, first_row


class SqlitePinStore:
    """``PinStore`` over the ``tool_pins`` table (see the module docstring)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def put(self, pin: ToolPin) -> None:
        row = (pin.server, pin.kind, to_json(pin.to_dict()))
        await self._db.run(
            lambda db: db.execute(
                "INSERT INTO tool_pins (server, kind, record) VALUES (?, ?, ?) "
                "ON CONFLICT (server, kind) DO UPDATE SET record = excluded.record",
                row,
            ),
            write=True,
        )

    async def get(self, server: str, kind: str = "pinned") -> ToolPin | None:
        row = await self._db.run(
            lambda db: first_row(
                db.execute("SELECT record FROM tool_pins WHERE server = ? AND kind = ?", (server, kind))
            )
        )
        return None if row is None else ToolPin.from_dict(json.loads(row[0]))

    async def list(self, kind: str = "pinned") -> builtins.list[ToolPin]:
        rows = await self._db.run(
            lambda db: db.execute(
                "SELECT record FROM tool_pins WHERE kind = ? ORDER BY server", (kind,)
            ).fetchall()
        )
        return [ToolPin.from_dict(json.loads(row[0])) for row in rows]
