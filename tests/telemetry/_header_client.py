"""A real MCP client in a process without any TracerProvider, so the only trace context it sends is
the ``traceparent`` HTTP header it is given (the SDK puts nothing in ``_meta``).

    python _header_client.py URL TRANSPORT TRACEPARENT   # TRANSPORT: http or sse; prints the answer
"""

from __future__ import annotations

import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, transport: str, traceparent: str) -> None:
    with anyio.fail_after(60):
        await connect(url, transport, traceparent)


async def connect(url: str, transport: str, traceparent: str) -> None:
    headers = {"traceparent": traceparent}
    if transport == "sse":
        async with sse_client(f"{url}/sse", headers=headers, timeout=30) as (read, write):
            await ask(read, write)
        return
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
    ):
        await ask(read, write)


async def ask(read: object, write: object) -> None:
    async with ClientSession(read, write) as session:  # type: ignore[arg-type]
        await session.initialize()
        result = await session.call_tool("agent_query", {"query": "echo via headers"})
        print(result.content[0].text)  # type: ignore[union-attr]


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
