"""CORS for allowed origins only: never a wildcard, and only when the request names its Origin.

Runs after ``HostOriginMiddleware``, so any Origin that reaches it is allowed; it answers
preflights and adds ``Access-Control-Allow-Origin: <that origin>`` to the response.
"""

from __future__ import annotations

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"
ALLOW_HEADERS = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version"
EXPOSE_HEADERS = "Mcp-Session-Id, Mcp-Protocol-Version, Retry-After"


class CORSMiddleware:
    """Echoes an (already vetted) Origin back; answers preflight requests with 204."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await send(
                {
                    "type": "http.response.start",
                    "status": 204,
                    "headers": [
                        (b"access-control-allow-origin", origin.encode("latin-1")),
                        (b"access-control-allow-methods", ALLOW_METHODS.encode()),
                        (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
                        (b"access-control-max-age", b"600"),
                        (b"vary", b"Origin"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                out["Access-Control-Allow-Origin"] = origin
                out["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
                out.add_vary_header("Origin")
            await send(message)

        await self.app(scope, receive, send_with_cors)
