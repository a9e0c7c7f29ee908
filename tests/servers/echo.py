"""Fixture: a plain MCP server built with the SDK's MCPServer: ``echo`` and ``add``.

Run as ``echo.py`` (stdio), ``echo.py sse PORT`` or ``echo.py http PORT`` (uvicorn on 127.0.0.1);
tests serving it in-process call ``build()`` for a fresh instance.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def build() -> MCPServer:
    """A new echo server (an MCPServer's HTTP session manager runs only once per instance)."""
    mcp = MCPServer("echo", version="0.0.1")

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return mcp


if __name__ == "__main__":
    server = build()
    if len(sys.argv) > 2:
        transport = "sse" if sys.argv[1] == "sse" else "streamable-http"
        server.run(transport, host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
