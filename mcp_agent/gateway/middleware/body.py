"""The request body cap (``gateway.maxRequestBytes``): 413 before the app sees an oversized body."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import send_error

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
