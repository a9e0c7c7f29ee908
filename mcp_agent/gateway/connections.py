"""HTTP/1.1 connections of the gateway: read deadlines, a cap below the fd limit, quiet accept errors.

Why a protocol of our own: uvicorn (0.54) bounds only the idle time *between* requests
(``timeout_keep_alive``, armed after a response); a client that sends half its headers, or a
body one byte a minute, holds its socket forever, and 500 of them exhaust the descriptors
(slowloris). Hypercorn's ``read_timeout`` bounds each read, which one byte every few seconds
defeats; Granian bounds headers but is a second server binary with other semantics. So the
gateway keeps uvicorn and its h11 protocol, and adds one deadline per request in a small
subclass (``protocol_class``):

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
import json
import logging
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)

ACCEPT_WARN_EVERY_SECONDS = 60.0
FD_RESERVE = 64
"""Descriptors kept free of client connections (tool servers' pipes, model connections, files)."""


def _raw_response(status: int, reason: str, message: str, kind: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline per request and a connection cap."""

    read_timeout: float = 10.0
    max_connections: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.max_connections and len(self.connections) > self.max_connections:
            message = (
                f"too many open connections ({self.max_connections}, gateway.maxConnections); retry later"
            )
            transport.write(_raw_response(503, "Service Unavailable", message, "too_many_connections"))
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
            self._arm()  # a request is on its way: its deadline runs from its first byte
        else:
            self._disarm()  # complete (or the connection is ending): the response is not bounded

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # between requests, uvicorn's keep-alive timeout applies

    def _arm(self) -> None:
        if self._read_deadline is None and self.read_timeout > 0 and not self.transport.is_closing():
            self._read_deadline = self.loop.call_later(self.read_timeout, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.response_started:
            message = (
                f"the request did not arrive within {self.read_timeout:g} s (gateway.readTimeoutSeconds)"
            )
            self.transport.write(_raw_response(408, "Request Timeout", message, "request_timeout"))
        self.transport.close()


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
    """Log "out of descriptors" on accept once a minute, without a traceback; the rest as before."""
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
