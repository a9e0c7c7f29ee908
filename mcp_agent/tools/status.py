"""How a tool server is doing, as the hub (``hub.py``) and the cache-only listing (``cache.cached_listing``)
report it: plain values, importable without the MCP SDK."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..messages import JSONObject

ServerState = Literal["starting", "up", "failed", "disabled", "restarting", "idle"]


@dataclass(frozen=True)
class ServerStatus:
    """How one tool server is doing.

    Attributes:
        name: the server's name in agent.json.
        status: ``up``, ``failed``, ``disabled``, ``starting`` or ``restarting``.
        error: why it is not up (for ``restarting``: the crash it restarts from), else None.
        tool_count: how many of its tools are offered.
        startup_ms: how long its last successful start took, from spawn to tools listed.
        restarts: how many times it was restarted after a crash.
        junk_lines: how many non-JSON lines it printed on stdout.
        glob_warnings: its ``allowTools``/``denyTools`` globs that match none of its tools.
        from_cache: its tools were read from the tool cache (the server has not listed them in
            this process yet: it is starting, or lazy and not started).
        lazy: it starts on its first call and stops when idle (``lazy`` in agent.json).
        cache_note: how its cached list compared with the one it listed (None: no cache, or not
            listed yet).
        protocol_version: the MCP protocol version it spoke at its last start, or as the tool
            cache remembers it (None: not known).
    """

    name: str
    status: ServerState
    error: str | None = None
    tool_count: int = 0
    startup_ms: float | None = None
    restarts: int = 0
    junk_lines: int = 0
    glob_warnings: tuple[str, ...] = ()
    from_cache: bool = False
    lazy: bool = False
    cache_note: str | None = None
    protocol_version: str | None = None

    def to_dict(self) -> JSONObject:
        return {
            "name": self.name,
            "status": self.status,
            "error": self.error,
            "tool_count": self.tool_count,
            "startup_ms": self.startup_ms,
            "restarts": self.restarts,
            "junk_lines": self.junk_lines,
            "from_cache": self.from_cache,
            "protocol_version": self.protocol_version,
        }
