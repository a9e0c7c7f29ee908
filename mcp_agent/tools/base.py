"""The ToolSource protocol: what the loop needs from the tools, and nothing more.

A source whose list can be offered before it is known to be true (the hub offers cached tool
lists while their servers start: ``tools/cache.py``) is also a ``LiveToolSource``: the loop asks
it for a tool's live definition before it decides on a call, and ``redefinition`` says whether a
call checked against one definition may go out under another.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol, cast, runtime_checkable

from ..messages import JSONObject, ToolResult, ToolSpec


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

    async def call_tool(
        self, name: str, arguments: JSONObject, *, timeout: float | None = None
    ) -> ToolResult: ...


@runtime_checkable
class LiveToolSource(ToolSource, Protocol):
    """A ToolSource whose listed definitions may be provisional (read from a cache).

    ``live_spec`` gives the definition of the tool ``name`` as its server's live list has it,
    starting or waiting for that server first (bounded by its start-up timeout). When no live
    tool has that name (unknown, its server is down, or the name came from a cache and the
    running server has no such tool) it returns an error ``ToolResult`` for the model instead:
    the call must not go out. Like ``call_tool`` it never raises for the server's failures.

    The loop validates and gates a call on this definition, not on the listed one, whenever
    the two differ (``redefinition``).
    """

    async def live_spec(self, name: str) -> ToolSpec | ToolResult: ...


def as_live(tools: ToolSource) -> LiveToolSource | None:
    """``tools`` as a ``LiveToolSource`` when it is one, else None: the same answer as
    ``isinstance(tools, LiveToolSource)`` for a ToolSource, without walking the Protocol's
    members at each check (tens of µs, once per run)."""
    return cast(LiveToolSource, tools) if hasattr(tools, "live_spec") else None


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def redefinition(checked: ToolSpec, live: ToolSpec) -> str:
    """What differs between the definition a call was checked against and the live one, in what
    the checks rely on; "" when nothing does.

    The owner (server and MCP name: where the call and its arguments go), the annotations (the
    approval gate reads them: ``approvals.requireDestructive``) and the parameters (the
    arguments were validated against them). A new description or title changes nothing a call
    depends on, so it is not a redefinition.
    """
    if checked is live:  # the source still offers the very definition the call was checked on
        return ""
    if (checked.server, checked.mcp_name) != (live.server, live.mcp_name):
        return (
            f"the name now belongs to tool {live.mcp_name!r} of server {live.server}, "
            f"not to tool {checked.mcp_name!r} of server {checked.server}"
        )
    changed = [
        what
        for what, before, after in (
            ("annotations", checked.annotations, live.annotations),
            ("parameters", checked.parameters, live.parameters),
        )
        if before != after and _canonical(before) != _canonical(after)
    ]
    if not changed:
        return ""
    if "annotations" in changed:
        return f"its {' and '.join(changed)} changed (annotations now {_canonical(dict(live.annotations))})"
    return "its parameters changed"


def same_owner(checked: ToolSpec, live: ToolSpec) -> bool:
    """Whether both definitions name the same tool of the same server."""
    return (checked.server, checked.mcp_name) == (live.server, live.mcp_name)
