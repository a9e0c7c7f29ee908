"""Each reach of ``gateway/_internals.py`` into a private part of the MCP SDK or uvicorn, pinned.

One test per reach, named for it: an upgrade that changes what the gateway relies on fails here
first, before the behaviour built on it breaks somewhere less clear.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any, cast

import anyio
import h11
import uvicorn
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.streamable_http import EventStore, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from uvicorn.server import ServerState

from mcp_agent.gateway._internals import (
    GuardedH11Protocol,
    ReadStream,
    SessionStoreManager,
    WriteStream,
    http_sessions,
    modern_lifespan_state,
    request_connection,
    session_owner,
)
from mcp_agent.gateway.mcp.resumable import EventBudget, SessionEventStore, Streams


def test_stream_protocols_are_the_types_the_server_runs_on() -> None:
    """``Server.run`` takes a ``ReadStream`` and a ``WriteStream`` (mcp.shared._stream_protocols)."""
    parameters = inspect.signature(Server.run).parameters
    annotations = {str(parameter.annotation) for parameter in parameters.values()}
    assert any("ReadStream" in annotation for annotation in annotations)
    assert any("WriteStream" in annotation for annotation in annotations)
    assert ReadStream.__name__ == "ReadStream" and WriteStream.__name__ == "WriteStream"
    for name in ("receive", "aclose", "__aenter__", "__aexit__"):
        assert hasattr(ReadStream, name)
    for name in ("send", "aclose", "__aenter__", "__aexit__"):
        assert hasattr(WriteStream, name)


def test_http_sessions_and_their_owners_are_the_managers_bookkeeping() -> None:
    """``_server_instances`` maps each open session id to its transport; ``_session_owners`` maps
    it to the ``AuthorizationContext`` of its opener (absent without one)."""
    manager = StreamableHTTPSessionManager(app=Server("x"))
    assert http_sessions(manager) == {}
    owned = manager._admit_session({"client_id": "alice", "issuer": None, "subject": None})
    anonymous = manager._admit_session(None)
    assert owned is not None and anonymous is not None
    assert owned.mcp_session_id is not None and anonymous.mcp_session_id is not None
    assert http_sessions(manager) == {owned.mcp_session_id: owned, anonymous.mcp_session_id: anonymous}
    assert session_owner(manager, owned.mcp_session_id) == "alice"
    assert session_owner(manager, anonymous.mcp_session_id) is None
    assert session_owner(manager, "never-opened") is None
    del manager._server_instances[anonymous.mcp_session_id]  # what the manager does when one ends
    assert list(http_sessions(manager)) == [owned.mcp_session_id]


class _OwnStores(SessionStoreManager):
    def __init__(self) -> None:
        super().__init__(app=Server("x"))
        self.made: dict[str, EventStore] = {}

    def event_store_for(self, session_id: str) -> EventStore:
        store = SessionEventStore(session_id, EventBudget(), Streams().resume)
        self.made[session_id] = store
        return store


def test_each_admitted_session_gets_its_own_event_store() -> None:
    """The transport keeps its store in ``_event_store`` (set in ``__init__``, read per request),
    and ``_admit_session`` is where the manager builds each new session's transport."""
    assert "_event_store" in vars(StreamableHTTPServerTransport(mcp_session_id="x"))
    manager = _OwnStores()
    one, two = manager._admit_session(None), manager._admit_session(None)
    assert one is not None and two is not None and one.mcp_session_id and two.mcp_session_id
    assert one._event_store is manager.made[one.mcp_session_id]
    assert two._event_store is manager.made[two.mcp_session_id]
    assert one._event_store is not two._event_store


def test_a_requests_connection_is_its_sessions_private_connection() -> None:
    """``ServerSession`` keeps the per-client ``Connection`` in ``_connection``; a connection made
    with an outbound channel has ``has_standalone_channel`` and an ``exit_stack``."""
    connection = Connection(cast(Any, object()), protocol_version="2025-06-18")
    session = ServerSession(cast(Any, object()), connection)
    ctx = cast(ServerRequestContext[Any, Any], SimpleNamespace(session=session))
    assert request_connection(ctx) is connection
    assert connection.has_standalone_channel
    assert connection.exit_stack is not None


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def test_the_h11_protocol_has_the_hooks_and_state_the_guard_uses() -> None:
    """uvicorn's ``H11Protocol``: ``connection_made`` adds it to ``connections`` (the server's set)
    and keeps ``transport``; ``conn`` is its h11 connection, ``cycle`` None before a request,
    ``loop`` its event loop; ``data_received`` and ``on_response_complete`` are its callbacks."""
    config = uvicorn.Config(app=lambda scope, receive, send: None, http="h11", log_level="warning")
    config.load()
    state = ServerState()
    guarded = type("Guarded", (GuardedH11Protocol,), {"read_timeout": 0.05, "max_connections": 1})
    protocol = guarded(config=config, server_state=state, app_state={})
    transport = _Transport()
    protocol.connection_made(transport)
    assert protocol in state.connections and protocol.connections is state.connections
    assert protocol.transport is transport and protocol.cycle is None
    assert isinstance(protocol.conn, h11.Connection) and protocol.conn.their_state is h11.IDLE
    assert protocol.loop is asyncio.get_running_loop()
    for name in ("data_received", "connection_lost", "on_response_complete"):
        assert callable(getattr(protocol, name))
    await anyio.sleep(0.2)  # the read deadline: no request arrived
    assert transport.closed and transport.written.startswith(b"HTTP/1.1 408 ")
    protocol.connection_lost(None)
    assert protocol not in state.connections

    second = guarded(config=config, server_state=state, app_state={})
    first = guarded(config=config, server_state=state, app_state={})
    first.connection_made(_Transport())
    over = _Transport()
    second.connection_made(over)  # one more than max_connections: answered 503 and closed
    assert over.closed and over.written.startswith(b"HTTP/1.1 503 ")


async def test_the_modern_lifespan_state_is_what_the_manager_entered_at_start() -> None:
    """``_lifespan_state`` holds what the server's lifespan yielded while the manager runs (the
    state its 2026-07-28 entry hands to ``serve_one``), and None before and after."""
    state = {"entered": True}

    @asynccontextmanager
    async def lifespan(server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        yield state

    manager = StreamableHTTPSessionManager(app=Server("x", lifespan=lifespan))
    assert modern_lifespan_state(manager) is None
    async with manager.run():
        assert modern_lifespan_state(manager) is state
    assert modern_lifespan_state(manager) is None
