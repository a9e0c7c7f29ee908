"""Graceful shutdown for HTTP: refuse new requests, then end the ones still open.

Long-lived responses (the MCP SSE stream, a Streamable HTTP GET stream, ``/api/v1/events``)
never end on their own, so they would hold a graceful shutdown open until its deadline. This
middleware tracks every request: ``begin()`` refuses new requests with 503, ``wait_idle()``
waits for ordinary requests (the ones that carry a result) to finish, and ``close_all()`` ends
what is left. It first tells each open request that its client went away (``receive`` answers
``http.disconnect``), which every streaming response here handles as a normal end, closing its
own resources; a request that still runs after that is cancelled. A started response is then
closed cleanly.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import send_error

logger = logging.getLogger(__name__)


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
                content_type = Headers(raw=message.get("headers", [])).get("content-type", "")
                request.stream = request.method == "GET" and content_type.startswith("text/event-stream")
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
            return await _race(receive, request.disconnect)

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
        with anyio.move_on_after(grace):
            while self._open:
                await anyio.sleep(0.02)
        for request in list(self._open):
            request.scope.cancel()
        return len(requests)


async def _race(receive: Receive, disconnect: anyio.Event) -> Message:
    """The next message from ``receive``, or ``http.disconnect`` as soon as ``disconnect`` is set."""
    result: Message = {"type": "http.disconnect"}
    async with anyio.create_task_group() as tg:

        async def real() -> None:
            nonlocal result
            result = await receive()
            tg.cancel_scope.cancel()

        async def stop() -> None:
            await disconnect.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(real)
        tg.start_soon(stop)
    return result
