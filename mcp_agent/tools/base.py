"""The ToolSource protocol: what the loop needs from the tools, and nothing more."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .._types import JSONObject
from ..messages import ToolResult, ToolSpec


class ToolSource(Protocol):
    """A set of callable tools, named by exposed names.

    ``list_tools`` returns the tools available now (a snapshot; cheap, no I/O).

    ``call_tool`` calls one tool with arguments that were already validated. It must not raise
    for anything the tool or its server does: an unknown tool, a server that is down, a
    timeout or a crash all come back as a ``ToolResult`` with ``is_error=True`` and a text the
    model can act on. ``timeout`` (seconds, None or 0 for none) is the caller's deadline; a
    source may apply a shorter per-server one. Cancellation propagates, and the source passes it
    on to the server.
    """

    def list_tools(self) -> Sequence[ToolSpec]: ...

    async def call_tool(self, name: str, arguments: JSONObject, *, timeout: float | None = None) -> ToolResult: ...
