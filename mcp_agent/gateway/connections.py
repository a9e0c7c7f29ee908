"""HTTP/1.1 connections of the gateway: read deadlines, a cap below the fd limit, quiet accept errors.

Why a protocol of our own: uvicorn (0.54) bounds only the idle time *between* requests
(``timeout_keep_alive``, armed after a response); a client that sends half its headers, or a
body one byte a minute, holds its socket forever, and 500 of them exhaust the descriptors
(slowloris). Hypercorn's ``read_timeout`` bounds each read, which one byte every few seconds
defeats; Granian bounds headers but is a second server binary with other semantics. So the
gateway keeps uvicorn and its h11 protocol, and adds one deadline per request in a small
subclass (``_internals.GuardedH11Protocol``: it reaches into uvicorn; ``protocol_class``):

- **read deadline**: from a request's first byte (or from the connection's opening, before any
  byte) until the request is complete (headers and body), ``gateway.readTimeoutSeconds``. Past
  it the connection gets ``408 Request Timeout`` (when no response has started) and is closed.
  Responses themselves are not bounded: an SSE stream may last hours.
- **connection cap**: a connection beyond ``max_connections`` is answered ``503`` and closed at
  once, so the gateway never runs out of descriptors because of its clients.
  ``open_file_limit()`` raises the soft limit to the hard one at start; the default cap is three
  quarters of it (the rest is for tool servers, model connections and files).
- **accept errors**: when descriptors run out anyway, asyncio logs a traceback on every retry of
  ``accept``; ``quiet_accept_errors`` makes that one warning a minute.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ._internals import GuardedH11Protocol

logger = logging.getLogger(__name__)

ACCEPT_WARN_EVERY_SECONDS = 60.0
FD_RESERVE = 64
"""Descriptors kept free of client connections (tool servers' pipes, model connections, files)."""


def protocol_class(read_timeout: float, max_connections: int) -> type[GuardedH11Protocol]:
    """The protocol class for uvicorn's ``http=``, with these limits."""
    return type(
        "GatewayH11Protocol",
        (GuardedH11Protocol,),
        {"read_timeout": read_timeout, "max_connections": max_connections},
    )


def open_file_limit() -> int:
    """Raise this process's soft limit on open files to the hard limit; return the new soft limit."""
    try:
        import resource
    except ImportError:  # not POSIX
        return 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return int(soft)


def default_max_connections(file_limit: int) -> int:
    """Three quarters of the descriptors, less a reserve, at least 16."""
    return max(16, (file_limit - FD_RESERVE) * 3 // 4)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log "out of descriptors" on accept once a minute, without a traceback; anything else goes to the handler that was set before."""
    previous = loop.get_exception_handler()
    last = [float("-inf")]
    suppressed = [0]

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == "socket.accept() out of system resource":
            now = time.monotonic()
            if now - last[0] >= ACCEPT_WARN_EVERY_SECONDS:
                more = f" ({suppressed[0]} more since the last warning)" if suppressed[0] else ""
                logger.warning(
                    "cannot accept connections: %s; raise the open-file limit or lower "
                    "gateway.maxConnections%s",
                    context.get("exception"),
                    more,
                )
                last[0], suppressed[0] = now, 0
            else:
                suppressed[0] += 1
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
