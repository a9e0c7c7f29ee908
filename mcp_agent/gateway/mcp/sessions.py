"""Open MCP sessions, counted per caller and capped: SSE connections and Streamable HTTP sessions.

``gateway.maxMcpSessions`` bounds both kinds together; with several callers each holds at most
its share. A connection that would open one more first makes room by closing the Streamable
HTTP session that has been idle the longest (no request in flight, no open stream, for at least
``EVICT_AFTER_IDLE_SECONDS``; of the caller's own sessions when it is its share that is full):
clients of one caller are not told apart, so without this one client that opened every session
locked every other out until the 30-minute idle timeout. The closed session's client gets 404
next time and opens a new one, as the protocol says. When nothing is idle that long, the
connection is refused at once with 429 and a JSON-RPC error saying why, and an abandoned session
is closed after ``gateway.mcpSessionIdleSeconds`` anyway.

SSE connections are counted here, around the SDK's endpoint. Streamable HTTP sessions live in
the SDK's session manager, which binds each to the caller that opened it (``scope["user"]``);
``http_sessions_by_caller`` reads who holds how many from it. A request opens a new session
when it carries no ``Mcp-Session-Id`` and speaks a handshake-era protocol (2026-era requests
open none).
"""

from __future__ import annotations

import collections
import json
import logging
import math
from collections.abc import Callable

import anyio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from .._internals import http_sessions, session_owner
from ..callers import caller_of

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
EVICT_AFTER_IDLE_SECONDS = 10.0
"""A session idle this long may be closed to make room for a new one (see the module docstring)."""
CLOSE_WAIT_SECONDS = 2.0


def http_sessions_by_caller(manager: StreamableHTTPSessionManager) -> collections.Counter[str | None]:
    """How many Streamable HTTP sessions each caller holds (None: sessions without a caller)."""
    return collections.Counter(session_owner(manager, session_id) for session_id in http_sessions(manager))


class McpSessionLimits:
    """The cap on open MCP sessions, in all and per caller (see the module docstring).

    Args:
        manager: the Streamable HTTP session manager (None in stateless mode: no sessions).
        max_sessions: at most this many SSE connections and Streamable HTTP sessions at once.
        share: how many of them one caller may hold (``CallerBook.share_of``).
        evict_after_idle: a session idle this long may be closed to make room for a new one.
    """

    def __init__(
        self,
        manager: StreamableHTTPSessionManager | None,
        max_sessions: int,
        share: Callable[[int], int],
        *,
        evict_after_idle: float = EVICT_AFTER_IDLE_SECONDS,
    ) -> None:
        self.manager = manager
        self.max_sessions = max_sessions
        self.share = share
        self.evict_after_idle = evict_after_idle
        self.sse: collections.Counter[str | None] = collections.Counter()

    def open_sessions(self) -> collections.Counter[str | None]:
        counts = collections.Counter(self.sse)
        if self.manager is not None:
            counts.update(http_sessions_by_caller(self.manager))
        return counts

    def refusal(self, caller: str | None) -> str | None:
        """Why ``caller`` may not open one more session now, or None."""
        full = self._full(caller)
        return full[0] if full is not None else None

    async def make_room(self, caller: str | None) -> str | None:
        """None when ``caller`` may open one more session now, closing the session idle the
        longest when that is what it takes (see the module docstring); else why not."""
        for _ in range(2):  # the total cap, then the caller's share
            full = self._full(caller)
            if full is None:
                return None
            why, whose = full
            if not await self._close_idlest(whose):
                return why
        return self.refusal(caller)

    def _full(self, caller: str | None) -> tuple[str, tuple[str | None] | None] | None:
        """(why, whose sessions may be closed: everyone's or the caller's own), or None."""
        counts = self.open_sessions()
        total = sum(counts.values())
        if total >= self.max_sessions:
            why = f"too many open MCP sessions ({total}, gateway.maxMcpSessions), none idle; close one or retry later"
            return why, None
        share = self.share(self.max_sessions)
        if counts[caller] >= share:
            why = (
                f"caller {caller!r} holds {counts[caller]} open MCP sessions, its share of "
                "gateway.maxMcpSessions, none idle; close one (DELETE /mcp, or end an SSE stream) or retry later"
            )
            return why, (caller,)
        return None

    async def _close_idlest(self, whose: tuple[str | None] | None) -> bool:
        """Close the Streamable HTTP session idle the longest (of ``whose`` callers, or anyone's)
        if it has been idle ``evict_after_idle`` seconds; True once it is gone.

        The SDK's transport keeps, in its public ``idle_scope``, the deadline of its idle timeout
        (infinite while a request or stream is open); cancelling that scope is how the SDK itself
        ends an idle session.
        """
        manager = self.manager
        timeout = manager.session_idle_timeout if manager is not None else None
        if manager is None or timeout is None:
            return False
        latest = (
            anyio.current_time() + timeout - self.evict_after_idle
        )  # deadlines of sessions idle that long
        sessions = http_sessions(manager)
        chosen: tuple[float, str, anyio.CancelScope] | None = None
        for session_id, transport in list(sessions.items()):
            scope = transport.idle_scope
            if scope is None or scope.cancel_called or math.isinf(scope.deadline) or scope.deadline > latest:
                continue
            if whose is not None and session_owner(manager, session_id) not in whose:
                continue
            if chosen is None or scope.deadline < chosen[0]:
                chosen = (scope.deadline, session_id, scope)
        if chosen is None:
            return False
        _, session_id, scope = chosen
        logger.info("closing MCP session %s, idle the longest, to make room for a new one", session_id[:8])
        scope.cancel()
        with anyio.move_on_after(CLOSE_WAIT_SECONDS):
            while session_id in sessions:
                await anyio.sleep(0.005)
        return session_id not in sessions

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
        if (why := await self.limits.make_room(caller)) is not None:
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
        if opens and (why := await self.limits.make_room(_caller_name(scope))) is not None:
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
