"""Tasks (``TaskRecord``) in Redis, visible to every replica: a task is one JSON string,
``task:<id>``, that Redis itself drops when the task expires (``PXAT``); a cancellation asked is
``task:<id>:cancel``, with the same expiry, so an owner's rewrite of the record never loses it.
"""

from __future__ import annotations

import json
import math

from ..records import TaskRecord, to_json
from .backend import Backend
from .backend import text as as_text

REQUEST_CANCEL = """
-- KEYS: task key, its cancel key
-- Marks a live task's cancellation as asked, expiring with the task: 1; 0 for no such task.
local left = redis.call('PTTL', KEYS[1])
if left <= 0 then return 0 end
redis.call('SET', KEYS[2], '1', 'PX', left)
return 1
"""


def _at_ms(wall: float) -> int:
    return max(math.ceil(wall * 1000), 1)


class RedisTaskStore:
    """The ``TaskStore`` of the Redis backend (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._prefix = backend.keys.prefix
        self._cancel_script = backend.client.register_script(REQUEST_CANCEL)

    def _key(self, task_id: str) -> str:
        return f"{self._prefix}task:{task_id}"

    async def put(self, record: TaskRecord) -> None:
        with self._backend.failures(f"storing task {record.id!r}"):
            await self._backend.client.set(
                self._key(record.id), to_json(record.to_dict()), pxat=_at_ms(record.expires)
            )

    async def get(self, task_id: str) -> TaskRecord | None:
        key = self._key(task_id)
        with self._backend.failures(f"reading task {task_id!r}"):
            data, cancel = await self._backend.client.mget([key, f"{key}:cancel"])
        text = as_text(data)
        if text is None:
            return None
        return TaskRecord.from_dict(json.loads(text), cancel_requested=cancel is not None)

    async def request_cancel(self, task_id: str) -> bool:
        key = self._key(task_id)
        with self._backend.failures(f"cancelling task {task_id!r}"):
            done = await self._cancel_script(keys=[key, f"{key}:cancel"])
        return bool(done)
