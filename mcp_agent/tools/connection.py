"""One MCP tool server for its whole life: spawn or connect, handshake, list, call, restart.

A ``ServerConnection`` supervises one server from ``agent.json``. ``run()`` starts it (a stdio
child through our own transport, or a remote server over Streamable HTTP or SSE), does the
legacy ``initialize`` handshake (mcp-sdk-2.md G3), lists its tools page by page through the
repair filter (G1, G2), and then serves until the server exits or the connection drops. Then
it restarts it with exponential backoff inside a restart budget; meanwhile its tools answer
"temporarily unavailable". A server that fails its first start is reported (exit code, stderr
tail, or "did not start within N s") and stays failed: the others serve regardless.

``ask()`` sends any other request (resources, prompts: see ``catalog.py``) through the live
session, under a timeout, and turns every failure into an ``MCPError`` with a JSON-RPC code.
The server's ``notifications/resources/list_changed`` and ``prompts/list_changed`` are passed
to ``on_catalog_change``.

``call()`` never raises for anything the server does: a timeout (the server gets
``notifications/cancelled`` from the SDK and stays usable), a crash (in-flight calls fail at
once with the exit code and stderr tail), a JSON-RPC error or an invalid result all come back
as error ``ToolResult``\\ s. Cancellation of the caller propagates and cancels the call on the
server.

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

import collections
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import ClientSession, MCPError
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT
from pydantic import ValidationError

from .._types import JSONObject
from ..config import RemoteServerConfig, StdioServerConfig
from ..exceptions import ToolServerError, ToolServerExited, ToolServerStartError
from ..messages import ToolResult
from ..telemetry import inject_trace_headers, note_tool_transport
from ._orphans import ChildRecords
from ._repair import ResponseRepairer, describe_validation_error
from ._server_tools import ServerTool, call_result, filter_warnings, server_tool
from ._stdio import StdioChild, open_stdio_transport
from .cache import CachedList, ToolCache

logger = logging.getLogger(__name__)

ServerState = Literal["starting", "up", "failed", "disabled", "restarting", "idle"]
CatalogKind = Literal["resources", "prompts"]
T = TypeVar("T")


StartMode = Literal["background", "wait", "on_call"]
"""How a server with a cached tool list starts: ``background`` (offer the cached list at once,
start now), ``wait`` (offer nothing until the first real start), ``on_call`` (offer the cached
list, start on the first call). A server without a cached list always starts at once, and
``lazy`` servers behave as ``on_call``."""


async def _trace_headers(request: httpx2.Request) -> None:
    """Each HTTP request to a remote server carries the trace context of the call it serves."""
    inject_trace_headers(request.headers)


def _traced_http_client(
    headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
) -> httpx2.AsyncClient:
    """The SDK's client for the SSE transport, with ``_trace_headers``."""
    client = create_mcp_http_client(headers, timeout, auth)
    client.event_hooks["request"].append(_trace_headers)
    return client


class ProgressCallback(Protocol):
    """Receives a call's ``notifications/progress``: ``(progress, total, message)``."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


CLIENT_INFO = types.Implementation(name="mcp-agent", version="0.1.0")
_EXIT_WAIT_SECONDS = 1.0
_MAX_PAGES = 100
_STDERR_SHOWN = 5


@dataclass(frozen=True)
class RestartPolicy:
    """When a crashed server is started again.

    Attributes:
        first_delay: seconds before the first restart; each further one doubles it.
        max_delay: the longest wait between restarts.
        max_restarts: restarts allowed within ``window_seconds``; one more crash and the server
            stays failed.
        window_seconds: the window of the restart budget.
    """

    first_delay: float = 0.5
    max_delay: float = 30.0
    max_restarts: int = 5
    window_seconds: float = 300.0

    def delay(self, restart: int) -> float:
        """The wait before the ``restart``-th restart of the window (1-based)."""
        return float(min(self.max_delay, self.first_delay * 2.0 ** max(0, restart - 1)))


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups (G5)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _error_text(error: ToolServerError) -> str:
    """The error without the leading server name (the status already names the server)."""
    text = str(error)
    prefix = f"{error.server}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


@dataclass
class _Live:
    """One running incarnation of a server: its session and what sits under it."""

    session: ClientSession
    repairer: ResponseRepairer
    child: StdioChild | None
    ended: anyio.Event
    """Set when the transport's read side ended: the server exited or the connection dropped."""


