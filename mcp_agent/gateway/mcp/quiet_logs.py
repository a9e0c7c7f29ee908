"""Hostile input must not flood the log: the SDK's reports of a client's bad message become one
line, without a traceback, at most one a few seconds (with a count of those held back).

- The MCP SDK logs every unparseable SSE message with ``logger.exception`` (about 2 kB of
  traceback per request); a client sending garbage in a loop would write megabytes a minute.
  The answer the client gets (400) is unchanged.
- When a client ends its Streamable HTTP session while one of its requests is still being
  handed over (a client that gives up: it cancels a call and closes at once), the SDK logs the
  closed stream as an error with a traceback. Nothing is wrong on our side; one line says so.
- When that hand-over fails after the client already has its answer (a notification answered
  202), the SDK tries to send a second response, which raises; ``LateErrorGuard`` drops it and
  logs one line instead of a traceback and an "Exception in ASGI application".
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

EVERY_SECONDS = 5.0
NOISY = {("mcp.server.sse", "Failed to parse message")}
"""(logger, message) of the SDK's reports of a client's bad input."""
SESSION_GONE = {("mcp.server.streamable_http", "Error handling POST request")}
"""(logger, message) the SDK logs when a session closed under a request; quiet only for that."""
_CLOSED = ("ClosedResourceError", "BrokenResourceError", "EndOfStream")


class ClientErrorFilter(logging.Filter):
    """Turns the SDK's bad-client-input reports into rate-limited one-line warnings."""

    def __init__(self, every: float = EVERY_SECONDS) -> None:
        super().__init__()
        self.every = every
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        error = record.exc_info[1] if record.exc_info else None
        closed = key in SESSION_GONE and type(error).__name__ in _CLOSED
        if key not in NOISY and not closed:
            return True
        now = time.monotonic()
        name = f"{record.name}: {record.msg}"
        if now - self._last.get(name, float("-inf")) < self.every:
            self._held[name] = self._held.get(name, 0) + 1
            return False
        held = self._held.pop(name, 0)
        reason = (
            f"{type(record.exc_info[1]).__name__}" if record.exc_info and record.exc_info[1] else "invalid"
        )
        what = "the client's session closed meanwhile" if closed else "answered 400"
        record.msg = f"{record.msg} from a client ({reason}; {what})" + (
            f"; {held} more since the last report" if held else ""
        )
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        self._last[name] = now
        return True


def quiet_client_errors() -> None:
    """Install the filter on the SDK's transport loggers (idempotent)."""
    for name in {logger for logger, _ in NOISY | SESSION_GONE}:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ClientErrorFilter) for f in logger.filters):
            logger.addFilter(ClientErrorFilter())


# An error an app raises after its response is complete is not the client's business.
#
# The MCP SDK's Streamable HTTP transport answers a notification with 202 first and hands it to
# the session afterwards; when the client has ended its session in between (it gave up and
# closed), the hand-over fails and the SDK tries to send a second response, which raises. The
# client already has its answer; this middleware logs one line and lets the request end cleanly
# instead of a traceback and an "Exception in ASGI application".
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
