"""How the REST API answers: JSON errors, request bodies read safely, server-sent-event streams
that stop when their client leaves, and the answer to ``POST /api/v1/query``.

``QueryAnswer`` takes the query's slot inside the response, so the slot is held exactly as long
as the run: a client that leaves while queued gives up its place, one that leaves while running
cancels its run. Busy and not-ready are answered before anything streams (429, 503), as is an
unknown conversation (404).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import anyio
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from ..exceptions import StateError
from ..loop.result import RunResult
from ..messages import JSONObject
from ..telemetry.base import continued_from
from .callers import Caller
from .eventbus import BufferedSink
from .middleware import caller_of
from .middleware._errors import error_body
from .query_input import QueryInput
from .service import CLIENT_GONE, Admission, Busy, GatewayService, NotReady, UnknownSession

logger = logging.getLogger(__name__)

PING_SECONDS = 15.0
STREAM_BUFFER = 1024


class ApiError(Exception):
    """An error answer: status, message and a short machine-readable type."""

    def __init__(
        self, status: int, message: str, type_: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.headers = dict(headers or {})

    def response(self) -> Response:
        return Response(error_body(self.message, self.type), self.status, self.headers, "application/json")


def error_response(
    status: int, message: str, type_: str, headers: Mapping[str, str] | None = None
) -> Response:
    return ApiError(status, message, type_, headers).response()


def the_caller(request: Request) -> Caller:
    """The caller of a request that passed authentication (the middleware put it in the scope)."""
    caller = caller_of(request.scope)
    if caller is None:  # a route that needs no token was reached without one: see nothing
        raise ApiError(401, "this needs a caller's bearer token", "unauthorized")
    return caller


def from_exception(exc: Busy | NotReady) -> ApiError:
    if isinstance(exc, Busy):
        return ApiError(429, str(exc), "busy", {"Retry-After": str(exc.retry_after)})
    return ApiError(503, exc.message, exc.state, {"Retry-After": "2"} if exc.state == "starting" else None)


async def read_json_object(request: Request) -> JSONObject:
    """The request's JSON object body.

    Raises:
        ApiError: 415 when not ``application/json``, 400 when not a JSON object.
    """
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        raise ApiError(
            415, "send the body as JSON with Content-Type: application/json", "unsupported_media_type"
        )
    body = await request.body()
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except RecursionError:
        raise ApiError(400, "the body is not acceptable JSON: nested too deeply", "invalid_json") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer of over 4300 digits
        raise ApiError(400, f"the body is not valid JSON: {exc}", "invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object", "invalid_request")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def sse_frame(event: str, data: Any) -> bytes:
    """One server-sent event (``data`` as one line of JSON)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'), default=str)}\n\n".encode()


def query_body(result: RunResult) -> JSONObject:
    """The REST query answer: ``agent_query``'s structuredContent plus ``ok`` and ``error``."""
    return {**result.to_structured(), "ok": result.ok, "error": None if result.ok else result.error_text()}


class EventStream:
    """A server-sent-event response whose producer stops when the client disconnects."""

    def __init__(
        self, produce: Callable[[Callable[[bytes], Awaitable[None]], anyio.Event], Awaitable[None]]
    ) -> None:
        self.produce = produce

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = anyio.Event()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-store"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )

        async def write(chunk: bytes) -> None:
            if not gone.is_set():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone.set()

            async def ping() -> None:
                while True:
                    await anyio.sleep(PING_SECONDS)
                    await write(b": ping\n\n")

            tg.start_soon(watch)
            tg.start_soon(ping)
            await self.produce(write, gone)
            tg.cancel_scope.cancel()
        if not gone.is_set():
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class QueryAnswer:
    """The answer to ``POST /api/v1/query``: a slot (waiting in the queue if need be), then the run.

    The slot is taken here, inside the response, so that it is held exactly as long as the run:
    a client that leaves while queued gives up its place, one that leaves while running cancels
    its run. Busy and not-ready are answered before anything streams (429, 503), as is an
    unknown conversation (404).
    """

    def __init__(self, service: GatewayService, caller: Caller, request: QueryInput, stream: bool) -> None:
        self.service = service
        self.caller = caller
        self.request = request
        self.stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with continued_from(Headers(scope=scope)):  # the caller's traceparent, when traced
            await self._answer(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        admission: Admission | None = None
        refusal: ApiError | None = None
        with anyio.CancelScope() as waiting:  # the client may leave while queued
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    waiting.cancel()

                tg.start_soon(watch)
                try:
                    admission = await self.service.admit(self.caller)
                except (Busy, NotReady) as exc:
                    refusal = from_exception(exc)
                finally:
                    tg.cancel_scope.cancel()
        if admission is None:
            if refusal is not None:
                await refusal.response()(scope, receive, send)
            return  # else the client left while queued
        try:
            try:
                request = await self.service.conversation(admission, self.request)
            except UnknownSession as exc:
                self.service.metrics.reject("invalid")
                await ApiError(404, str(exc), "unknown_session").response()(scope, receive, send)
                return
            except StateError as exc:
                await ApiError(503, f"the conversation store failed: {exc}", "state_error").response()(
                    scope, receive, send
                )
                return
            if self.stream:
                await EventStream(partial(self._stream, request, admission))(scope, receive, send)
            else:
                await self._json(request, admission, scope, receive, send)
        finally:
            admission.release()

    async def _json(
        self, request: QueryInput, admission: Admission, scope: Scope, receive: Receive, send: Send
    ) -> None:
        result: RunResult | None = None
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                admission.cancel.set(CLIENT_GONE)

            tg.start_soon(watch)
            try:
                result = await self.service.run(request, admission)
            finally:
                tg.cancel_scope.cancel()
        assert result is not None
        await JSONResponse(query_body(result))(scope, receive, send)

    async def _stream(
        self,
        request: QueryInput,
        admission: Admission,
        write: Callable[[bytes], Awaitable[None]],
        gone: anyio.Event,
    ) -> None:
        sink = BufferedSink(STREAM_BUFFER)
        result: RunResult | None = None
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                nonlocal result
                try:
                    result = await self.service.run(request, admission, events=sink)
                finally:
                    sink.close()

            async def cancel_on_disconnect() -> None:
                await gone.wait()
                admission.cancel.set(CLIENT_GONE)

            tg.start_soon(run)
            tg.start_soon(cancel_on_disconnect)
            try:
                async for event in sink:
                    await write(sse_frame(event.type, event.to_dict()))
            finally:
                sink.aclose_receiver()
            tg.cancel_scope.cancel()
        if result is not None:
            await write(sse_frame("result", query_body(result)))
