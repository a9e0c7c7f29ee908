"""The caller's W3C trace context, continued by the runs its requests start (``telemetry.py``).

- Over MCP the SDK continues ``params._meta.traceparent`` itself: its OpenTelemetry middleware
  makes the ``tools/call agent_query`` server span the child of it, and the run's span the child
  of that. ``TraceHeaders``, put before the SDK's middleware, continues an HTTP ``traceparent``
  header instead when ``_meta`` carries none (a client that traces its HTTP requests but not its
  MCP messages).
- Over REST, ``QueryAnswer`` runs the query inside ``continued_from(request.headers)``.

Either way a span already current (an ASGI instrumentation's server span) wins, and nothing
happens when nothing is traced.
"""

from __future__ import annotations

from typing import Any

from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from ...telemetry.base import continued_from


class TraceHeaders:
    """MCP server middleware: an HTTP ``traceparent`` header is the parent when ``_meta`` has none."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        headers = getattr(ctx.request, "headers", None)
        meta = ctx.meta
        if headers is None or (meta is not None and meta.get("traceparent")):
            return await call_next(ctx)
        with continued_from(headers):
            return await call_next(ctx)


def continue_http_traces(server: Server[Any]) -> None:
    """Put ``TraceHeaders`` first in ``server``'s middleware (outside the SDK's span middleware)."""
    server.middleware.insert(0, TraceHeaders())