@dataclass
class _Attempt:
    """The outcome of one start, filled in by the incarnation task."""

    ready: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    child: StdioChild | None = None
    error: ToolServerError | None = None
    ended: ToolServerError | None = None
    started_at: float = field(default_factory=time.perf_counter)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    idle_stopped: bool = False
    """Stopped on purpose after ``idleSeconds`` without calls (a lazy server), not crashed."""


class ServerConnection:
    """One configured tool server: its state, its tools, and calls to them.

    Attributes:
        name: the server's name in agent.json.
        config: its configuration.
        state: ``starting``, ``up``, ``restarting``, ``failed`` or ``disabled``.
        error: why it is not up (or the last crash while it restarts), else None.
        tools: its tools, as last listed (kept while it restarts, emptied when it fails).
        startup_ms: how long its last successful start took (spawn to tools listed).
        restarts: how many times it was restarted.
        capabilities: what the server declared at its last start (None before the first).
        glob_warnings: its ``allowTools``/``denyTools`` globs that match none of the tools it
            last listed (each logged as a warning when it first appears).
    """

    def __init__(
        self,
        name: str,
        config: StdioServerConfig | RemoteServerConfig,
        *,
        on_change: Callable[[], None] = lambda: None,
        on_catalog_change: Callable[[CatalogKind], None] = lambda kind: None,
        policy: RestartPolicy | None = None,
        records: ChildRecords | None = None,
        cache: ToolCache | None = None,
        start: StartMode = "background",
    ) -> None:
        self.name = name
        self.config = config
        self.state: ServerState = "disabled" if config.disabled else "starting"
        self.error: str | None = None
        self.tools: tuple[ServerTool, ...] = ()
        self.startup_ms: float | None = None
        self.restarts = 0
        self.capabilities: types.ServerCapabilities | None = None
        self.glob_warnings: tuple[str, ...] = ()
        self.stopped = anyio.Event()
        self.running = False
        self._on_change = on_change
        self._on_catalog_change = on_catalog_change
        self._policy = policy or RestartPolicy()
        self._live: _Live | None = None
        self._junk_before = 0
        self._child: StdioChild | None = None
        self._scope = anyio.CancelScope()
        self._records = records
        self._cache = cache
        self._start_mode: StartMode = "on_call" if config.lazy and start == "background" else start
        self._cached: CachedList | None = None
        self.from_cache = False
        self.cache_note: str | None = None
        """For ``doctor``: how the server's cached list compared with the one it gave."""
        self._wanted = anyio.Event()
        self._changed = anyio.Event()
        self._in_flight = 0
        self._last_used = time.monotonic()
        if cache is not None and not config.disabled:
            self._cached = cache.load(name, config)
        if self._cached is not None and self._start_mode != "wait":
            self.tools = self._tools_from_cache(self._cached)
            self.from_cache = True
            if self._start_mode == "on_call":
                self.state = "idle"

    def _tools_from_cache(self, cached: CachedList) -> tuple[ServerTool, ...]:
        tools: list[ServerTool] = []
        for raw in cached.tools:
            try:
                shell = types.Tool.model_validate(
                    {
                        "name": raw["name"],
                        "description": raw.get("description")
                        if isinstance(raw.get("description"), str)
                        else None,
                        "inputSchema": {"type": "object"},
                        "execution": raw.get("execution") if isinstance(raw.get("execution"), dict) else None,
                    }
                )
            except ValidationError:
                shell = types.Tool(name=str(raw["name"]), input_schema={"type": "object"})
            tool = server_tool(self.name, self.config, shell, raw)
            if tool is not None:
                tools.append(tool)
        return tuple(tools)

    @property
    def junk_lines(self) -> int:
        """Non-JSON-RPC stdout lines seen over every incarnation."""
        return self._junk_before + (self._child.junk_lines if self._child else 0)

    def stop(self) -> None:
        """Stop supervising; ``stopped`` is set once the server and its processes are gone."""
        self._scope.cancel()

    def _set(self, state: ServerState, error: str | None = None) -> None:
        self.state, self.error = state, error
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        self._on_change()

    def _deferred(self) -> bool:
        """Whether to wait for a call before starting (a lazy server whose list is known)."""
        return self._start_mode == "on_call" and self._cached is not None and not self._wanted.is_set()

    async def wait_started(self) -> None:
        """Ask a lazy or idle server to start, and wait until it is up or has failed (bounded by
        its ``startupTimeoutSeconds``, plus a second for the process to be spawned)."""
        self._wanted.set()
        timeout = self.config.startup_timeout_seconds
        with anyio.move_on_after(timeout + 1.0 if timeout else None):
            while self.state in ("starting", "idle") and not self._scope.cancel_called:
                await self._changed.wait()

    # -------------------------------------------------------------- supervision

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start the server, then keep it running until ``stop()`` or cancellation.

        ``task_status.started()`` fires once the first start has succeeded or failed. Never
        raises for the server's failures.
        """
        self.running = True
        try:
            with self._scope:
                if self.config.disabled:
                    task_status.started()
                    return
                if self.from_cache:  # offered from the cache: the hub need not wait for the start
                    task_status.started()
                    task_status = anyio.TASK_STATUS_IGNORED
                await self._supervise(task_status)
        finally:
            self._live = None
            self.stopped.set()

    async def _supervise(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        first = True
        recent: collections.deque[float] = collections.deque()
        failed_starts = 0
        async with anyio.create_task_group() as tg:
            while True:
                if self._deferred():
                    if first:
                        task_status.started()
                        first = False
                    await self._wanted.wait()
                    self._set("starting")
                attempt = await self._start_once(tg)
                if attempt.error is None:
                    failed_starts = 0
                    if first:
                        task_status.started()
                        first = False
                    await attempt.done.wait()
                    if attempt.idle_stopped:
                        logger.info(
                            "tool server %s: stopped after %g s without calls",
                            self.name,
                            self.config.idle_seconds,
                        )
                        continue
                    failure = attempt.ended or ToolServerExited("stopped", server=self.name)
                elif self.state != "restarting":
                    # a first start (or a start from idle) failed: retried with backoff, for ever;
                    # a cached list is withdrawn meanwhile (its calls say the server is down)
                    failed_starts += 1
                    delay = self._policy.delay(failed_starts)
                    self._set("failed", _error_text(attempt.error))
                    if failed_starts == 1:
                        logger.warning("tool server %s (retrying in %g s)", attempt.error, delay)
                    else:
                        logger.info("tool server %s (retry %d in %g s)", attempt.error, failed_starts, delay)
                    if first:
                        task_status.started()
                        first = False
                    await attempt.done.wait()
                    await anyio.sleep(delay)
                    continue
                else:
                    failure = attempt.error
                await attempt.done.wait()
                now = time.monotonic()
                while recent and now - recent[0] > self._policy.window_seconds:
                    recent.popleft()
                reason = _error_text(failure)
                if len(recent) >= self._policy.max_restarts:
                    self.tools = ()
                    self._set(
                        "failed",
                        f"gave up after {len(recent)} restarts in {self._policy.window_seconds:g} s: {reason}",
                    )
                    logger.error("tool server %s: gave up restarting: %s", self.name, reason)
                    return
                recent.append(now)
                self.restarts += 1
                delay = self._policy.delay(len(recent))
                logger.warning("tool server %s; restarting in %g s", failure, delay)
                self._set("restarting", reason)
                await anyio.sleep(delay)

    async def _start_once(self, tg: anyio.abc.TaskGroup) -> _Attempt:
        """Start one incarnation and wait until it serves, fails, or runs out of time."""
        attempt = _Attempt()
        scope = attempt.scope
        tg.start_soon(self._incarnation, attempt, scope)
        timeout = self.config.startup_timeout_seconds or None
        with anyio.move_on_after(timeout):
            await attempt.ready.wait()
        if not attempt.ready.is_set():
            # The incarnation is cancelled and reaps its process in the background.
            scope.cancel()
            child = attempt.child
            attempt.error = ToolServerStartError(
                f"did not start within {timeout:g} s",
                server=self.name,
                stderr_tail=child.stderr_tail(_STDERR_SHOWN) if child else (),
            )
        return attempt

    async def _incarnation(self, attempt: _Attempt, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                try:
                    async with self._transport(attempt) as (read, write):
                        await self._serve(attempt, read, write)
                except Exception as exc:
                    if not attempt.ready.is_set():
                        attempt.error = await self._start_error(exc, attempt.child)
                    else:
                        attempt.ended = await self._crash_error(attempt.child, exc)
        finally:
            if self._live is not None and self._live.child is attempt.child:
                self._live = None
            attempt.ready.set()
            attempt.done.set()

    @asynccontextmanager
    async def _transport(self, attempt: _Attempt) -> AsyncIterator[TransportStreams]:
        config = self.config
        if isinstance(config, StdioServerConfig):
            async with open_stdio_transport(config, name=self.name, records=self._records) as child:
                if self._child is not None:
                    self._junk_before += self._child.junk_lines
                self._child = attempt.child = child
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

    async def _serve(
        self,
        attempt: _Attempt,
        read: ReadStream[SessionMessage | Exception],
        write: WriteStream[SessionMessage],
    ) -> None:
        repairer = ResponseRepairer(self.name)
        refresh_send, refresh_read = anyio.create_memory_object_stream[None](1)

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                # a refresh already pending is enough; a closed stream means this incarnation ends
                with suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                    refresh_send.send_nowait(None)
            elif isinstance(message, types.ResourceListChangedNotification):
                self._on_catalog_change("resources")
            elif isinstance(message, types.PromptListChangedNotification):
                self._on_catalog_change("prompts")
            elif isinstance(message, Exception):
                logger.warning("%s: transport error: %s", self.name, message)

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logger.debug("%s log [%s]: %s", self.name, params.level, params.data)

        async with refresh_send, refresh_read, anyio.create_task_group() as tg:
            if attempt.child is not None:  # our stdio transport repairs as it reads: no extra hop
                attempt.child.repair = repairer.repair
                ended = attempt.child.ended
            else:
                repaired_send, repaired_read = anyio.create_memory_object_stream[SessionMessage | Exception](
                    0
                )
                tg.start_soon(repairer.pump, read, repaired_send)
                read, ended = repaired_read, repairer.ended
            async with ClientSession(
                read,
                write,
                message_handler=on_message,
                logging_callback=on_log,
                client_info=CLIENT_INFO,
            ) as session:
                init = await session.initialize()
                self.capabilities = init.capabilities
                live = _Live(session, repairer, attempt.child, ended)
                self.tools = await self._list_tools(live)
                self.startup_ms = round((time.perf_counter() - attempt.started_at) * 1000, 1)
                self._live = live
                self._last_used = time.monotonic()
                self._set("up")
                attempt.ready.set()
                tg.start_soon(self._refresh_tools, live, refresh_read)
                if self.config.lazy and self.config.idle_seconds:
                    tg.start_soon(self._stop_when_idle, attempt)
                await ended.wait()
                attempt.ended = await self._crash_error(attempt.child, None)
                self._set("restarting", _error_text(attempt.ended))  # "failed" if the budget is spent
            tg.cancel_scope.cancel()

    async def _stop_when_idle(self, attempt: _Attempt) -> None:
        """End this incarnation once no call has run for ``idleSeconds`` (a lazy server)."""
        idle = self.config.idle_seconds
        while True:
            left = self._last_used + idle - time.monotonic()
            if left <= 0 and self._in_flight == 0:
                break
            await anyio.sleep(left if left > 0 else idle)
        # "idle" before the process goes: a call from now on asks for a new start
        attempt.idle_stopped = True
        self._wanted = anyio.Event()
        self._live = None
        self._set("idle")
        attempt.scope.cancel()

    async def _refresh_tools(self, live: _Live, requests: MemoryObjectReceiveStream[None]) -> None:
        async for _ in requests:
            try:
                with anyio.fail_after(self.config.startup_timeout_seconds or None):
                    tools = await self._list_tools(live)
            except Exception as exc:  # the old list stays; the next change tries again
                logger.warning("%s: re-listing tools after tools/list_changed failed: %r", self.name, exc)
                continue
            logger.info("%s: tools changed (%d now)", self.name, len(tools))
            self.tools = tools
            self._on_change()

    async def _list_tools(self, live: _Live) -> tuple[ServerTool, ...]:
        """Every page of ``tools/list``, filtered and compiled."""
        listed: list[types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await live.session.list_tools(params=params)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        else:
            logger.warning("%s: stopped listing tools after %d pages", self.name, _MAX_PAGES)
        self._remember(
            [
                live.repairer.raw_tools.get(t.name)
                or t.model_dump(by_alias=True, exclude_none=True, mode="json")
                for t in listed
            ]
        )
        warnings = filter_warnings(self.name, self.config, [t.name for t in listed])
        for warning in [w for w in warnings if w not in self.glob_warnings]:
            logger.warning("%s", warning)
        self.glob_warnings = warnings
        return tuple(
            tool
            for t in listed
            if (tool := server_tool(self.name, self.config, t, live.repairer.raw_tools.get(t.name)))
            is not None
        )

    def _remember(self, raw: list[JSONObject]) -> None:
        """Cache what the server listed when it differs from what the cache holds."""
        capabilities = (
            self.capabilities.model_dump(by_alias=True, exclude_none=True, mode="json")
            if self.capabilities
            else {}
        )
        listed = CachedList(tuple(raw), capabilities)
        self.from_cache = False
        if listed.tools == (self._cached.tools if self._cached else None):
            self.cache_note = "the cached list was up to date"
            return
        if self._cache is not None:
            self.cache_note = "the cached list was out of date: updated" if self._cached else "list cached"
        self._cached = listed
        if self._cache is not None and self._cache.save(self.name, self.config, listed.tools, capabilities):
            logger.debug("%s: cached its tool list (%d tools)", self.name, len(raw))

    # ------------------------------------------------------------------ errors

    async def _exit_info(self, child: StdioChild | None) -> tuple[int | None, tuple[str, ...]]:
        if child is None:
            return None, ()
        with anyio.move_on_after(_EXIT_WAIT_SECONDS):
            await child.exited.wait()
        return child.returncode, child.stderr_tail(_STDERR_SHOWN)

    async def _start_error(self, exc: BaseException, child: StdioChild | None) -> ToolServerStartError:
        leaves = _leaves(exc)
        for leaf in leaves:
            if isinstance(leaf, ToolServerStartError):
                return leaf
        code, tail = await self._exit_info(child)
        if code is not None:
            message = "exited during start-up"
        else:
            leaf = next((e for e in leaves if isinstance(e, MCPError)), leaves[0])
            message = f"start-up failed: {type(leaf).__name__}: {leaf}"
        return ToolServerStartError(message, server=self.name, exit_code=code, stderr_tail=tail)

    async def _crash_error(self, child: StdioChild | None, exc: BaseException | None) -> ToolServerExited:
        code, tail = await self._exit_info(child)
        if code is not None:
            message = "exited"
        elif child is not None:
            message = "closed its stdout"
        else:
            message = "connection closed" + (f": {_leaves(exc)[0]}" if exc is not None else "")
        return ToolServerExited(message, server=self.name, exit_code=code, stderr_tail=tail)

    # ------------------------------------------------------------ other requests

    def offers(self, kind: CatalogKind) -> bool:
        """Whether the server is up and declared the ``resources`` or ``prompts`` capability."""
        capabilities = self.capabilities
        return self.state == "up" and capabilities is not None and getattr(capabilities, kind) is not None

    async def ask(
        self, what: str, request: Callable[[ClientSession], Awaitable[T]], *, timeout: float | None = None
    ) -> T:
        """Send one request (not a tool call) through the live session.

        Args:
            what: the request, for messages (``resources/read demo://x``).
            request: sends it on the session it is given and returns the result.
            timeout: seconds before the request is abandoned (and cancelled on the server).

        Raises:
            MCPError: the server's own error as it sent it, or one made here (the code says
                which: ``REQUEST_TIMEOUT``, ``INTERNAL_ERROR`` for a server that is down, a
                dropped connection or an invalid result).
        """
        live = self._live
        if live is None or live.ended.is_set() or self.state != "up":
            reason = f": {self.error}" if self.error else ""
            raise MCPError(INTERNAL_ERROR, f"{what}: server {self.name} is {self.state}{reason}")
        try:
            with anyio.fail_after(timeout or None):
                return await request(live.session)
        except TimeoutError:
            raise MCPError(
                REQUEST_TIMEOUT, f"{what}: server {self.name} did not answer within {timeout:g} s"
            ) from None
        except MCPError:
            raise
        except ValidationError as exc:
            problem = describe_validation_error(exc)
            raise MCPError(
                INTERNAL_ERROR, f"{what}: server {self.name} returned an invalid result ({problem})"
            ) from None
        except Exception as exc:
            logger.warning("%s: %s failed: %r", self.name, what, exc)
            raise MCPError(
                INTERNAL_ERROR, f"{what}: server {self.name}: {type(exc).__name__}: {exc}"
            ) from None

    # -------------------------------------------------------------------- calls

    async def call(
        self,
        mcp_name: str,
        arguments: JSONObject,
        *,
        timeout: float | None = None,
        display_name: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> ToolResult:
        """Call one of this server's tools; every failure comes back as an error result.

        Args:
            mcp_name: the tool's name on this server.
            arguments: the (validated) arguments.
            timeout: seconds before the call is abandoned and cancelled on the server; None or
                0 for none.
            display_name: the name the model knows the tool by, for messages.
            on_progress: receives the server's progress notifications for this call.
        """
        shown = display_name or mcp_name
        start = time.perf_counter()
        self._in_flight += 1
        try:
            if self.state in ("starting", "idle"):
                await self.wait_started()
            return await self._call(mcp_name, arguments, shown, start, timeout, on_progress)
        finally:
            self._in_flight -= 1
            self._last_used = time.monotonic()

    async def _call(
        self,
        mcp_name: str,
        arguments: JSONObject,
        shown: str,
        start: float,
        timeout: float | None,
        on_progress: ProgressCallback | None,
    ) -> ToolResult:
        live = self._live

        def failed(text: str) -> ToolResult:
            return ToolResult(text, is_error=True, elapsed_ms=(time.perf_counter() - start) * 1000)

        if live is None or live.ended.is_set() or self.state != "up":
            state = "not responding" if self.state == "up" else self.state
            reason = f": {self.error}" if self.error else ""
            return failed(f"tool {shown} is temporarily unavailable: server {self.name} is {state}{reason}")
        remote = self.config if isinstance(self.config, RemoteServerConfig) else None
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
                hint = f" (mcpServers.{self.name}.maxMessageBytes)" if "byte limit" in exc.message else ""
                return failed(f"tool {shown} failed: server {self.name}: {exc.message}{hint}")
            if exc.code == CONNECTION_CLOSED:
                crash = await self._crash_error(live.child, None)
                return failed(f"tool {shown} failed: server {crash}")
            return failed(f"tool {shown} failed: {exc.message} (MCP error {exc.code})")
        except ValidationError as exc:
            problem = describe_validation_error(exc)
            return failed(f"tool {shown} failed: the server returned an invalid result ({problem})")
        except Exception as exc:  # RuntimeError from the SDK, transport errors of remote servers
            logger.warning("%s: call to %s failed: %r", self.name, mcp_name, exc)
            return failed(f"tool {shown} failed: {type(exc).__name__}: {exc}")
        return call_result(result, start)
