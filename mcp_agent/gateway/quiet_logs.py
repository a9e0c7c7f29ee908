"""Hostile input must not flood the log: the SDK's reports of a client's bad message become one
line, without a traceback, at most one a few seconds (with a count of those held back).

The MCP SDK logs every unparseable SSE message with ``logger.exception`` (about 2 kB of
traceback per request); a client sending garbage in a loop would write megabytes a minute.
The answer the client gets (400) is unchanged.
"""

from __future__ import annotations

import logging
import time

EVERY_SECONDS = 5.0
NOISY = {("mcp.server.sse", "Failed to parse message")}


class ClientErrorFilter(logging.Filter):
    """Turns the SDK's bad-client-input reports into rate-limited one-line warnings."""

    def __init__(self, every: float = EVERY_SECONDS) -> None:
        super().__init__()
        self.every = every
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        if key not in NOISY:
            return True
        now = time.monotonic()
        name = f"{record.name}: {record.msg}"
        if now - self._last.get(name, float("-inf")) < self.every:
            self._held[name] = self._held.get(name, 0) + 1
            return False
        held = self._held.pop(name, 0)
        reason = f"{type(record.exc_info[1]).__name__}" if record.exc_info and record.exc_info[1] else "invalid"
        record.msg = f"{record.msg} from a client ({reason}; answered 400)" + (
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
    for name in {logger for logger, _ in NOISY}:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ClientErrorFilter) for f in logger.filters):
            logger.addFilter(ClientErrorFilter())
