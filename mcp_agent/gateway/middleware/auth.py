"""Bearer-token authentication for every route but the exempt ones (health, the static page)."""

from __future__ import annotations

from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..security import bearer_ok
from ._errors import send_error

DEFAULT_EXEMPT = frozenset({"/api/v1/health", "/", "/index.html"})


class BearerAuthMiddleware:
    """Requires ``Authorization: Bearer <token>``; without a token configured it lets all through.

    ``exempt`` paths answer GET without a token: health (for probes) and the dashboard page,
    which holds no data (its API calls carry the token). CORS preflights are never challenged.
    """

    def __init__(self, app: ASGIApp, token: str | None, exempt: Collection[str] = DEFAULT_EXEMPT) -> None:
        self.app = app
        self.token = token
        self.exempt = frozenset(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.token:
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if method == "OPTIONS" or (method in ("GET", "HEAD") and scope["path"] in self.exempt):
            await self.app(scope, receive, send)
            return
        if not bearer_ok(Headers(scope=scope).get("authorization"), self.token):
            await send_error(
                send,
                401,
                "missing or wrong bearer token (send Authorization: Bearer <gateway.authToken>)",
                "unauthorized",
                {"WWW-Authenticate": 'Bearer realm="mcp_agent"'},
            )
            return
        await self.app(scope, receive, send)
