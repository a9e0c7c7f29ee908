"""The lean path for a 2026-07-28 client's ``tools/call`` (``agent_query`` or an exposed tool):
claim it, or pass it on.

A 2026-07-28 ``tools/call`` to the gateway used to meet, after the gateway's own rules
(drain, secrets, Host/Origin, CORS, callers, body cap), Starlette's router and exception layers,
five more wrappers in front of the Streamable HTTP app, the SDK's body cap, and the SDK's
single-exchange entry, which runs every request as a task group of two tasks joined by a memory
stream (the handler and a disconnect watcher) before it knows whether the answer is JSON or SSE.
``FastCalls`` sits right after the gateway's rules and *claims* only a request it fully
understands; it answers it with the same handler chain the SDK runs (``mcp.server.runner.serve_one``:
parameter validation, the SDK's server span, ``TraceHeaders``, the Tasks interceptor, the
``tools/call`` handler of ``server.py`` with its guards, approvals, budgets, events and relay
channel), and writes the JSON-RPC answer itself, built and serialised as the SDK's entry does.

Claimed: one POST to ``/mcp`` with an ``MCP-Protocol-Version`` header of the 2026-07-28 era
and no ``Mcp-Session-Id``, a JSON body that is a single JSON-RPC ``tools/call`` request of
``agent_query`` or of an exposed tool, no ``progressToken`` and no log level in its ``_meta``, an
``Accept`` that takes both JSON and SSE and a JSON ``Content-Type`` (what the SDK's entry demands
before it reads a body), a body within the SDK's cap, no duplicated routing header, an envelope
and routing headers that the SDK's own ``classify_inbound_request`` accepts, and ``Mcp-Param-*``
headers that ``validate_mcp_param_headers`` accepts. Everything else (other methods, batches,
legacy sessions, notifications, anything malformed, every request the SDK would refuse) is
*passed*: the body is replayed byte for byte to the usual stack, which answers as before. So every
refusal on this path is still the SDK's own.

What a claimed call shares with the SDK's entry, on purpose: a ``DispatchContext`` without a back
channel; a notification the handler sends (none is expected without a progress token or a log
level) commits the answer to ``text/event-stream`` as the SDK does; a handler silent for
``PING_SECONDS`` commits SSE too and pings, so a proxy's idle timeout cannot close the stream;
the client going away cancels the handler (an ``agent_query`` run ends ``cancelled``, as on the
SDK's path, where a 2026-07-28 request cannot be resumed either). ``gateway.fastCalls: false``
turns the path off.
Handshake-era (2025) requests always take the SDK's path: their session, its log level and its
back channel live in the SDK's session.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import LOG_LEVEL_META_KEY, JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._internals import modern_lifespan_state
from ..middleware import buffered_body
from .server import AgentMCPServer

logger = logging.getLogger(__name__)

PATH = "/mcp"
PING_SECONDS = 15.0
"""A silent handler commits SSE and pings this often (the SDK's ``_SSE_PING_INTERVAL``)."""
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
"""The headers of the SDK's single-exchange SSE answer."""
PING = b": ping\r\n\r\n"

_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode("latin-1")
_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()


@dataclass(frozen=True)
class Claim:
    """A request this path answers: its parsed envelope and what the SDK's classifier made of it."""

    request: JSONRPCRequest
    route: InboundModernRoute


def wire(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> dict[str, Any]:
    """The message as the SDK's entry dumps it (pure). A response's ``result`` is the dict
    ``serve_one`` returned, already in JSON form, which such a dump keeps as it is (``None``
    values included): it is put in place without a second pass through pydantic."""
    if isinstance(message, JSONRPCResponse):
        return {"jsonrpc": message.jsonrpc, "id": message.id, "result": message.result}
    return message.model_dump(mode="json", by_alias=True, exclude_none=True)


def sse_event(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> bytes:
    """One SSE ``event: message`` frame, as the SDK's entry writes it (pure)."""
    return f"event: message\r\ndata: {json.dumps(wire(message), separators=(',', ':'))}\r\n\r\n".encode()


def json_answer(message: JSONRPCResponse | JSONRPCError) -> tuple[Message, Message]:
    """The ``application/json`` answer, as its two ASGI messages, with the status the SDK maps an
    error code to (pure): the head Starlette's ``Response`` writes, without building one."""
    status = ERROR_CODE_HTTP_STATUS.get(message.error.code, 200) if isinstance(message, JSONRPCError) else 200
    body = json.dumps(wire(message), separators=(",", ":")).encode()
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    return (
        {"type": "http.response.start", "status": status, "headers": headers},
        {"type": "http.response.body", "body": body},
    )


class _Answer:
    """The response of one claimed call: JSON when the result comes first, else SSE (see above)."""

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.streaming = False
        self.lock = anyio.Lock()

    async def _event(self, frame: bytes) -> None:
        async with self.lock:
            if not self.streaming:
                self.streaming = True
                await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await self.send({"type": "http.response.body", "body": frame, "more_body": True})

    async def notify(self, notification: JSONRPCNotification) -> None:
        await self._event(sse_event(notification))

    async def ping(self) -> None:
        await self._event(PING)

    async def finish(self, message: JSONRPCResponse | JSONRPCError) -> None:
        async with self.lock:
            if self.streaming:
                await self.send(
                    {"type": "http.response.body", "body": sse_event(message), "more_body": False}
                )
            else:
                start, body = json_answer(message)
                await self.send(start)
                await self.send(body)


@dataclass
class _Exchange:
    """The ``DispatchContext`` of one claimed call: no back channel; notifications go to its answer."""

    transport: TransportContext
    request_id: Any
    message_metadata: MessageMetadata
    answer: _Answer
    progress_token: Any = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = field(default=False, init=False)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        body = dict(params) if params is not None else None
        try:
            await self.answer.notify(JSONRPCNotification(jsonrpc="2.0", method=method, params=body))
        except OSError:
            logger.debug("dropped %s: the client is gone", method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None  # claimed calls carry no progress token


class FastCalls:
    """Claims a 2026-07-28 ``tools/call`` of ``agent_query`` or an exposed tool, passes everything
    else (module docstring).

    Args:
        app: the usual stack (Starlette with the Streamable HTTP route).
        server: the gateway's MCP server (its handlers and its ``get_tool_input_schema``).
        manager: the Streamable HTTP session manager (its security settings, body cap, lifespan).
    """

    def __init__(self, app: ASGIApp, server: AgentMCPServer, manager: StreamableHTTPSessionManager) -> None:
        self.app = app
        self.server = server
        self.manager = manager
        self.security = TransportSecurityMiddleware(manager.security_settings)
        self.claimed = 0
        """Calls answered here (tests read it)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _modern_post(scope):
            await self.app(scope, receive, send)
            return
        body, replay = await buffered_body(receive)
        request = Request(scope, replay)
        claim = await self.claim(request, body)
        if claim is None:
            await self.app(scope, replay, send)
            return
        self.claimed += 1
        await self.answer(claim, request, scope, replay, send)

    async def claim(self, request: Request, body: bytes) -> Claim | None:
        """The request as this path understands it, or None to pass it (see the module docstring)."""
        if len(body) > self.manager.max_request_body_size:
            return None
        if await self.security.validate_request(request, is_post=True) is not None:
            return None
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and (has_sse or self.manager.json_response)):
            return None
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or decoded.get("method") != "tools/call" or "id" not in decoded:
            return None
        params = decoded.get("params")
        if not isinstance(params, dict):
            return None
        name, arguments, meta = params.get("name"), params.get("arguments", {}), params.get("_meta")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return None
        if not isinstance(meta, dict) or "progressToken" in meta or LOG_LEVEL_META_KEY in meta:
            return None
        try:
            envelope = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        if find_duplicated_routing_header(request.headers.items()) is not None:
            return None
        route = classify_inbound_request(decoded, headers=dict(request.headers))
        if not isinstance(route, InboundModernRoute):
            return None
        lookup = self.server.get_tool_input_schema
        try:
            schema = lookup(name) if lookup is not None else None
        except Exception:  # the SDK's path skips the header check then, and logs it
            return None
        if schema is None:  # neither agent_query nor an exposed tool: the SDK's path answers
            return None
        headers_named = any(key.startswith(_PARAM_PREFIX) for key in request.headers)
        if (arguments or headers_named) and validate_mcp_param_headers(
            schema, arguments, request.headers
        ) is not None:
            return None
        return Claim(envelope, route)

    async def answer(
        self, claim: Claim, request: Request, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Run the handler chain for ``claim`` and write its answer; the client leaving cancels it."""
        envelope, route = claim.request, claim.route
        answer = _Answer(scope, receive, send)
        exchange = _Exchange(
            transport=TransportContext(
                kind="streamable-http", can_send_request=False, headers=request.headers
            ),
            request_id=envelope.id,
            message_metadata=ServerMessageMetadata(request_context=request),
            answer=answer,
        )
        connection = Connection.from_envelope(
            route.protocol_version, route.client_info, route.client_capabilities
        )
        message: JSONRPCResponse | JSONRPCError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch, receive, answer, tg.cancel_scope)
            try:
                result = await serve_one(
                    self.server,
                    exchange,
                    envelope.method,
                    envelope.params,
                    connection=connection,
                    lifespan_state=modern_lifespan_state(self.manager),
                )
            except Exception as exc:
                message = JSONRPCError(jsonrpc="2.0", id=envelope.id, error=modern_error_data(exc))
            else:
                message = JSONRPCResponse(jsonrpc="2.0", id=envelope.id, result=result)
            tg.cancel_scope.cancel()
        if message is not None:  # None: the client went away and the call was cancelled
            await answer.finish(message)


async def _watch(receive: Receive, answer: _Answer, call: anyio.CancelScope) -> None:
    """Cancel ``call`` when the client goes away; ping (committing SSE) while the handler is silent."""
    while True:
        message: Message | None = None
        with anyio.move_on_after(PING_SECONDS):
            message = await receive()
        if message is None:
            with anyio.CancelScope(shield=True):
                try:
                    await answer.ping()
                except OSError:
                    logger.debug("could not ping: the client is gone")
        elif message["type"] == "http.disconnect":
            call.cancel()
            return


def _modern_post(scope: Scope) -> bool:
    """A POST to ``/mcp`` routed to the 2026-07-28 entry by its header, outside any session."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH:
        return False
    version = None
    for key, value in scope["headers"]:
        if key == _SESSION_HEADER:
            return False
        if key == _VERSION_HEADER:
            version = value.decode("latin-1")
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
