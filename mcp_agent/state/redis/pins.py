"""Tool pins (``ToolPin``) in Redis, visible to every replica: one hash per kind,
``pins:<kind>``, mapping each server's name to its record (JSON). ``put`` replaces the field;
records are kept until replaced.
"""

from __future__ import annotations

import builtins
import json

from ..records import ToolPin, to_json
from .backend import Backend
from .backend import text as as_text


class RedisPinStore:
    """The ``PinStore`` of the Redis backend (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._prefix = backend.keys.prefix

    def _key(self, kind: str) -> str:
        return f"{self._prefix}pins:{kind}"

    async def put(self, pin: ToolPin) -> None:
        with self._backend.failures(f"storing the {pin.kind} tools of server {pin.server!r}"):
            await self._backend.client.hset(self._key(pin.kind), pin.server, to_json(pin.to_dict()))

    async def get(self, server: str, kind: str = "pinned") -> ToolPin | None:
        with self._backend.failures(f"reading the {kind} tools of server {server!r}"):
            data = await self._backend.client.hget(self._key(kind), server)
        text = as_text(data)
        return None if text is None else ToolPin.from_dict(json.loads(text))

    async def list(self, kind: str = "pinned") -> builtins.list[ToolPin]:
        with self._backend.failures(f"reading the {kind} tool pins"):
            values = await self._backend.client.hgetall(self._key(kind))
        pins = [ToolPin.from_dict(json.loads(t)) for v in values.values() if (t := as_text(v)) is not None]
        return sorted(pins, key=lambda pin: pin.server)
