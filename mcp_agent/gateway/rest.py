"""The REST API under ``/api/v1/`` and ``/metrics``: thin handlers over the GatewayService.

Errors are JSON ``{"error": {"message", "type"}}`` with proper statuses: 400 (bad JSON or
fields), 404, 405, 413 (middleware), 415 (a POST that is not ``application/json``, which also
blocks simple-request CSRF), 429 (busy, with ``Retry-After``), 503 (starting, failed, stopping;
``state_error`` when the state store fails, answered for every route in ``app.py``).

``POST /api/v1/query`` answers the structured result; with ``Accept: text/event-stream`` it
streams the run's events (``event: <type>``) and then ``event: result`` (``rest_answers.py``). A
client that disconnects cancels its run. ``GET /api/v1/events`` streams the events of the runs the caller may
see (optionally of one ``session_id``) through a bounded per-listener buffer.

``GET /api/v1/runs`` lists the record of finished and running runs, newest first (filters:
``reason``, ``text``, ``limit``, ``before``; ``next_before`` in the answer pages on), and
``GET /api/v1/runs/{id}`` shows one with its ``timeline`` (the list leaves the timelines out: each
can be large); they survive restarts with a durable ``state.url``.

Each caller sees only its own conversations, runs, events and pending approvals (``callers.py``):
another's answer 404 as if they did not exist. ``GET /api/v1/health`` answers everyone with its
status and version; its details (model, endpoint with credentials masked, servers and their
errors, load) need a caller's token when the gateway has tokens.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from .._redact import redact_text, redact_url
from .._version import __version__
from ..events import Event
from ..loop.result import TerminationReason
from ..messages import JSONObject
from ._runner import RunBook, as_dict
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from .middleware import caller_of
from .query_input import QueryInputError, parse_query_input, unencodable_at
from .rest_answers import (
    ApiError,
    EventStream,
    QueryAnswer,
    error_response,
    from_exception,
    read_json_object,
    sse_frame,
    the_caller,
)
from .service import GatewayService, NotReady

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

    def _agent(self) -> Any:
        service = self.service
        if service.agent is None or service.state != "ready":
            raise from_exception(NotReady(service.state, service.error or f"the agent is {service.state}"))
        return service.agent

    # ---------------------------------------------------------------- read-only

    async def health(self, request: Request) -> Response:
        """``ok`` or ``degraded`` (serving: 200), ``starting``, ``stopping`` or ``failed`` (503)."""
        status, reasons = self.service.health()
        body: JSONObject = {"status": status, "version": __version__}
        if caller_of(request.scope) is not None:  # a known caller (or a gateway without tokens)
            body["reasons"] = [redact_text(reason) for reason in reasons]
            body.update(self._health_details())
        return JSONResponse(body, status_code=200 if status in ("ok", "degraded") else 503)

    def _health_details(self) -> JSONObject:
        """What health tells a known caller; credentials are masked even then."""
        service = self.service
        servers = [as_dict(status) for status in service.server_status()]
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
            "tool_count": len(service.tool_specs()),
            "servers_up": sum(1 for server in servers if server.get("status") == "up"),
            "servers_down": sum(1 for server in servers if server.get("status") not in ("up", "disabled")),
            "servers": servers,
            "state": service.store.to_dict(),
            "queries_in_flight": service.in_flight,
            "queries_queued": service.admissions.queued,
            "error": redact_text(service.error) if service.error else None,
        }

    async def tools(self, request: Request) -> Response:
        try:
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
            for spec in self.service.tool_specs()
        ]
        servers = [as_dict(status) for status in self.service.server_status()]
        return JSONResponse({"tools": tools, "count": len(tools), "servers": servers})

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
        pending = [as_dict(item) for item in await agent.approvals.pending()]
        pending = [item for item in pending if caller.sees_approval(item.get("caller"))]
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
        sessions = [as_dict(item) for item in await agent.sessions.list()]
        sessions = [item for item in sessions if caller.sees(item.get("owner"))]
        return JSONResponse({"sessions": sessions, "count": len(sessions)})

    async def delete_session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            caller = the_caller(request)
            agent = self._agent()
        except ApiError as exc:
            return exc.response()
        session = await agent.sessions.get(session_id)
        if session is None or not caller.sees(getattr(session, "owner", None)):
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
        book: RunBook | None = getattr(agent, "runs", None)  # an agent without a record shows none
        found = (
            [] if book is None else await book.list(caller=None if caller.admin else caller.name, **filters)
        )
        runs = [as_dict(item) for item in found]
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
        book: RunBook | None = getattr(agent, "runs", None)
        found = None if book is None else await book.get(run_id)
        if found is None or not caller.sees(getattr(found, "caller", None)):
            return error_response(404, f"no run {run_id!r}", "not_found")
        return JSONResponse(as_dict(found))

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
