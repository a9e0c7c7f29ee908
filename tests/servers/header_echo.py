"""Fixture: a remote MCP server that gives away the credentials it was called with.

Run as ``header_echo.py http PORT`` (Streamable HTTP, uvicorn on 127.0.0.1). Its tools:

- ``whoami``: JSON of the request's URL and every header but the transport's own;
- ``long``: the same JSON, then ``size`` characters of filler with the credentials written into
  it every few hundred characters (a result long enough to be paged);
- ``note``: answers with its ``text`` (a tool to gate, whose arguments are kept with the approval).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

_TRANSPORT_HEADERS = {
    "accept",
    "content-length",
    "content-type",
    "host",
    "mcp-protocol-version",
    "mcp-session-id",
}


def _credentials(ctx: Context[Any, Any]) -> str:
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    url = str(getattr(request, "url", ""))
    shown = {name: value for name, value in headers.items() if name.lower() not in _TRANSPORT_HEADERS}
    return json.dumps({"url": url, "headers": shown}, sort_keys=True)


def build() -> MCPServer:
    mcp = MCPServer("header_echo", version="0.0.1")

    @mcp.tool()
    def whoami(ctx: Context[Any, Any]) -> str:
        """Tell which URL and headers this call came with."""
        return _credentials(ctx)

    @mcp.tool()
    def long(size: int, ctx: Context[Any, Any]) -> str:
        """A long text that quotes the call's credentials now and then."""
        shown = _credentials(ctx)
        parts = [shown]
        while sum(map(len, parts)) < size:
            parts.append("filler " * 40)
            parts.append(shown)
        return "\n".join(parts)

    @mcp.tool()
    def note(text: str) -> str:
        """Keep a note (answers with it)."""
        return f"noted: {text}"

    return mcp


if __name__ == "__main__":
    build().run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
