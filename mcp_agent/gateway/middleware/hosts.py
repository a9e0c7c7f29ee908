"""Host and Origin checks on every request (DNS rebinding, cross-site calls): 421 and 403."""

from __future__ import annotations

import logging

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..security import HostRules
from ._errors import send_error

logger = logging.getLogger(__name__)


class HostOriginMiddleware:
    """Refuses a request whose Host (421) or Origin (403) the rules do not accept."""

    def __init__(self, app: ASGIApp, rules: HostRules) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.rules.host_ok(host):
            logger.warning("refused a request with Host %r", host)
            await send_error(
                send, 421, f"Host {host!r} is not allowed (gateway.allowedHosts)", "misdirected_request"
            )
            return
        origin = headers.get("origin")
        if not self.rules.origin_ok(origin):
            logger.warning("refused a request with Origin %r", origin)
            await send_error(
                send, 403, f"Origin {origin!r} is not allowed (gateway.allowedOrigins)", "forbidden_origin"
            )
            return
        await self.app(scope, receive, send)
