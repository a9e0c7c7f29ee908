"""The transport to one tool server: a stdio child (``_stdio``), or a remote server over
Streamable HTTP or SSE through the SDK, each HTTP request carrying the trace context of the call
it serves (``telemetry.inject_trace_headers``).

Message sizes (``maxMessageBytes``). A stdio server's stdout is read by our own transport, which
never holds more than the limit of one line and fails the call a bigger response answers (see
``_stdio``). For remote servers the SDK reads and parses, and caps what it allows:

- Streamable HTTP: each SSE event is capped at ``maxMessageBytes`` (the SDK's
  ``max_sse_event_size``, 1 MiB by default); a bigger one fails only its call ("SSE stream
  failed: ... byte limit"), the connection stays up. A plain ``application/json`` response body
  (a server in ``json_response`` mode) is read whole by the SDK: **not capped**.
- SSE (the older transport): the SDK caps every event at 1 MiB whatever the config says, and a
  bigger one ends the connection (the server is then restarted like a crashed one).
- The SDK validates a remote message whole before our repair filter sees it (pydantic, about
  0.1 s of blocked event loop per MiB of tiny JSON objects); the repair then cuts content parts
  and oversized results as it does for stdio (``_big_messages.bound_result``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx2
from mcp.client._transport import TransportStreams
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ..config import RemoteServerConfig, StdioServerConfig
from ..telemetry.base import inject_trace_headers
from ._orphans import ChildRecords
from ._stdio import StdioChild, open_stdio_transport


async def _trace_headers(request: httpx2.Request) -> None:
    """Each HTTP request to a remote server carries the trace context of the call it serves."""
    inject_trace_headers(request.headers)


def _traced_http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """The SDK's client for the SSE transport, with ``_trace_headers``."""
    client = create_mcp_http_client(headers, timeout, auth)
    client.event_hooks["request"].append(_trace_headers)
    return client


@asynccontextmanager
async def open_server_transport(
    config: StdioServerConfig | RemoteServerConfig,
    *,
    name: str,
    records: ChildRecords | None,
    on_child: Callable[[StdioChild], None],
) -> AsyncIterator[TransportStreams]:
    """The read and write streams to the server ``name``; a stdio child is given to ``on_child``
    as soon as it is spawned (its stderr and exit code explain a failed start)."""
    if isinstance(config, StdioServerConfig):
        async with open_stdio_transport(config, name=name, records=records) as child:
            on_child(child)
            yield child.read_stream, child.write_stream
    elif config.transport == "sse":
        async with sse_client(
            config.url, headers=dict(config.headers) or None, httpx_client_factory=_traced_http_client
        ) as (read, write):
            yield read, write
    else:
        timeout = httpx2.Timeout(30, read=300)
        async with (
            httpx2.AsyncClient(
                headers=dict(config.headers),
                timeout=timeout,
                follow_redirects=True,
                event_hooks={"request": [_trace_headers]},
            ) as http,
            streamable_http_client(
                config.url, http_client=http, max_sse_event_size=config.max_message_bytes or None
            ) as (read, write),
        ):
            yield read, write
