"""The plain HTTP middleware of the gateway: pure-ASGI classes, each one rule every request meets.

``app.py`` stacks them with the rule classes of ``security.py`` and ``callers.py``, outermost
first: ``DrainMiddleware`` (tracks requests, ends them at shutdown), ``SecretsMiddleware``
(known secret values masked in every response), ``HostOriginMiddleware`` and ``CORSMiddleware``
(``security.py``), ``CallerAuthMiddleware`` (``callers.py``), ``BodyLimitMiddleware`` (413),
and in front of the Streamable HTTP app ``UniqueRequestIds`` and ``EnvelopeHeaders``. Every refusal is the JSON error
``{"error": {"message", "type"}}`` of ``send_error`` (REST answers with the same body).

"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, MCP_PROTOCOL_VERSION_HEADER, classify_inbound_request
from mcp_types import HEADER_MISMATCH, PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._redact import SECRETS, mask_secret_bytes

logger = logging.getLogger(__name__)


# The JSON error answer every middleware and REST handler sends: ``{"error": {"message", "type"}}``.
def error_body(message: str, type_: str) -> bytes:
    """The JSON error document."""
    return json.dumps({"error": {"message": message, "type": type_}}).encode("utf-8")


async def send_error(
    send: Send,
    status: int,
    message: str,
    type_: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Answer an HTTP request with a JSON error (the response must not have started)."""
    body = error_body(message, type_)
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw.extend(
        (key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in (headers or {}).items()
    )
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


# Graceful shutdown for HTTP: refuse new requests, then end the ones still open.
#
# Long-lived responses (the MCP SSE stream, a Streamable HTTP GET stream, ``/api/v1/events``)
# never end on their own, so they would hold a graceful shutdown open until its deadline. This
# middleware tracks every request: ``begin()`` refuses new requests with 503, ``wait_idle()``
# waits for ordinary requests (the ones that carry a result) to finish, and ``close_all()`` ends
# what is left. It first tells each open request that its client went away (``receive`` answers
# ``http.disconnect``), which every streaming response here handles as a normal end, closing its
# own resources; a request that still runs after that is cancelled. A started response is then
# closed cleanly.


@dataclass(eq=False)
class _Request:
    method: str
    path: str
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    disconnect: anyio.Event = field(default_factory=anyio.Event)
    body_done: bool = False
    started: bool = False
    complete: bool = False
    stream: bool = False
    """A GET answered with ``text/event-stream``: it only ends when the client or we end it."""
    waiting: set[anyio.CancelScope] = field(default_factory=set)
    """The scopes of the app's ``receive`` calls waiting now (``close_all`` cancels them)."""


class DrainMiddleware:
    """Tracks every HTTP request so that shutdown can end them (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.closing = False
        self._open: set[_Request] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.closing:
            await send_error(
                send, 503, "the gateway is shutting down", "shutting_down", {"Connection": "close"}
            )
            return
        request = _Request(scope["method"], scope["path"])

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                request.started = True
                if request.method == "GET":
                    content_type = Headers(raw=message.get("headers", [])).get("content-type", "")
                    request.stream = content_type.startswith("text/event-stream")
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                request.complete = True
            await send(message)

        async def receive_or_disconnect() -> Message:
            if request.disconnect.is_set():
                return {"type": "http.disconnect"}
            if not request.body_done:  # the body: read it as it comes
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    request.body_done = True
                return message
            with anyio.CancelScope() as waiting:  # cancelled by ``close_all``: the client "went away"
                request.waiting.add(waiting)
                try:
                    return await receive()
                finally:
                    request.waiting.discard(waiting)
            return {"type": "http.disconnect"}

        self._open.add(request)
        try:
            with request.scope:
                await self.app(scope, receive_or_disconnect, tracking_send)
        finally:
            self._open.discard(request)
        if request.scope.cancelled_caught or request.disconnect.is_set():
            await self._finish(request, send)

    async def _finish(self, request: _Request, send: Send) -> None:
        """Close the response of a request we cancelled, if the transport still allows."""
        try:
            with anyio.move_on_after(1, shield=True):
                if not request.started:
                    await send_error(send, 503, "the gateway is shutting down", "shutting_down")
                elif not request.complete:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception:  # the client may be gone already
            logger.debug("could not finish %s %s at shutdown", request.method, request.path, exc_info=True)

    def begin(self) -> None:
        """Refuse every new request from now on (503)."""
        self.closing = True

    def open_requests(self, *, streams: bool | None = None) -> int:
        """How many requests are open (only streams, only non-streams, or all)."""
        if streams is None:
            return len(self._open)
        return sum(1 for request in self._open if request.stream == streams)

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until only long-lived streams are open; False when ``timeout`` passed first."""
        with anyio.move_on_after(timeout if timeout > 0 else math.inf):
            while self.open_requests(streams=False):
                await anyio.sleep(0.02)
            return True
        return False

    async def close_all(self, grace: float = 1.0) -> int:
        """End every open request; returns how many there were.

        Each is told that its client went away; what still runs after ``grace`` seconds is
        cancelled.
        """
        requests = list(self._open)
        for request in requests:
            request.disconnect.set()
            for waiting in list(request.waiting):
                waiting.cancel()
        with anyio.move_on_after(grace):
            while self._open:
                await anyio.sleep(0.02)
        for request in list(self._open):
            request.scope.cancel()
        return len(requests)


# Known secrets out of every HTTP response: REST answers, event streams, MCP messages, errors.
#
# The secret values the process holds (``_redact.remember_secrets``: API keys, tokens, env and
# header values of the config) are masked in each response's headers and body before it leaves.
# A body with a ``Content-Length`` is held until it is complete, masked whole and sent with its
# new length; a streamed body (SSE: ``/api/v1/events``, the MCP streams) is masked chunk by chunk,
# and each chunk is one whole event. With no secret known the middleware is a pass-through.
class SecretsMiddleware:
    """Masks the known secret values in every HTTP response (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not len(SECRETS):
            await self.app(scope, receive, send)
            return
        held: Message | None = None  # the response start, while a sized body is gathered
        body = bytearray()

        async def masking_send(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                headers = [(name, mask_secret_bytes(value)) for name, value in message.get("headers", [])]
                message = {**message, "headers": headers}
                sized = any(name.lower() == b"content-length" for name, _ in headers)
                if sized and scope["method"] != "HEAD":
                    held = message
                    return
                await send(message)
            elif message["type"] == "http.response.body" and held is not None:
                body.extend(message.get("body", b""))
                if message.get("more_body", False):
                    return
                masked = mask_secret_bytes(bytes(body))
                start, held = held, None
                if len(masked) != len(body):
                    sized_headers = MutableHeaders(raw=list(start["headers"]))
                    sized_headers["content-length"] = str(len(masked))
                    start = {**start, "headers": sized_headers.raw}
                await send(start)
                await send({"type": "http.response.body", "body": masked, "more_body": False})
            elif message["type"] == "http.response.body":
                await send({**message, "body": mask_secret_bytes(message.get("body", b""))})
            else:
                await send(message)

        await self.app(scope, receive, masking_send)


# The request body cap (``gateway.maxRequestBytes``): 413 before the app sees an oversized body.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class BodyLimitMiddleware:
    """Reads a request body up to ``max_bytes`` and replays it; a larger one gets 413.

    A declared ``Content-Length`` over the cap is refused without reading. ``max_bytes`` 0 is off.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.max_bytes or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        body = bytearray()
        trailing: Message | None = None
        while True:
            message = await receive()
            if message["type"] != "http.request":
                trailing = message
                break
            body.extend(message.get("body", b""))
            if len(body) > self.max_bytes:
                await self._too_large(send)
                return
            if not message.get("more_body", False):
                break
        queue: list[Message] = [{"type": "http.request", "body": bytes(body), "more_body": False}]
        if trailing is not None:
            queue.append(trailing)

        async def replay() -> Message:
            if queue:
                return queue.pop(0)
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        await send_error(
            send,
            413,
            f"request body larger than {self.max_bytes} bytes (gateway.maxRequestBytes)",
            "payload_too_large",
        )


# One request per JSON-RPC id at a time in a Streamable HTTP session.
#
# JSON-RPC ids must be unique among a client's requests in flight. The SDK's session keys each
# request's response stream by its id, so a second request that reuses the id of one still running
# takes over its stream: one of the two never gets an answer and its client hangs. This answers such
# a request at once with a JSON-RPC ``Invalid Request`` error (HTTP 400) naming the id, and leaves
# the first one alone. The id is free again once the first request's response is complete: the
# SDK's handler may still be tidying up then, but its client has the answer and may reuse the id.
#
# Only POSTs within a session (with ``Mcp-Session-Id``) are tracked: requests without one (a
# 2026-era request, an ``initialize``) each have an exchange of their own.
INVALID_REQUEST = -32600


def request_id_of(body: bytes) -> str | None:
    """The id of the JSON-RPC request in ``body`` as canonical JSON (``7`` and ``"7"`` differ),
    or None when the body is not one request (a notification, a response, not JSON)."""
    try:
        message: Any = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message or message.get("id") is None:
        return None
    return json.dumps(message["id"])


class UniqueRequestIds:
    """Refuses a request whose id is already in flight in its session (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._in_flight: set[tuple[str, str]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = Headers(scope=scope).get(MCP_SESSION_ID_HEADER) if scope["type"] == "http" else None
        if session is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await buffered_body(receive)
        request_id = request_id_of(body)
        if request_id is None:
            await self.app(scope, replay, send)
            return
        key = (session, request_id)
        if key in self._in_flight:
            await _refuse(send, request_id)
            return
        self._in_flight.add(key)

        async def answering(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self._in_flight.discard(key)  # answered: the client may reuse the id at once

        try:
            await self.app(scope, replay, answering)
        finally:
            self._in_flight.discard(key)


async def buffered_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that hands it to the app again."""
    body = bytearray()
    queue: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            queue.append(message)
            break
        body.extend(message.get("body", b""))
        if not message.get("more_body", False):
            break
    queue.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

    async def replay() -> Message:
        return queue.pop(0) if queue else await receive()

    return bytes(body), replay


async def _refuse(send: Send, request_id: str) -> None:
    error = {
        "jsonrpc": "2.0",
        "id": json.loads(request_id),
        "error": {
            "code": INVALID_REQUEST,
            "message": f"a request with id {request_id} is still in flight in this session; "
            "use a new id for each request",
        },
    }
    body = json.dumps(error).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# The routing headers of a 2026-07-28 request (``mcp-2026-07-28.md`` B8): ``MCP-Protocol-Version``,
# ``Mcp-Method`` and ``Mcp-Name`` must agree with the body, else ``-32020`` HeaderMismatch, HTTP 400.
#
# The SDK's server checks them (``mcp.shared.inbound.classify_inbound_request``) for every request
# it routes to its 2026-07-28 path, but it routes by the ``MCP-Protocol-Version`` header alone: a
# request whose envelope (``params._meta``) names 2026-07-28 while its header is missing or names
# a handshake-era version goes to the handshake path, which answers "Missing session ID". This
# gives such a request the SDK's own verdict instead: the header does not match the envelope.
# Only session-less POSTs whose header does not already route them to the 2026 path are read.
def envelope_header_mismatch(body: bytes, headers: Mapping[str, str]) -> dict[str, Any] | None:
    """The JSON-RPC error answering a request whose envelope names a 2026-07-28-era version that
    its routing headers (lower-case names) contradict; None for any other body (pure)."""
    try:
        message: Any = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    if not isinstance(version, str) or version in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    verdict = classify_inbound_request(message, headers=headers)
    if getattr(verdict, "code", None) != HEADER_MISMATCH:
        return None
    request_id = message.get("id")
    return {
        "jsonrpc": "2.0",
        "id": request_id if isinstance(request_id, str | int) else None,
        "error": {"code": HEADER_MISMATCH, "message": getattr(verdict, "message", "header mismatch")},
    }


class EnvelopeHeaders:
    """Answers ``-32020`` (HTTP 400) to a 2026-07-28 request whose headers route it to the
    handshake-era path (see above)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        modern_route = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
        if modern_route or headers.get(MCP_SESSION_ID_HEADER) is not None:
            await self.app(scope, receive, send)
            return
        body, replay = await buffered_body(receive)
        error = envelope_header_mismatch(body, {key.lower(): value for key, value in headers.items()})
        if error is None:
            await self.app(scope, replay, send)
            return
        payload = json.dumps(error).encode()
        status = ERROR_CODE_HTTP_STATUS.get(HEADER_MISMATCH, 400)
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})
