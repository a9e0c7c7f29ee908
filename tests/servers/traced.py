"""Fixture: an MCP server whose ``whoami`` tool answers with the trace context it was called with.

Run as ``traced.py`` (stdio), ``traced.py sse PORT`` or ``traced.py http PORT`` (uvicorn on
127.0.0.1). ``whoami`` returns JSON: ``{"header": <the HTTP traceparent header or null>,
"meta": <params._meta.traceparent or null>}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer


def build() -> MCPServer:
    mcp = MCPServer("traced", version="0.0.1")

    @mcp.tool()
    def whoami(ctx: Context[Any, Any]) -> str:
        """Tell which trace context this call came with."""
        request = ctx.request_context
        headers = getattr(request.request, "headers", None)
        meta = request.meta or {}
        return json.dumps(
            {
                "header": headers.get("traceparent") if headers is not None else None,
                "meta": meta.get("traceparent"),
            }
        )

    return mcp


if __name__ == "__main__":
    server = build()
    if len(sys.argv) > 2:
        transport = "sse" if sys.argv[1] == "sse" else "streamable-http"
        server.run(transport, host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
