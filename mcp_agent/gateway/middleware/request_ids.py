"""One request per JSON-RPC id at a time in a Streamable HTTP session.

JSON-RPC ids must be unique among a client's requests in flight. The SDK's session keys each
request's response stream by its id, so a second request that reuses the id of one still running
takes over its stream: one of the two never gets an answer and its client hangs. This answers such
a request at once with a JSON-RPC ``Invalid Request`` error (HTTP 400) naming the id, and leaves
the first one alone. The id is free again once the first request's response is complete: the
SDK's handler may still be tidying up then, but its client has the answer and may reuse the id.

Only POSTs within a session (with ``Mcp-Session-Id``) are tracked: requests without one (a
2026-era request, an ``initialize``) each have an exchange of their own.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
        body, replay = await _buffered(receive)
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


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
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
