"""Requests over one live session of a tool server: its tool list (page by page), a tool call,
and any other request (resources, prompts), each failure translated once, here.

``call_tool_on`` never raises for what the server does: a timeout (the server gets
``notifications/cancelled`` from the SDK and stays usable), a crash (the exit code and stderr
tail), a JSON-RPC error or an invalid result come back as error ``ToolResult``\\ s.
``ask_on`` raises ``MCPError`` with a JSON-RPC code for every failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT
from pydantic import ValidationError

from ..config import RemoteServerConfig, StdioServerConfig
from ..messages import JSONObject, ToolResult
from ..telemetry.base import note_tool_transport
from ._failures import crash_error
from ._repair import ResponseRepairer, describe_validation_error
from ._server_tools import call_result
from ._stdio import StdioChild

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = TypeVar("P")
E = TypeVar("E")

CLIENT_INFO = types.Implementation(name="mcp-agent", version="0.1.0")
MAX_PAGES = 100
"""The most pages of one list a server is asked for (a cursor that loops cannot trap us)."""


class ProgressCallback(Protocol):
    """Receives a call's ``notifications/progress``: ``(progress, total, message)``."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


@dataclass
class LiveSession:
    """One running incarnation of a server: its session and what sits under it."""

    session: ClientSession
    repairer: ResponseRepairer
    child: StdioChild | None
    ended: anyio.Event
    """Set when the transport's read side ended: the server exited or the connection dropped."""


async def list_pages(
    live: LiveSession,
    server: str,
    what: str,
    fetch: Callable[[ClientSession, types.PaginatedRequestParams | None], Awaitable[P]],
    items_of: Callable[[P], Sequence[E]],
    *,
    max_items: int | None = None,
) -> list[E] | None:
    """Every page of one list (at most ``MAX_PAGES``); None when it has more than ``max_items``."""
    listed: list[E] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await fetch(live.session, params)
        listed.extend(items_of(page))
        if max_items is not None and len(listed) > max_items:
            return None
        cursor = getattr(page, "next_cursor", None)
        if not cursor or cursor in seen:
            break
        seen.add(cursor)
    else:
        logger.warning("%s: stopped listing %s after %d pages", server, what, MAX_PAGES)
    return listed


async def _tools_page(
    session: ClientSession, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return await session.list_tools(params=params)


async def list_tool_pages(live: LiveSession, server: str) -> list[types.Tool]:
    """Every page of ``tools/list`` (at most ``MAX_PAGES``)."""
    return await list_pages(live, server, "tools", _tools_page, lambda page: page.tools) or []


async def ask_on(
    live: LiveSession,
    server: str,
    what: str,
    request: Callable[[ClientSession], Awaitable[T]],
    timeout: float | None,
) -> T:
    """Send one request (not a tool call) on the session; see ``ServerConnection.ask``."""
    try:
        with anyio.fail_after(timeout or None):
            return await request(live.session)
    except TimeoutError:
        raise MCPError(
            REQUEST_TIMEOUT, f"{what}: server {server} did not answer within {timeout:g} s"
        ) from None
    except MCPError:
        raise
    except ValidationError as exc:
        problem = describe_validation_error(exc)
        raise MCPError(
            INTERNAL_ERROR, f"{what}: server {server} returned an invalid result ({problem})"
        ) from None
    except Exception as exc:
        logger.warning("%s: %s failed: %r", server, what, exc)
        raise MCPError(INTERNAL_ERROR, f"{what}: server {server}: {type(exc).__name__}: {exc}") from None


async def call_tool_on(
    live: LiveSession,
    *,
    server: str,
    config: StdioServerConfig | RemoteServerConfig,
    mcp_name: str,
    arguments: JSONObject,
    shown: str,
    start: float,
    timeout: float | None,
    on_progress: ProgressCallback | None,
) -> ToolResult:
    """Call ``mcp_name`` on the session; every failure comes back as an error result."""

    def failed(text: str) -> ToolResult:
        return ToolResult(text, is_error=True, elapsed_ms=(time.perf_counter() - start) * 1000)

    remote = config if isinstance(config, RemoteServerConfig) else None
    note_tool_transport(  # for the call's span (telemetry.py), when traced
        transport="pipe" if remote is None else "tcp",
        url=remote.url if remote is not None else None,
        protocol_version=live.session.protocol_version,
    )
    try:
        result = await live.session.call_tool(
            mcp_name, arguments, read_timeout_seconds=timeout or None, progress_callback=on_progress
        )
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT:
            return failed(f"tool {shown} timed out after {timeout:g} s")
        if exc.code == CONNECTION_CLOSED and live.child is None and not live.ended.is_set():
            # a remote server's response stream failed, not its connection (an SSE event over
            # maxMessageBytes: "SSE stream failed: Server-sent event exceeded the N byte limit.")
            hint = f" (mcpServers.{server}.maxMessageBytes)" if "byte limit" in exc.message else ""
            return failed(f"tool {shown} failed: server {server}: {exc.message}{hint}")
        if exc.code == CONNECTION_CLOSED:
            crash = await crash_error(server, live.child, None)
            return failed(f"tool {shown} failed: server {crash}")
        return failed(f"tool {shown} failed: {exc.message} (MCP error {exc.code})")
    except ValidationError as exc:
        problem = describe_validation_error(exc)
        return failed(f"tool {shown} failed: the server returned an invalid result ({problem})")
    except Exception as exc:  # RuntimeError from the SDK, transport errors of remote servers
        logger.warning("%s: call to %s failed: %r", server, mcp_name, exc)
        return failed(f"tool {shown} failed: {type(exc).__name__}: {exc}")
    return call_result(result, start)
