"""An error an app raises after its response is complete is not the client's business.

The MCP SDK's Streamable HTTP transport answers a notification with 202 first and hands it to
the session afterwards; when the client has ended its session in between (it gave up and
closed), the hand-over fails and the SDK tries to send a second response, which raises. The
client already has its answer; this middleware logs one line and lets the request end cleanly
instead of a traceback and an "Exception in ASGI application".
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)


class LateErrorGuard:
    """Swallows (and logs in one line) what ``app`` raises after its response was completed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        complete = False

        async def tracking_send(message: Message) -> None:
            nonlocal complete
            if complete:  # a second response to a finished request: drop it
                return
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if not complete:
                raise
            logger.info(
                "%s %s: error after the response was sent (%s: %s)",
                scope.get("method"),
                scope.get("path"),
                type(exc).__name__,
                exc,
            )
