"""Every reach of the gateway into a private part of the MCP SDK (2.3) or uvicorn (0.55), in one place.

The gateway uses its libraries' public API. Where that has no way to do what the gateway needs,
the reach is here, one name each, with a line saying why no public API serves; each has a test in
``tests/gateway/test_internals.py`` that pins exactly the behaviour relied on, so an upgrade that
changes it fails that test first, by name. README's "Known limits" lists them. No other module
of the package imports a private module of mcp, uvicorn or Starlette (``tests/test_code_quality.py``).
"""

from __future__ import annotations

import asyncio
import json
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import h11
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http import EventStore, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared._stream_protocols import ReadStream, WriteStream
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "GuardedH11Protocol",
    "ReadStream",
    "SessionStoreManager",
    "WriteStream",
    "http_sessions",
    "modern_lifespan_state",
    "request_connection",
    "session_owner",
]

# ``ReadStream`` / ``WriteStream``: the stream types ``Server.run`` takes and ``stdio_server``
# yields, which ``mcp/stdio.py`` wraps; the SDK defines them in no public module.


def http_sessions(manager: StreamableHTTPSessionManager) -> Mapping[str, StreamableHTTPServerTransport]:
    """The open Streamable HTTP sessions by id (``manager._server_instances``).

    Why: the manager lists its sessions nowhere public, and the gateway caps them per caller and
    closes the one idle the longest to make room (``mcp/sessions.py``)."""
    instances: dict[str, StreamableHTTPServerTransport] = manager._server_instances
    return instances


def session_owner(manager: StreamableHTTPSessionManager, session_id: str) -> str | None:
    """The caller (``client_id`` of the ``AuthenticatedUser`` in the scope) that opened the session,
    None without one (``manager._session_owners``).

    Why: the SDK binds a session to its opener but tells nobody who that is; the cap per caller
    counts by it."""
    owners: dict[str, Any] = manager._session_owners
    owner = owners.get(session_id)
    return str(owner["client_id"]) if owner else None


class SessionStoreManager(StreamableHTTPSessionManager):
    """The SDK's session manager, each new session with an event store of its own (``event_store_for``).

    Why: the SDK hands its one ``event_store=`` to every session, and its stream ids are request
    ids, which repeat across sessions; so this overrides ``_admit_session`` and sets the new
    transport's ``_event_store``."""

    @abstractmethod
    def event_store_for(self, session_id: str) -> EventStore:
        """The event store of the new session ``session_id``."""

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            transport._event_store = self.event_store_for(transport.mcp_session_id)
        return transport


def request_connection(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The per-client ``Connection`` of a request (its standalone channel, its exit stack):
    ``ctx.session._connection``.

    Why: ``ServerRunner`` hands handlers a ``ServerRequestContext``, whose session has no public
    accessor for it (the SDK's ``Context.connection`` is not built by the runner); the gateway
    keeps the legacy connections to tell them when its tools change (``mcp/server.py``)."""
    connection: Connection = ctx.session._connection
    return connection


def _raw_response(status: int, reason: str, message: str, kind: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline per request and a connection cap
    (``connections.py`` says why the gateway needs both).

    Why here: uvicorn has no hook for either; this subclass overrides its protocol callbacks
    (``connection_made``, ``data_received``, ``connection_lost``, ``on_response_complete``) and
    reads its undocumented state (``connections``, ``conn``, ``cycle``, ``transport``, ``loop``)."""

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


def modern_lifespan_state(manager: StreamableHTTPSessionManager) -> Any:
    """The server lifespan's state the session manager entered at start-up: what its 2026-07-28
    entry hands to ``serve_one`` (``fast_call.py`` hands the same). Private: ``_lifespan_state``."""
    return manager._lifespan_state
