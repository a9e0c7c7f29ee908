"""The REST API under ``/api/v1/`` and ``/metrics``: thin handlers over the GatewayService.

Errors are JSON ``{"error": {"message", "type"}}`` with proper statuses: 400 (bad JSON or
fields), 404, 405, 413 (middleware), 415 (a POST that is not ``application/json``, which also
blocks simple-request CSRF), 429 (busy, with ``Retry-After``), 503 (starting, failed, stopping;
``state_error`` when the state store fails, answered for every route in ``app.py``).

``POST /api/v1/query`` answers the structured result; with ``Accept: text/event-stream`` it
streams the run's events (``event: <type>``) and then ``event: result`` (``QueryAnswer``). A
client that disconnects cancels its run. ``GET /api/v1/events`` streams the events of the runs the caller may
see (optionally of one ``session_id``) through a bounded per-listener buffer.

``GET /api/v1/runs`` lists the record of finished and running runs, newest first (filters:
``reason``, ``text``, ``limit``, ``before``; ``next_before`` in the answer pages on), and
``GET /api/v1/runs/{id}`` shows one with its ``timeline`` (the list leaves the timelines out: each
can be large); they survive restarts with a durable ``state.url``.

Each caller sees only its own conversations, runs, events and pending approvals (``callers.py``):
another's answer 404 as if they did not exist. ``GET /api/v1/tools`` lists only the tools the
caller may use (``gateway.callers.NAME.tools``), and its queries run only with those. ``GET /api/v1/health`` answers everyone with its
status and version; its details (model, endpoint with credentials masked, servers and their
errors, load) need a caller's token when the gateway has tokens.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import anyio
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._redact import redact_text, redact_url
from .._version import __version__
from ..events import Event
from ..exceptions import StateError
from ..loop.agent import Agent
from ..loop.result import RunResult, TerminationReason
from ..messages import JSONObject
from ..telemetry.base import continued_from
from ..tools.pins import ToolPins, pin_report
from .callers import Caller, caller_of
from .eventbus import BufferedSink
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from .middleware import error_body
from .service import (
    CLIENT_GONE,
    Admission,
    Busy,
    GatewayService,
    NotReady,
    QueryInput,
    QueryInputError,
    UnknownSession,
    parse_query_input,
    unencodable_at,
)

logger = logging.getLogger(__name__)


MAX_RUNS_PAGE = 500
REASONS = frozenset(reason.value for reason in TerminationReason)


def run_filters(params: Mapping[str, str]) -> JSONObject:
    """``GET /api/v1/runs`` query parameters: ``reason`` (a termination reason), ``text`` (in
    the query or the answer, any case), ``limit`` (1-500, default 50), ``before`` (a ``started``
    time: the page after one whose last run started then).

    Raises:
        ApiError: 400 for a bad value or an unknown parameter.
    """
    unknown = sorted(set(params) - {"reason", "text", "limit", "before"})
    if unknown:
        raise ApiError(400, f"unknown parameter(s): {', '.join(unknown)}", "invalid_request")
    reason = params.get("reason") or None
    if reason is not None and reason not in REASONS:
        raise ApiError(400, f"reason must be one of {', '.join(sorted(REASONS))}", "invalid_request")
    text = params.get("text") or None
    if text is not None and (len(text) > 500 or unencodable_at(text) is not None):
        raise ApiError(400, "text must be at most 500 characters", "invalid_request")
    try:
        limit = int(params.get("limit", "50"))
        before = float(params["before"]) if params.get("before") else None
    except ValueError:
        raise ApiError(
            400, "limit must be an integer and before a number (a run's started time)", "invalid_request"
        ) from None
    if not 1 <= limit <= MAX_RUNS_PAGE or (before is not None and not math.isfinite(before)):
        raise ApiError(400, f"limit must be 1-{MAX_RUNS_PAGE} and before a finite number", "invalid_request")
    return {"reason": reason, "text": text, "limit": limit, "before": before}


class RestAPI:
    """The REST handlers over one GatewayService."""

    def __init__(self, service: GatewayService) -> None:
        self.service = service

    def routes(self) -> list[Route]:
        return [
            Route("/api/v1/health", self.health, methods=["GET"]),
            Route("/api/v1/tools", self.tools, methods=["GET"]),
            Route("/api/v1/tools/pins", self.tool_pins, methods=["GET"]),
            Route("/api/v1/tools/pins/{server}/accept", self.accept_pins, methods=["POST"]),
            Route("/api/v1/query", self.query, methods=["POST"]),
            Route("/api/v1/approvals", self.approvals, methods=["GET"]),
            Route("/api/v1/approvals/{approval_id}", self.resolve_approval, methods=["POST"]),
            Route("/api/v1/sessions", self.sessions, methods=["GET"]),
            Route("/api/v1/sessions/{session_id}", self.delete_session, methods=["DELETE"]),
            Route("/api/v1/runs", self.runs, methods=["GET"]),
            Route("/api/v1/runs/{run_id}", self.run, methods=["GET"]),
            Route("/api/v1/events", self.events, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
        ]

    def _agent(self) -> Agent:
        service = self.service
        if service.agent is None or service.state != "ready":
            raise from_exception(NotReady(service.state, service.error or f"the agent is {service.state}"))
        return service.agent

    # ---------------------------------------------------------------- read-only

    async def health(self, request: Request) -> Response:
        """``ok`` or ``degraded`` (serving: 200), ``starting``, ``stopping`` or ``failed`` (503)."""
        status, reasons = self.service.health()
        body: JSONObject = {"status": status, "version": __version__}
        caller = caller_of(request.scope)
        if caller is not None:  # a known caller (or a gateway without tokens)
            body["reasons"] = [redact_text(reason) for reason in reasons]
            body.update(self._health_details(caller))
        return JSONResponse(body, status_code=200 if status in ("ok", "degraded") else 503)

    def _health_details(self, caller: Caller) -> JSONObject:
        """What health tells a known caller (its own tools counted); credentials are masked even then."""
        service = self.service
        servers = [status.to_dict() for status in service.server_status()]
        for server in servers:
            if isinstance(server.get("error"), str):
                server["error"] = redact_text(server["error"])
        model_server = dict(service.model_server)
        if isinstance(model_server.get("error"), str):
            model_server["error"] = redact_text(model_server["error"])
        return {
            "model": service.config.llm.model,
            "endpoint": redact_url(service.config.llm.endpoint),
            "model_server": model_server,
            "tool_count": len(service.tool_specs(caller)),
            "servers_up": sum(1 for server in servers if server.get("status") == "up"),
            "servers_down": sum(1 for server in servers if server.get("status") not in ("up", "disabled")),
            "servers": servers,
            "state": service.store.to_dict(),
            "queries_in_flight": service.in_flight,
            "queries_queued": service.admissions.queued,
            "error": redact_text(service.error) if service.error else None,
        }

    async def tools(self, request: Request) -> Response:
        """The tools the caller may use (``gateway.callers.NAME.tools``), and the servers."""
        try:
            caller = the_caller(request)
            self._agent()
        except ApiError as exc:
            return exc.response()
        tools = [
            {
                "name": spec.name,
                "server": spec.server,
                "mcp_name": spec.mcp_name,
                "description": spec.description,
                "parameters": spec.parameters,
                "annotations": dict(spec.annotations),
            }
            for spec in self.service.tool_specs(caller)
        ]
        servers = [status.to_dict() for status in self.service.server_status()]
        return JSONResponse({"tools": tools, "count": len(tools), "servers": servers})

    # ---------------------------------------------------------------- tool pins (admin)

    def _pins(self) -> ToolPins:
        self._agent()
        pins = self.service.pins
        if pins is None:
            raise ApiError(404, "this gateway pins no tool definitions", "not_found")
        return pins

    async def tool_pins(self, request: Request) -> Response:
        """Every server's pinned tool definitions against the ones last seen: the changes,
        their diff, what is withheld now, and hidden-instruction findings (``tools/pins.py``)."""
        try:
            pins = self._pins()
        except ApiError as exc:
            return exc.response()
        report = pin_report(await pins.store.list("pinned"), await pins.store.list("seen"))
        for entry in report:
            entry["held"] = list(pins.held.get(str(entry["server"]), ()))
        return JSONResponse({"servers": report})

    async def accept_pins(self, request: Request) -> Response:
        """Pin a server's tool definitions as last seen (the operator reviewed the diff)."""
        server = request.path_params["server"]
        try:
            pins = self._pins()
            if server not in self.service.config.mcp_servers:
                raise ApiError(404, f"no tool server {server!r} in agent.json", "not_found")
        except ApiError as exc:
            return exc.response()
        caller = caller_of(request.scope)
        pin = await pins.accept(server, by=caller.name if caller else "rest")
        if pin is None:
            return error_response(404, f"server {server!r} has listed no tools yet", "not_found")
        return JSONResponse({"server": server, "accepted": sorted(pin.tools), "at": pin.at, "by": pin.by})

    async def metrics(self, request: Request) -> Response:
        return PlainTextResponse(self.service.metrics.render(), media_type=METRICS_CONTENT_TYPE)

    # ---------------------------------------------------------------- query

    async def query(self, request: Request) -> Response | QueryAnswer:
        service = self.service
        try:
            caller = the_caller(request)
            data = await read_json_object(request)
            try:
                query = parse_query_input(data, max_query_chars=service.gateway.max_query_chars)
            except QueryInputError as exc:
                service.metrics.reject("invalid")
                raise ApiError(400, str(exc), "invalid_request") from None
            service.ready_agent()  # starting, failed or stopping: 503 at once, without queueing
        except NotReady as exc:
            return from_exception(exc).response()
        except ApiError as exc:
            return exc.response()
        stream = "text/event-stream" in request.headers.get("accept", "")
        return QueryAnswer(service, caller, query, stream)

    # ---------------------------------------------------------------- approvals and sessions

    async def approvals(self, request: Request) -> Response:
        try:
            caller = the_caller(request)
            agent = self._agent()
        except ApiError as exc:
            return exc.response()
        pending = [
            item.to_dict() for item in await agent.approvals.pending() if caller.sees_approval(item.caller)
        ]
        return JSONResponse({"pending": pending, "count": len(pending)})

    async def resolve_approval(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        try:
            agent = self._agent()
            data = await read_json_object(request)
            approved = data.get("approved")
            if not isinstance(approved, bool):
                raise ApiError(400, "'approved' (true or false) is required", "invalid_request")
            reason = data.get("reason", "")
            if not isinstance(reason, str) or unencodable_at(reason) is not None or len(reason) > 2000:
                raise ApiError(400, "'reason' must be text of at most 2000 characters", "invalid_request")
            unknown = sorted(set(data) - {"approved", "reason"})
            if unknown:
                raise ApiError(400, f"unknown field(s): {', '.join(unknown)}", "invalid_request")
        except ApiError as exc:
            return exc.response()
        caller = caller_of(request.scope)
        if not await agent.approvals.resolve(
            approval_id, approved, reason, by=caller.name if caller else None
        ):
            return error_response(
                404, f"no pending approval {approval_id!r} (unknown or already resolved)", "not_found"
            )
        return JSONResponse({"id": approval_id, "approved": approved, "status": "resolved"})

    async def sessions(self, request: Request) -> Response:
        try:
            caller = the_caller(request)
            agent = self._agent()
        except ApiError as exc:
            return exc.response()
        sessions = [item.to_dict() for item in await agent.sessions.list() if caller.sees(item.owner)]
        return JSONResponse({"sessions": sessions, "count": len(sessions)})

    async def delete_session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            caller = the_caller(request)
            agent = self._agent()
        except ApiError as exc:
            return exc.response()
        session = await agent.sessions.get(session_id)
        if session is None or not caller.sees(session.owner):
            return error_response(404, f"no session {session_id!r}", "not_found")
        await agent.sessions.delete(session_id)
        return JSONResponse({"id": session_id, "status": "deleted"})

    # ---------------------------------------------------------------- runs

    async def runs(self, request: Request) -> Response:
        """The caller's runs (an admin's: everyone's), newest first; see ``run_filters``."""
        try:
            caller = the_caller(request)
            agent = self._agent()
            filters = run_filters(request.query_params)
        except ApiError as exc:
            return exc.response()
        found = await agent.runs.list(caller=None if caller.admin else caller.name, **filters)
        runs = [item.to_dict() for item in found]
        for item in runs:
            item.pop("timeline", None)  # in GET /api/v1/runs/{id} only
        body: JSONObject = {"runs": runs, "count": len(runs)}
        if runs and len(runs) == filters["limit"]:
            body["next_before"] = runs[-1].get("started")  # the next page: ?before=<this>
        return JSONResponse(body)

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            caller = the_caller(request)
            agent = self._agent()
        except ApiError as exc:
            return exc.response()
        found = await agent.runs.get(run_id)
        if found is None or not caller.sees(found.caller):
            return error_response(404, f"no run {run_id!r}", "not_found")
        return JSONResponse(found.to_dict())

    # ---------------------------------------------------------------- events

    async def events(self, request: Request) -> Response | EventStream:
        try:
            caller = the_caller(request)
        except ApiError as exc:
            return exc.response()
        session_id = request.query_params.get("session_id") or None
        bus = self.service.bus

        def visible(event: Event) -> bool:
            return caller.sees(event.caller) and (session_id is None or event.session_id == session_id)

        async def produce(write: Callable[[bytes], Awaitable[None]], gone: anyio.Event) -> None:
            with bus.listen(visible=visible) as listener:
                if self.service.shared_events is not None:  # other replicas send their runs' events
                    await self.service.shared_events.listening()
                await write(b": listening\n\n")
                async with anyio.create_task_group() as tg:

                    async def stop_when_gone() -> None:
                        await gone.wait()
                        listener.close()

                    tg.start_soon(stop_when_gone)
                    async for event in listener:
                        await write(sse_frame(event.type, event.to_dict()))
                    tg.cancel_scope.cancel()

        return EventStream(produce)


# How the REST API answers: JSON errors, request bodies read safely, server-sent-event streams
# that stop when their client leaves, and the answer to ``POST /api/v1/query``.
#
# ``QueryAnswer`` takes the query's slot inside the response, so the slot is held exactly as long
# as the run: a client that leaves while queued gives up its place, one that leaves while running
# cancels its run. Busy and not-ready are answered before anything streams (429, 503), as is an
# unknown conversation (404).

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
