"""Open MCP sessions, counted per caller and capped: SSE connections and Streamable HTTP sessions.

``gateway.maxMcpSessions`` bounds both kinds together; with several callers each holds at most
its share. A connection that would open one more is refused at once with 429 and a JSON-RPC
error saying why (instead of the SDK's silent wait for a 30-minute idle timeout to free room),
and an abandoned Streamable HTTP session is closed after ``gateway.mcpSessionIdleSeconds``.

SSE connections are counted here, around the SDK's endpoint. Streamable HTTP sessions live in
the SDK's session manager, which binds each to the caller that opened it (``scope["user"]``);
``http_sessions_by_caller`` reads who holds how many from it. A request opens a new session
when it carries no ``Mcp-Session-Id`` and speaks a handshake-era protocol (2026-era requests
open none).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable
from typing import Any

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from .middleware import caller_of

RETRY_AFTER_SECONDS = 5


def http_sessions_by_caller(manager: StreamableHTTPSessionManager) -> collections.Counter[str | None]:
    """How many Streamable HTTP sessions each caller holds (None: sessions without a caller).

    Reads the SDK's bookkeeping (mcp 2.3: ``_server_instances`` and the owner of each); a test
    pins it, so an SDK that changes it fails loudly rather than uncounted.
    """
    instances: dict[str, Any] = manager._server_instances
    owners: dict[str, Any] = manager._session_owners
    counts: collections.Counter[str | None] = collections.Counter()
    for session_id in instances:
        owner = owners.get(session_id)
        counts[owner["client_id"] if owner else None] += 1
    return counts


class McpSessionLimits:
    """The cap on open MCP sessions, in all and per caller (see the module docstring).

    Args:
        manager: the Streamable HTTP session manager (None in stateless mode: no sessions).
        max_sessions: at most this many SSE connections and Streamable HTTP sessions at once.
        share: how many of them one caller may hold (``CallerBook.share_of``).
    """

    def __init__(
        self,
        manager: StreamableHTTPSessionManager | None,
        max_sessions: int,
        share: Callable[[int], int],
    ) -> None:
        self.manager = manager
        self.max_sessions = max_sessions
        self.share = share
        self.sse: collections.Counter[str | None] = collections.Counter()

    def open_sessions(self) -> collections.Counter[str | None]:
        counts = collections.Counter(self.sse)
        if self.manager is not None:
            counts.update(http_sessions_by_caller(self.manager))
        return counts

    def refusal(self, caller: str | None) -> str | None:
        """Why ``caller`` may not open one more session now, or None."""
        counts = self.open_sessions()
        total = sum(counts.values())
        if total >= self.max_sessions:
            return f"too many open MCP sessions ({total}, gateway.maxMcpSessions); close one or retry later"
        share = self.share(self.max_sessions)
        if counts[caller] >= share:
            return (
                f"caller {caller!r} holds {counts[caller]} open MCP sessions, its share of "
                "gateway.maxMcpSessions; close one (DELETE /mcp, or end an SSE stream) or retry later"
            )
        return None

    def limit_sse(self, endpoint: ASGIApp) -> ASGIApp:
        """``endpoint`` (``GET /sse``), refused beyond the cap and counted while connected."""
        return _LimitedSse(self, endpoint)

    def limit_http(self, endpoint: ASGIApp) -> ASGIApp:
        """``endpoint`` (``/mcp``), whose requests that would open a session are refused beyond the cap."""
        return _LimitedHttp(self, endpoint)


class _LimitedSse:
    """An ASGI app (a class: Starlette runs plain functions as request handlers)."""

    def __init__(self, limits: McpSessionLimits, endpoint: ASGIApp) -> None:
        self.limits = limits
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller, counts = _caller_name(scope), self.limits.sse
        if (why := self.limits.refusal(caller)) is not None:
            await _refuse(send, why)
            return
        counts[caller] += 1
        try:
            await self.endpoint(scope, receive, send)
        finally:
            counts[caller] -= 1
            if not counts[caller]:
                del counts[caller]


class _LimitedHttp:
    def __init__(self, limits: McpSessionLimits, endpoint: ASGIApp) -> None:
        self.limits = limits
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        opens = self.limits.manager is not None and scope["method"] == "POST" and _opens_session(scope)
        if opens and (why := self.limits.refusal(_caller_name(scope))) is not None:
            await _refuse(send, why)
            return
        await self.endpoint(scope, receive, send)


def _caller_name(scope: Scope) -> str | None:
    caller = caller_of(scope)
    return caller.name if caller is not None and caller.authenticated else None


def _opens_session(scope: Scope) -> bool:
    headers = Headers(scope=scope)
    if MCP_SESSION_ID_HEADER in headers:
        return False
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


async def _refuse(send: Send, why: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": why}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
