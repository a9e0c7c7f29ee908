"""``create_app(config)``: the whole gateway as one ASGI app on one port.

Routes (DESIGN.md "HTTP routes"):

- ``GET /sse`` + ``POST /messages/``: MCP over SSE (also ``GET /mcp/sse`` + ``POST /mcp/messages/``);
- ``POST|GET|DELETE /mcp``: MCP over Streamable HTTP (stateful unless ``gateway.stateless``);
- ``/api/v1/...`` and ``GET /metrics``: ``rest.py``;
- ``GET /``: the dashboard (a static page; its API calls carry the token);
- ``GET /.well-known/oauth-protected-resource`` (and ``.../mcp``): with ``gateway.oauth``, the
  gateway's protected resource metadata (RFC 9728, ``auth/resource.py``).

Middleware, outermost first: drain (shutdown), secrets (the known secret values masked in every
response), Host/Origin (421/403), CORS (allowed origins only), callers (401 without a known
token, 403 without the route's scope), body cap (413); then the lean path of a 2026-07-28
client's ``tools/call`` of ``agent_query`` or an exposed tool (``mcp/fast_call.py``), which
passes every other request on to the routes.
The Host/Origin rule is the one rule of every route: the SDK's own DNS-rebinding check is off
(it would be a second, different rule). The SDK binds each MCP session to the caller that
opened it. The lifespan owns the Agent (through the GatewayService) and the Streamable HTTP
session manager.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import anyio
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from ..config import AgentConfig
from ..exceptions import StateError
from ..state.base import State
from .callers import CallerAuthMiddleware
from .lifespan import open_service
from .mcp.fast_call import FastCalls
from .mcp.quiet_logs import LateErrorGuard
from .mcp.resumable import RESUME_RETRY_MS, EventBudget, ResumableSessionManager, Streams, WatchDisconnect
from .mcp.server import AgentMCPServer, create_mcp_server
from .mcp.sessions import McpSessionLimits
from .middleware import (
    BodyLimitMiddleware,
    DrainMiddleware,
    EnvelopeHeaders,
    SecretsMiddleware,
    UniqueRequestIds,
)
from .rest import RestAPI, error_response
from .security import CORSMiddleware, HostOriginMiddleware, host_rules
from .service import AgentFactory, GatewayService, describe

logger = logging.getLogger(__name__)

SDK_MAX_BODY = 4 * 1024 * 1024


class SseEndpoint:
    """``GET /sse``: one MCP connection over the SSE transport, for as long as the client stays."""

    def __init__(self, transport: SseServerTransport, server: AgentMCPServer) -> None:
        self.transport = transport
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with self.transport.connect_sse(scope, receive, send) as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())
        except ValueError as exc:
            if "validation failed" not in str(exc):  # the SDK already answered 421/403 otherwise
                raise


def _dashboard() -> tuple[bytes, str]:
    """The page and a Content-Security-Policy that allows exactly its own inline script and style."""
    page = resources.files("mcp_agent").joinpath("dashboard", "index.html").read_bytes()
    text = page.decode("utf-8")

    def hashes(tag: str) -> str:
        blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.S)
        return " ".join(
            f"'sha256-{base64.b64encode(hashlib.sha256(block.encode()).digest()).decode()}'"
            for block in blocks
        )

    csp = (
        f"default-src 'none'; script-src {hashes('script') or chr(39) + 'none' + chr(39)}; "
        f"style-src {hashes('style') or chr(39) + 'none' + chr(39)}; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return page, csp


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    message = {
        404: f"no route {request.url.path}",
        405: f"{request.method} is not allowed on {request.url.path}",
    }
    return error_response(exc.status_code, message.get(exc.status_code, str(exc.detail)), kind, exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal error (see the gateway's log)", "internal_error")


class GatewayApp:
    """The ASGI app of the gateway, with handles for tests and for graceful shutdown.

    Attributes:
        service: the GatewayService (agent, bus, metrics).
        tool: the MCP handler object (agent_query).
        mcp_server: the lowlevel MCP server.
        drain: the shutdown middleware.
    """

    def __init__(
        self,
        config: AgentConfig,
        *,
        factory: AgentFactory | None = None,
        bind_host: str | None = None,
        stateless: bool | None = None,
        state: State | None = None,
    ) -> None:
        gateway = config.gateway
        self.config = config
        self.factory = factory
        self.state = state
        self.stateless = gateway.stateless if stateless is None else stateless
        self.service = GatewayService(config)
        self.streams = Streams()
        self.mcp_server, self.tool = create_mcp_server(self.service, streams=self.streams)
        rules = host_rules(gateway, bind_host)
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # ours: HostOrigin
        body = gateway.max_request_bytes or SDK_MAX_BODY
        self.session_manager = ResumableSessionManager(
            app=self.mcp_server,
            budget=EventBudget(),
            streams=self.streams,
            stateless=self.stateless,
            security_settings=security,
            max_request_body_size=body,
            max_sessions=gateway.max_mcp_sessions,
            session_idle_timeout=gateway.mcp_session_idle_seconds,
            retry_interval=RESUME_RETRY_MS,
        )
        sse = SseServerTransport("/messages/", security_settings=security, max_request_body_size=body)
        sse_alias = SseServerTransport(
            "/mcp/messages/", security_settings=security, max_request_body_size=body
        )
        page, csp = _dashboard()
        page_headers = {
            "Content-Security-Policy": csp,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY",
            "Cache-Control": "no-store",
        }

        async def dashboard(request: Request) -> Response:
            return Response(page, media_type="text/html; charset=utf-8", headers=page_headers)

        async def no_icon(request: Request) -> Response:
            return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})

        rest = RestAPI(self.service)
        self.mcp_sessions = McpSessionLimits(
            None if self.stateless else self.session_manager,
            gateway.max_mcp_sessions,
            self.service.callers.share_of,
        )
        limit_sse, limit_http = self.mcp_sessions.limit_sse, self.mcp_sessions.limit_http
        routes: list[Route | Mount] = [
            Route("/", dashboard, methods=["GET"]),
            Route("/index.html", dashboard, methods=["GET"]),
            Route("/favicon.ico", no_icon, methods=["GET"]),  # browsers ask; none (and no 401)
            Route("/sse", limit_sse(SseEndpoint(sse, self.mcp_server)), methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
            Route("/mcp/sse", limit_sse(SseEndpoint(sse_alias, self.mcp_server)), methods=["GET"]),
            Mount("/mcp/messages/", app=sse_alias.handle_post_message),
            Route(
                "/mcp",
                limit_http(
                    LateErrorGuard(
                        UniqueRequestIds(
                            EnvelopeHeaders(WatchDisconnect(StreamableHTTPASGIApp(self.session_manager)))
                        )
                    )
                ),
                methods=["GET", "POST", "DELETE"],
            ),
            *rest.routes(),
        ]
        resource = self.service.resource
        if resource is not None:
            document = resource.metadata()

            async def resource_metadata(request: Request) -> Response:
                return JSONResponse(document, headers={"Cache-Control": "max-age=3600"})

            routes.extend(
                Route(path, resource_metadata, methods=["GET"]) for path in sorted(resource.metadata_paths)
            )
        self.starlette = Starlette(
            routes=routes,
            lifespan=self._lifespan,
            exception_handlers={
                HTTPException: _http_error,
                StateError: self._state_error,
                Exception: _server_error,
            },
        )
        inner: Any = self.starlette
        self.fast_calls: FastCalls | None = None
        if gateway.fast_calls:
            self.fast_calls = inner = FastCalls(inner, self.mcp_server, self.session_manager)
        inner = BodyLimitMiddleware(inner, gateway.max_request_bytes)
        inner = CallerAuthMiddleware(inner, self.service.callers, resource=resource)
        inner = CORSMiddleware(inner)
        inner = HostOriginMiddleware(inner, rules)
        inner = SecretsMiddleware(inner)
        self.drain = DrainMiddleware(inner)
        self._watch_metrics()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.drain(scope, receive, send)

    @asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """The service for the server's life. One that ends on an error, before the server asked
        it to stop (a task of its own failed), or that cannot start, makes the gateway give up
        (``GatewayService.give_up``): uvicorn would serve on without it, answering 503 forever."""
        asked_to_stop = False
        try:
            async with open_service(self.service, self.factory, state=self.state), self.session_manager.run():
                yield
                asked_to_stop = True
        except Exception as exc:
            if not asked_to_stop:
                self.service.give_up(f"its service ended: {describe(exc)}")
            raise

    async def _state_error(self, request: Request, exc: Exception) -> Response:
        """A request that met a failing store: a clear 503, and health says so at once."""
        assert isinstance(exc, StateError)
        self.service.store_failed(exc)
        logger.warning("%s %s: %s", request.method, request.url.path, exc)
        return error_response(503, f"the state store failed: {exc}", "state_error", {"Retry-After": "5"})

    def _watch_metrics(self) -> None:
        """The metrics read at each scrape of ``/metrics`` (the rest are counted from events)."""
        service, watch = self.service, self.service.metrics.watch

        def servers() -> list[dict[str, Any]]:
            return [status.to_dict() for status in service.server_status()]

        watch(
            "mcp_agent_server_up",
            "Tool servers by name: 1 while up, else 0.",
            lambda: {(str(s.get("name")),): float(s.get("status") == "up") for s in servers()},
            labels=("server",),
        )
        watch(
            "mcp_agent_servers_up",
            "Tool servers up now.",
            lambda: sum(s.get("status") == "up" for s in servers()),
        )
        watch("mcp_agent_tools", "Tools offered to the model.", lambda: len(service.tool_specs()))
        watch(
            "mcp_agent_tools_held",
            "Tools withheld by server: their definitions changed since pinned (tools/pins.py).",
            lambda: {(s,): float(len(t)) for s, t in service.pins.held.items()} if service.pins else {},
            labels=("server",),
        )
        watch(
            "mcp_agent_tool_definition_changes",
            "Changed tool definitions found by server (each a warning in the log).",
            lambda: {(s,): float(n) for s, n in service.pins.changes.items()} if service.pins else {},
            labels=("server",),
            kind="counter",
        )
        watch(
            "mcp_agent_tool_pins_accepted",
            "Changed tool definitions accepted by server (tools --accept, REST, dashboard).",
            lambda: {(s,): float(n) for s, n in service.pins.accepted.items()} if service.pins else {},
            labels=("server",),
            kind="counter",
        )
        watch("mcp_agent_queries_queued", "Queries waiting for a slot.", lambda: service.admissions.queued)
        watch("mcp_agent_state_up", "1 while the state store works, else 0.", lambda: float(service.store.ok))
        watch(
            "mcp_agent_events_dropped",
            "Events that slow listeners lost.",
            lambda: service.bus.dropped,
            kind="counter",
        )
        watch("mcp_agent_event_listeners", "Open /api/v1/events streams.", lambda: service.bus.listeners)
        watch(
            "mcp_agent_mcp_connections",
            "Legacy MCP connections that get tools/list_changed.",
            lambda: self.tool.connections,
        )
        watch(
            "mcp_agent_mcp_sessions",
            "Open MCP sessions (SSE connections and Streamable HTTP sessions).",
            lambda: sum(self.mcp_sessions.open_sessions().values()),
        )
        watch(
            "mcp_agent_http_requests_open",
            "HTTP requests open now (streams included).",
            self.drain.open_requests,
        )

    async def shutdown(self, *, query_timeout: float = 5.0, flush_timeout: float = 2.0) -> None:
        """Graceful shutdown of everything HTTP, before the server stops.

        Refuse new requests (503), tell running queries to stop and wait for their ``cancelled``
        results to go out, end the event streams, then end every request still open (the
        long-lived MCP and event streams), so nothing holds the server's shutdown open.
        """
        self.drain.begin()
        running = self.service.begin_shutdown()
        if running:
            logger.info("shutting down: cancelling %d running queries", running)
            if not await self.service.wait_idle(query_timeout):
                logger.warning("shutting down: queries still running after %.0f s", query_timeout)
        self.service.bus.close()
        await self.drain.wait_idle(flush_timeout)
        if self.drain.open_requests():
            await anyio.sleep(0.2)  # lets results queued on SSE streams reach their clients
        ended = await self.drain.close_all()
        if ended:
            logger.info("shutting down: closed %d open streams", ended)


def create_app(
    config: AgentConfig,
    *,
    factory: AgentFactory | None = None,
    bind_host: str | None = None,
    stateless: bool | None = None,
    state: State | None = None,
) -> GatewayApp:
    """The gateway's ASGI app for ``config`` (see the module docstring).

    Args:
        config: the whole configuration (``gateway`` decides the security rules).
        factory: builds the Agent (default ``assembly.open_agent``); tests inject their own.
        bind_host: the address the server binds (accepted as a Host header); default ``gateway.host``.
        stateless: override ``gateway.stateless`` (``serve --stateless``).
        state: the state, opened by the caller (``serve``); None: the lifespan opens what
            ``state.url`` names, or memory when it is unset.
    """
    return GatewayApp(config, factory=factory, bind_host=bind_host, stateless=stateless, state=state)
