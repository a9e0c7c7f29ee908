"""Who is calling: the bearer token names a caller (401 without one), its scopes gate the route (403).

The caller is put in the ASGI scope twice: as ``scope["mcp_agent.caller"]`` for our handlers
(``caller_of``), and as the MCP SDK's ``AuthenticatedUser`` in ``scope["user"]``, which makes the
SDK bind every SSE and Streamable HTTP session to the caller that opened it (another caller's
request for that session gets 404, as for a session that does not exist).

Health and the dashboard page answer GET without a token (health then says only status and
version); a gateway without tokens lets everything through as the anonymous ``LOCAL`` caller.
CORS preflights are never challenged.
"""

from __future__ import annotations

from collections.abc import Collection

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..callers import LOCAL, Caller, CallerBook
from ._errors import send_error

DEFAULT_EXEMPT = frozenset({"/api/v1/health", "/", "/index.html", "/favicon.ico"})
CALLER_KEY = "mcp_agent.caller"


def required_scope(method: str, path: str) -> str | None:
    """The scope a route needs; None when any known caller may use it (the handler filters)."""
    if path == "/metrics":
        return "admin"
    if path.startswith("/api/v1/approvals/") and method == "POST":
        return "approve"
    if path in ("/api/v1/approvals", "/api/v1/events", "/api/v1/tools", "/api/v1/health"):
        return None
    return "query"  # queries, conversations and every MCP route


def caller_of(scope: Scope) -> Caller | None:
    """The caller of this request: None when a gateway with tokens got none (exempt routes)."""
    caller = scope.get(CALLER_KEY)
    return caller if isinstance(caller, Caller) else None


class CallerAuthMiddleware:
    """Identifies the caller by its bearer token and checks the route's scope (module docstring)."""

    def __init__(self, app: ASGIApp, book: CallerBook, exempt: Collection[str] = DEFAULT_EXEMPT) -> None:
        self.app = app
        self.book = book
        self.exempt = frozenset(exempt)
        self._users = {
            caller: AuthenticatedUser(
                AccessToken(token="-", client_id=caller.name, scopes=sorted(caller.scopes))
            )
            for caller in book.callers
            if caller.authenticated
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.book.open:
            scope[CALLER_KEY] = LOCAL
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        caller = self.book.identify(Headers(scope=scope).get("authorization"))
        if caller is None:
            if method == "OPTIONS" or (method in ("GET", "HEAD") and path in self.exempt):
                await self.app(scope, receive, send)
                return
            await send_error(
                send,
                401,
                "missing or wrong bearer token (send Authorization: Bearer <your caller token>)",
                "unauthorized",
                {"WWW-Authenticate": 'Bearer realm="mcp_agent"'},
            )
            return
        exempt = method in ("GET", "HEAD") and path in self.exempt
        needed = None if exempt else required_scope(method, path)
        if needed is not None and not caller.can(needed) and method != "OPTIONS":
            await send_error(
                send,
                403,
                f"caller {caller.name!r} lacks the {needed!r} scope for {method} {path}",
                "forbidden",
            )
            return
        scope[CALLER_KEY] = caller
        scope["user"] = self._users[caller]
        await self.app(scope, receive, send)
