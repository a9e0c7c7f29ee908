r"""One MCP tool server for its whole life: spawn or connect, handshake, list, call, restart.

A ``ServerConnection`` supervises one server from ``agent.json``. ``run()`` starts it (a stdio
child through our own transport, or a remote server over Streamable HTTP or SSE:
``open_server_transport``), does the legacy ``initialize`` handshake (mcp-sdk-2.md G3), lists
its tools page by page through the repair filter (G1, G2: ``session.py``; ``lists.py`` keeps
them, and the tool cache), and then serves until the server exits or the connection drops.
Then it restarts it with
exponential backoff inside a restart budget (``RestartPolicy``); meanwhile its tools answer
"temporarily unavailable". A server that fails its first start is reported (exit code, stderr
tail, or "did not start within N s": ``session.py``) and retried with backoff: the others
serve regardless.

``ask()`` sends any other request (resources, prompts: see ``catalog.py``) through the live
session, under a timeout, and turns every failure into an ``MCPError`` with a JSON-RPC code.
The server's ``notifications/resources/list_changed`` and ``prompts/list_changed`` are passed
to ``on_catalog_change``. What it sends back during an exposed call (progress, logs, its
sampling, elicitation and roots requests) and its ``notifications/resources/updated`` go through
its ``relay`` (``tools/relay.py``); ``set_log_level`` asks it for the clients' log level.

``call()`` never raises for anything the server does: a timeout (the server gets
``notifications/cancelled`` from the SDK and stays usable), a crash (in-flight calls fail at
once with the exit code and stderr tail), a JSON-RPC error or an invalid result all come back
as error ``ToolResult``\ s (``session.py``). Cancellation of the caller propagates and cancels
the call on the server. Message sizes (``maxMessageBytes``): see ``open_server_transport``.

Below the connection, the parts of that life: ``Incarnation`` (one start, until it ends), the
transport it opens, and when a server starts: the ``StartQueue`` of background starts (one per
hub), the ``RestartPolicy`` after a crash, and the ``Demand`` of calls (a lazy server starts on
its first call and stops when idle).
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, Self, TypeVar

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import ClientSession, MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...auth.upstream import UpstreamAuth
from ...config import RemoteServerConfig, StdioServerConfig
from ...exceptions import ToolServerError, ToolServerExited, ToolServerStartError
from ...messages import JSONObject, ToolResult
from ...telemetry.base import inject_trace_headers
from ..cache import ToolCache
from ..presentation import ServerTool
from ..relay import ServerRelay, current_channel
from ..status import ServerState
from ..stdio.processes import ChildRecords, start_problem
from ..stdio.transport import StdioChild, open_stdio_transport
from .caller_capabilities import CallerDispatcher
from .era import (
    Handshake,
    Watched,
    follow_list_changes,
    follow_resource_updates,
    handshake,
    is_modern,
    upstream_log_level,
)
from .lists import CatalogKind, KnownLists
from .raw_call import RawCaller, client_capabilities, raw_calls_enabled
from .session import (
    CLIENT_INFO,
    STDERR_SHOWN,
    LiveSession,
    ProgressCallback,
    ResponseRepairer,
    ask_on,
    call_tool_on,
    crash_error,
    error_text,
    start_error,
)
from .tasks import CLAIM as TASK_CLAIM
from .tasks import EXTENSION as TASKS

logger = logging.getLogger(__name__)

EXTENSIONS: dict[str, Any] = {TASKS: {}}
"""The extensions each session declares: Tasks, so that a task a call's client asked for is
relayed (``tasks.py``); the raw path declares the same (``raw_call.client_capabilities``)."""
LOG_LEVEL_TIMEOUT_SECONDS = 5.0
"""How long a server may take to answer ``logging/setLevel``."""

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)


StartMode = Literal["background", "wait", "on_call"]
"""How a server with a cached tool list starts: ``background`` (offer the cached list at once,
start now), ``wait`` (offer nothing until the first real start), ``on_call`` (offer the cached
list, start on the first call). A server without a cached list always starts at once, and
``lazy`` servers behave as ``on_call``."""


class ServerConnection:
    """One configured tool server: its state, its tools, and calls to them.

    Attributes:
        name: the server's name in agent.json.
        config: its configuration.
        state: ``starting``, ``up``, ``restarting``, ``failed``, ``disabled`` or ``idle``.
        error: why it is not up (or the last crash while it restarts), else None.
        tools: its tools, as last listed (kept while it restarts, emptied when it fails).
        startup_ms: how long its last successful start took (spawn to tools listed).
        restarts: how many times it was restarted.
        capabilities: what the server declared at its last start (None before the first).
        relay: relays what the server sends during exposed calls (``tools/relay.py``).
        login: the OAuth client of a remote server (``auth/upstream.py``; None: stdio, or a
            static ``Authorization`` header); its ``needs_login`` is shown as the server's error.
        protocol_version: the protocol version it spoke at its last start, or as the tool cache
            remembers it (None: not known; see ``era.py``).
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
        queue: StartQueue | None = None,
        relay_calls: bool = False,
        tokens: Path | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.login = (
            UpstreamAuth.for_server(name, config, tokens) if isinstance(config, RemoteServerConfig) else None
        )
        self.state: ServerState = "disabled" if config.disabled else "starting"
        self.error: str | None = None
        self.tools: tuple[ServerTool, ...] = ()
        self.startup_ms: float | None = None
        self.restarts = 0
        self.capabilities: types.ServerCapabilities | None = None
        self.relay = ServerRelay(name, asks=relay_calls)
        self.watched = Watched()
        self.log_level: types.LoggingLevel | None = None
        self.stopped = anyio.Event()
        self.running = False
        self._on_change = on_change
        self._on_catalog_change = on_catalog_change
        self._policy = policy or RestartPolicy()
        self._live: LiveSession | None = None
        self._junk_before = 0
        self._child: StdioChild | None = None
        self._scope = anyio.CancelScope()
        self._records = records
        self._queue = queue
        self._start_mode: StartMode = "on_call" if config.lazy and start == "background" else start
        if isinstance(config, StdioServerConfig) and start_problem(config.command, config.cwd, config.env):
            self._start_mode = "wait"  # it cannot start: its cached list is not offered as if it could
        self._lists = KnownLists(name, config, cache)
        self.protocol_version = self._lists.cached.protocol_version if self._lists.cached else None
        self._demand = Demand()
        self._changed = anyio.Event()
        if self._lists.cached is not None and self._start_mode != "wait":
            self.tools = self._lists.cached_tools()
            self._lists.from_cache = True
            if self._start_mode == "on_call":
                self.state = "idle"

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
        return (
            self._start_mode == "on_call"
            and self._lists.cached is not None
            and not self._demand.wanted.is_set()
        )

    async def wait_started(self) -> None:
        """Ask a lazy or idle server to start, and wait until it is up or has failed (bounded by
        its ``startupTimeoutSeconds``, plus a second for the process to be spawned)."""
        self._demand.wanted.set()
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
                if self._lists.from_cache:  # offered from the cache: the hub need not wait for the start
                    task_status.started()
                    task_status = anyio.TASK_STATUS_IGNORED
                await self._supervise(task_status)
        finally:
            self._live = None
            self.stopped.set()

    async def _supervise(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        told: list[bool] = []

        def started() -> None:  # the first start has succeeded or failed (or is deferred)
            if not told:
                told.append(True)
                task_status.started()

        queued = self._lists.from_cache and self._queue is not None  # a background start
        budget = RestartBudget(self._policy)
        failed_starts = 0
        async with anyio.create_task_group() as tg:
            while True:
                if self._deferred():
                    started()
                    await self._demand.wanted.wait()
                    self._set("starting")
                slot = await self._queue.turn(self._demand.wanted) if queued and self._queue else Slot()
                queued = False
                attempt = await self._start_once(tg, slot)
                if attempt.error is None:
                    failed_starts = 0
                    started()
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
                    self._set("failed", error_text(attempt.error))
                    if failed_starts == 1:
                        logger.warning("tool server %s (retrying in %g s)", attempt.error, delay)
                    else:
                        logger.info("tool server %s (retry %d in %g s)", attempt.error, failed_starts, delay)
                    started()
                    await attempt.done.wait()
                    await anyio.sleep(delay)
                    continue
                else:
                    failure = attempt.error
                await attempt.done.wait()
                reason = error_text(failure)
                restart_in = budget.spend()
                if restart_in is None:
                    self.tools = ()
                    window = self._policy.window_seconds
                    self._set("failed", f"gave up after {budget.used} restarts in {window:g} s: {reason}")
                    logger.error("tool server %s: gave up restarting: %s", self.name, reason)
                    return
                self.restarts += 1
                self.protocol_version = None  # a restart after a crash probes the era again
                logger.warning("tool server %s; restarting in %g s", failure, restart_in)
                self._set("restarting", reason)
                await anyio.sleep(restart_in)

    async def _start_once(self, tg: anyio.abc.TaskGroup, slot: Slot) -> Incarnation:
        """Start one incarnation and wait until it serves, fails, or runs out of time."""
        attempt = Incarnation(
            self.name,
            self.config,
            self._records,
            relay=self.relay,
            known_version=self.protocol_version,
            auth=self.login,
        )
        tg.start_soon(self._incarnation, attempt)
        await attempt.until_ready(slot)
        return attempt

    async def _incarnation(self, attempt: Incarnation) -> None:
        def on_child(child: StdioChild) -> None:
            if self._child is not None:
                self._junk_before += self._child.junk_lines
            self._child = child

        def down(attempt: Incarnation) -> None:
            assert attempt.ended is not None
            self._set("restarting", error_text(attempt.ended))  # "failed" if the budget is spent

        try:
            await attempt.run(
                on_child=on_child, on_catalog_change=self._catalog_changed, up=self._up, down=down
            )
        finally:
            if self._live is not None and self._live.child is attempt.child:
                self._live = None

    async def _up(
        self,
        attempt: Incarnation,
        live: LiveSession,
        init: Handshake,
        tasks: anyio.abc.TaskGroup,
        tools_changed: MemoryObjectReceiveStream[None],
    ) -> None:
        """The handshake is done: list the tools, then serve."""
        self.capabilities = init.capabilities
        self.protocol_version = self._lists.protocol_version = init.protocol_version
        self.tools = await self._lists.list_tools(live, self.capabilities)
        self.startup_ms = round((time.perf_counter() - attempt.started_at) * 1000, 1)
        self._live = live
        await self._apply_log_level(live)
        self._demand.touch()
        self._set("up")
        tasks.start_soon(self._lists.keep_tools, live, self.capabilities, tools_changed, self._tools_changed)
        if self._lists.caching:
            tasks.start_soon(self._lists.keep_catalog, live, self.capabilities, self._on_catalog_change)
        if self.config.lazy and self.config.idle_seconds:
            tasks.start_soon(self._stop_when_idle, attempt)
        resources = init.capabilities.resources
        if init.modern and resources is not None and resources.subscribe:  # the same URIs after a restart
            tasks.start_soon(
                follow_resource_updates, live.session, self.name, self.watched, self.relay.on_updated
            )

    async def _stop_when_idle(self, attempt: Incarnation) -> None:
        """End this incarnation once no call has run for ``idleSeconds`` (a lazy server)."""
        await self._demand.until_idle(self.config.idle_seconds)
        # "idle" before the process goes: a call from now on asks for a new start
        attempt.idle_stopped = True
        self._demand.forget()
        self._live = None
        self._set("idle")
        attempt.scope.cancel()

    def _tools_changed(self, tools: tuple[ServerTool, ...]) -> None:
        self.tools = tools
        self._on_change()

    def _catalog_changed(self, kind: CatalogKind) -> None:
        """The server announced ``resources/list_changed`` or ``prompts/list_changed``: tell the
        hub, and list again for the cache."""
        self._on_catalog_change(kind)
        self._lists.catalog_changed()

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        """Ask the server for logs from ``level`` up (``logging/setLevel``), now if it is up and
        at each later start; a server that declared no ``logging`` is not asked."""
        self.log_level = level
        live = self._live
        if live is not None and self.state == "up":
            await self._apply_log_level(live)

    async def _apply_log_level(self, live: LiveSession) -> None:
        level = self.log_level
        capabilities = self.capabilities
        if level is None or capabilities is None or capabilities.logging is None:
            return
        if live.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-07-28 has no logging/setLevel: the level goes per request
        try:
            with anyio.fail_after(LOG_LEVEL_TIMEOUT_SECONDS):
                # by request: the SDK's set_logging_level warns of 2026-07-28's deprecation
                request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
                await live.session.send_request(request, types.EmptyResult)
        except Exception as exc:  # a server that refuses it still serves its tools
            logger.info("%s: logging/setLevel %s failed: %s", self.name, level, exc)

    # ------------------------------------------------------------ other requests

    @property
    def lists(self) -> KnownLists:
        """Its lists as last known (cached or listed): the catalog serves them while it starts."""
        return self._lists

    def offers(self, kind: CatalogKind) -> bool:
        """Whether the server's ``resources`` (with their templates) or ``prompts`` are listed now.

        They are while it is up and declares them (asked of it), and while it is starting, idle
        or restarting when its lists are known (``lists``, from the cache or its last start);
        not while it has failed (a read says why: see ``catalog.py``).
        """
        if self.state == "up":
            capabilities = self.capabilities
            return capabilities is not None and getattr(capabilities, kind) is not None
        if self.state == "restarting" or (self.state in ("starting", "idle") and self._start_mode != "wait"):
            return self._lists.known(kind)
        return False

    async def ask(
        self, what: str, request: Callable[[ClientSession], Awaitable[T]], *, timeout: float | None = None
    ) -> T:
        """Send one request (not a tool call) through the live session (a server that is starting
        or idle is waited for first, as for a tool call).

        Args:
            what: the request, for messages (``resources/read demo://x``).
            request: sends it on the session it is given and returns the result.
            timeout: seconds before the request is abandoned (and cancelled on the server).

        Raises:
            MCPError: the server's own error as it sent it, or one made here (the code says
                which: ``REQUEST_TIMEOUT``, ``INTERNAL_ERROR`` for a server that is down, a
                dropped connection or an invalid result).
        """
        if self.state in ("starting", "idle"):
            await self.wait_started()
        live = self._live
        if live is None or live.ended.is_set() or self.state != "up":
            reason = f": {self.error}" if self.error else ""
            raise MCPError(INTERNAL_ERROR, f"{what}: server {self.name} is {self.state}{reason}")
        return await ask_on(live, self.name, what, request, timeout)

    # -------------------------------------------------------------------- calls

    def unavailable(self, shown: str) -> str:
        """What a call of the tool ``shown`` answers while this server cannot take it."""
        state = "not responding" if self.state == "up" else self.state
        reason = f": {self.error}" if self.error else ""
        return f"tool {shown} is temporarily unavailable: server {self.name} is {state}{reason}"

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
        with self._demand.call():
            if self.state in ("starting", "idle"):
                await self.wait_started()
            live = self._live
            if live is None or live.ended.is_set() or self.state != "up":
                text = self.unavailable(shown)
                return ToolResult(text, is_error=True, elapsed_ms=(time.perf_counter() - start) * 1000)
            channel = current_channel()  # the client of an exposed call (tools/relay.py)
            if on_progress is None and channel is not None:
                on_progress = channel.progress
            with self.relay.calling(channel):
                result = await call_tool_on(
                    live,
                    server=self.name,
                    config=self.config,
                    mcp_name=mcp_name,
                    arguments=arguments,
                    shown=shown,
                    start=start,
                    timeout=timeout,
                    on_progress=on_progress,
                    channel=channel,
                )
            if result.is_error and self.login is not None and self.login.needs_login:
                # the token was refused mid-run and no refresh helped: say what to do
                text = f"tool {shown} is unavailable: server {self.name} {self.login.needs_login}"
                return ToolResult(text, is_error=True, elapsed_ms=result.elapsed_ms)
            return result


# ------------------------------------------------------------------- one start
#
# One start of a tool server and its life until it ends: the transport (``open_server_transport``),
# the session with the repair filter (``session.ResponseRepairer``), the legacy ``initialize``
# handshake (mcp-sdk-2.md G3), then serving until the server exits or the connection drops.
#
# The ``ServerConnection`` that owns it decides the rest (``up``: list the tools, say it is up;
# ``down``: say it is restarting) and supervises one incarnation after another.

Up = Callable[
    [
        "Incarnation",
        LiveSession,
        Handshake,
        anyio.abc.TaskGroup,
        MemoryObjectReceiveStream[None],
    ],
    Awaitable[None],
]
"""Called once the handshake is done: ``(incarnation, live, handshake, tasks, tools_changed)``;
it lists the tools and may start tasks for the incarnation's life in ``tasks``; ``tools_changed``
yields once for each ``notifications/tools/list_changed`` or, on 2026-07-28, each tools change
its ``subscriptions/listen`` stream reports (coalesced)."""


@dataclass
class Incarnation:
    """One start of a server, filled in as it goes.

    Attributes:
        name: the server's name.
        config: its configuration.
        records: where stdio children's process groups are recorded (``stdio/processes.py``).
        ready: set once it serves, or has failed to start.
        done: set once it has ended.
        child: the stdio child, once spawned.
        error: why it failed to start.
        ended: why it ended after serving.
        started_at: ``time.perf_counter()`` at its start.
        scope: cancels it (and reaps its process).
        idle_stopped: stopped on purpose after ``idleSeconds`` without calls (a lazy server).
        known_version: the protocol version the server spoke before (None: probe its era).
        http: the HTTP client of a Streamable HTTP server, once connected.
        auth: the OAuth client on a remote server's HTTP client (``auth/upstream.py``).
    """

    name: str
    config: StdioServerConfig | RemoteServerConfig
    records: ChildRecords | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    child: StdioChild | None = None
    error: ToolServerError | None = None
    ended: ToolServerError | None = None
    started_at: float = field(default_factory=time.perf_counter)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    idle_stopped: bool = False
    relay: ServerRelay | None = None
    known_version: str | None = None
    http: httpx2.AsyncClient | None = None
    auth: UpstreamAuth | None = None

    async def until_ready(self, slot: Slot) -> None:
        """Wait until it serves or has failed, or for its ``startupTimeoutSeconds`` (then it is
        cancelled, reaping its process in the background, and ``error`` says so). ``slot``, its
        place in the start queue, is given back when it is up, or after ``SLOT_SECONDS``."""
        timeout = self.config.startup_timeout_seconds or None
        with anyio.move_on_after(timeout):
            try:
                with anyio.move_on_after(SLOT_SECONDS):
                    await self.ready.wait()
            finally:
                slot.release()
            await self.ready.wait()
        if not self.ready.is_set():
            self.scope.cancel()
            tail = self.child.stderr_tail(STDERR_SHOWN) if self.child else ()
            self.error = ToolServerStartError(
                f"did not start within {timeout:g} s", server=self.name, stderr_tail=tail
            )

    async def run(
        self,
        *,
        on_child: Callable[[StdioChild], None],
        on_catalog_change: Callable[[CatalogKind], None],
        up: Up,
        down: Callable[[Incarnation], None],
    ) -> None:
        """Start, serve until the end, and fill in ``error`` or ``ended``; never raises for the
        server's failures. ``down`` is called when a server that served went away."""

        def spawned(child: StdioChild) -> None:
            self.child = child
            on_child(child)

        try:
            with self.scope:
                try:
                    async with open_server_transport(
                        self.config,
                        name=self.name,
                        records=self.records,
                        on_child=spawned,
                        on_http=lambda http: setattr(self, "http", http),
                        auth=self.auth,
                    ) as (read, write):
                        await self._serve(read, write, on_catalog_change, up, down)
                except Exception as exc:
                    if not self.ready.is_set() and self.auth is not None and self.auth.needs_login:
                        self.error = ToolServerStartError(self.auth.needs_login, server=self.name)
                    elif not self.ready.is_set():
                        url = self.config.url if isinstance(self.config, RemoteServerConfig) else None
                        self.error = await start_error(self.name, exc, self.child, url)
                    else:
                        self.ended = await crash_error(self.name, self.child, exc)
        finally:
            self.ready.set()
            self.done.set()

    async def _serve(
        self,
        read: ReadStream[SessionMessage | Exception],
        write: WriteStream[SessionMessage],
        on_catalog_change: Callable[[CatalogKind], None],
        up: Up,
        down: Callable[[Incarnation], None],
    ) -> None:
        repairer = ResponseRepairer(self.name)
        refresh_send, refresh_read = anyio.create_memory_object_stream[None](1)
        relay = self.relay if self.relay is not None else ServerRelay(self.name)  # tools/relay.py

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                # a refresh already pending is enough; a closed stream means this incarnation ends
                with suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                    refresh_send.send_nowait(None)
            elif isinstance(message, types.ResourceListChangedNotification):
                on_catalog_change("resources")
            elif isinstance(message, types.PromptListChangedNotification):
                on_catalog_change("prompts")
            elif isinstance(message, types.ResourceUpdatedNotification):
                # on 2026-07-28 it comes on a listen stream, which relays it (follow_resource_updates)
                if not is_modern(repairer.version):
                    await relay.on_updated(str(message.params.uri))
            elif isinstance(message, Exception):
                logger.warning("%s: transport error: %s", self.name, message)

        async with refresh_send, refresh_read, anyio.create_task_group() as tg:
            if self.child is not None:  # our stdio transport repairs as it reads: no extra hop
                self.child.repair = repairer.repair
                ended = self.child.ended
            else:
                repaired_send, repaired_read = anyio.create_memory_object_stream[SessionMessage | Exception](
                    0
                )
                tg.start_soon(repairer.pump, read, repaired_send)
                read, ended = repaired_read, repairer.ended
            log_level = upstream_log_level()
            async with ClientSession(
                message_handler=on_message,
                logging_callback=relay.on_log,
                sampling_callback=relay.on_sampling if relay.asks else None,
                elicitation_callback=relay.on_elicitation if relay.asks else None,
                list_roots_callback=relay.on_roots if relay.asks else None,
                client_info=CLIENT_INFO,
                log_level=log_level,
                extensions=EXTENSIONS,
                result_claims={TASKS: [TASK_CLAIM]},
                dispatcher=CallerDispatcher(read, write),  # the caller's capabilities per call
            ) as session:
                init = await self._handshake(session, repairer)
                raw: RawCaller | None = None
                if init.modern and self.http is not None and raw_calls_enabled():
                    assert isinstance(self.config, RemoteServerConfig)
                    raw = RawCaller(
                        server=self.name,
                        url=self.config.url,
                        http=self.http,
                        version=init.protocol_version,
                        client_info=CLIENT_INFO,
                        capabilities=client_capabilities(relay.asks, EXTENSIONS),
                        log_level=log_level,
                        max_event_size=self.config.max_message_bytes or None,
                        known_tools=repairer.raw_tools,
                        repair=repairer.repair,
                        on_log=relay.on_log,
                        on_message=on_message,
                        ended=ended,
                    )
                    tg.start_soon(_end_when_broken, raw)
                if init.modern:

                    def refresh_tools() -> None:
                        with suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                            refresh_send.send_nowait(None)

                    tg.start_soon(
                        follow_list_changes,
                        session,
                        init.capabilities,
                        self.name,
                        refresh_tools,
                        on_catalog_change,
                    )
                live = LiveSession(session, repairer, self.child, ended, raw)
                await up(self, live, init, tg, refresh_read)
                self.ready.set()
                await ended.wait()
                self.ended = await crash_error(self.name, self.child, None)
                down(self)
            tg.cancel_scope.cancel()

    async def _handshake(self, session: ClientSession, repairer: ResponseRepairer) -> Handshake:
        """Settle the session's protocol era (``era.py``)."""
        settled = await handshake(
            session,
            server=self.name,
            protocol=self.config.protocol,
            known=self.known_version,
            probe_timeout=self.config.discover_timeout_seconds,
        )
        repairer.version = settled.protocol_version
        logger.debug("%s: protocol %s (%s)", self.name, settled.protocol_version, settled.how)
        return settled


async def _end_when_broken(raw: RawCaller) -> None:
    """End the incarnation when a raw call's POST failed below HTTP, with that error: what the
    SDK's transport does when one of its POSTs raises (``raw_call.py``); and close its lean
    transport's connections when the incarnation ends, whichever way."""
    try:
        await raw.broken.wait()
    finally:
        with anyio.CancelScope(shield=True):
            await raw.aclose()
    if raw.failure is not None:
        raise raw.failure
    raise ToolServerExited("connection closed", server=raw.server)


# ------------------------------------------------------------------- transports
#
# The transport to one tool server: a stdio child (``stdio/transport.py``), or a remote server over
# Streamable HTTP or SSE through the SDK, each HTTP request carrying the trace context of the call
# it serves (``telemetry.inject_trace_headers``).
#
# Message sizes (``maxMessageBytes``). A stdio server's stdout is read by our own transport, which
# never holds more than the limit of one line and fails the call a bigger response answers (see
# ``stdio/transport.py``). For remote servers the SDK reads and parses, and caps what it allows:
#
# - Streamable HTTP: each SSE event is capped at ``maxMessageBytes`` (the SDK's
#   ``max_sse_event_size``, 1 MiB by default); a bigger one fails only its call ("SSE stream
#   failed: ... byte limit"), the connection stays up. A plain ``application/json`` response body
#   (a server in ``json_response`` mode, and every 2026-07-28 server) is capped the same way by
#   ``_cap_json_body``: reading past the limit fails its request, the connection stays up.
# - An SSE answer to a POST is read to its end when it is closed (``_DrainedAnswer``): the SDK
#   closes it as soon as it carries the response, which cost a TCP connection per call.
# - SSE (the older transport): the SDK caps every event at 1 MiB whatever the config says, and a
#   bigger one ends the connection (the server is then restarted like a crashed one).
# - The SDK validates a remote message whole before our repair filter sees it (pydantic, about
#   0.1 s of blocked event loop per MiB of tiny JSON objects); the repair then cuts content parts
#   and oversized results as it does for stdio (``session.bound_result``).
async def _trace_headers(request: httpx2.Request) -> None:
    """Each HTTP request to a remote server carries the trace context of the call it serves."""
    inject_trace_headers(request.headers)


def _traced_http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """The HTTP client of the SSE transport, with ``_trace_headers``.

    Built as the SDK's default factory builds it (``create_mcp_http_client``, in the SDK's private
    ``mcp.shared._httpx_utils``): 30 s to connect, write and wait for the pool, 300 s to read (a
    server may hold a stream open), redirects not followed by the client (the SDK follows those
    that stay on the endpoint's origin itself).
    """
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout if timeout is not None else httpx2.Timeout(30.0, read=300.0),
        auth=auth,
        event_hooks={"request": [_trace_headers]},
    )


class MessageTooLarge(httpx2.StreamError):
    """A JSON response body past ``maxMessageBytes``. The SDK's JSON handler turns a stream error
    into a JSON-RPC error answering the request (``PARSE_ERROR``); ``session.call_tool_on``
    names the config key."""


class _CappedBody(httpx2.AsyncByteStream):
    """A response body that fails once more than ``limit`` bytes were read."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner, self._limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                raise MessageTooLarge(f"response body exceeded the {self._limit} byte limit.")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _cap_json_body(limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook: an ``application/json`` body is read at most ``limit`` bytes far (an
    SSE stream is capped per event by the SDK, and may be long-lived)."""

    async def cap(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            stream = response.stream
            if isinstance(stream, httpx2.AsyncByteStream):
                response.stream = _CappedBody(stream, limit)

    return cap


DRAIN_SECONDS = 0.05
"""How long the end of an SSE answer is waited for when it is closed (a server ends the stream
right after the response): read to its end, the connection is kept; not, it is closed."""


class _DrainedAnswer(httpx2.AsyncByteStream):
    """An SSE answer to a POST that is read to its end before it is closed (for at most
    ``DRAIN_SECONDS``).

    The SDK's Streamable HTTP transport closes an SSE answer as soon as it carries the response,
    before the stream's last bytes (the end of the chunked body) are read; httpcore keeps only a
    connection whose response was read to its end, so every such answer cost a new TCP connection
    (and a new connection on the server). The SDK has no option for it; this wrapper, put on by a
    response hook (``_keep_sse_connections``), makes its close read the rest first.
    """

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            with anyio.move_on_after(DRAIN_SECONDS):
                async for _ in self._inner:
                    pass
        except Exception as exc:  # the server went away meanwhile: only the connection is lost
            logger.debug("an SSE answer ended badly while read to its end: %r", exc)
        finally:
            await self._inner.aclose()


async def _keep_sse_connections(response: httpx2.Response) -> None:
    """A response hook: an SSE answer to a POST is read to its end when closed (``_DrainedAnswer``)."""
    if response.request.method == "POST" and response.headers.get("content-type", "").lower().startswith(
        "text/event-stream"
    ):
        stream = response.stream
        if isinstance(stream, httpx2.AsyncByteStream):
            response.stream = _DrainedAnswer(stream)


class ReadStream(Protocol[T_co]):
    """What a transport yields to read from: the SDK's own ``ReadStream`` protocol (private, in
    ``mcp.shared._stream_protocols``), restated. Our stdio child's memory-object streams and the
    SDK's HTTP transports' streams both are one, and ``ClientSession`` takes one."""

    async def receive(self) -> T_co: ...
    async def aclose(self) -> None: ...
    def __aiter__(self) -> ReadStream[T_co]: ...
    async def __anext__(self) -> T_co: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...


class WriteStream(Protocol[T_contra]):
    """What a transport yields to write to: the SDK's ``WriteStream`` protocol, restated."""

    async def send(self, item: T_contra, /) -> None: ...
    async def aclose(self) -> None: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...


TransportStreams = tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]
"""The pair of streams to one server that ``open_server_transport`` yields."""


def shared_tls() -> ssl.SSLContext:
    """The TLS context of the Streamable HTTP clients: httpx2's default (which follows
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``), built once per setting of those variables, not once per
    connection: loading a CA bundle takes 30-60 ms, paid again by every agent opened."""
    return _tls_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_for(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    return httpx2.create_ssl_context()  # reads the variables the key holds


@asynccontextmanager
async def open_server_transport(
    config: StdioServerConfig | RemoteServerConfig,
    *,
    name: str,
    records: ChildRecords | None,
    on_child: Callable[[StdioChild], None],
    on_http: Callable[[httpx2.AsyncClient], None] = lambda http: None,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[TransportStreams]:
    """The read and write streams to the server ``name``; a stdio child is given to ``on_child``
    as soon as it is spawned (its stderr and exit code explain a failed start), and the HTTP client
    of a Streamable HTTP server to ``on_http`` (``raw_call.py`` sends tool calls on it). ``auth``
    (a remote server's OAuth client, ``auth/upstream.py``) goes on that client."""
    if isinstance(config, StdioServerConfig):
        async with open_stdio_transport(config, name=name, records=records) as child:
            on_child(child)
            yield child.read_stream, child.write_stream
    elif config.transport == "sse":
        async with sse_client(
            config.url,
            headers=dict(config.headers) or None,
            httpx_client_factory=_traced_http_client,
            auth=auth,
        ) as (read, write):
            yield read, write
    else:
        timeout = httpx2.Timeout(30, read=300)
        limit = config.max_message_bytes
        async with (
            httpx2.AsyncClient(
                headers=dict(config.headers),
                timeout=timeout,
                auth=auth,
                verify=shared_tls(),
                follow_redirects=True,
                event_hooks={
                    "request": [_trace_headers],
                    "response": [_keep_sse_connections, *([_cap_json_body(limit)] if limit else [])],
                },
            ) as http,
            streamable_http_client(
                config.url, http_client=http, max_sse_event_size=config.max_message_bytes or None
            ) as (read, write),
        ):
            on_http(http)
            yield read, write


# ------------------------------------------------------------- when it starts
#
# The queue of background starts: servers whose tool lists are cached start after their owner
# is ready for them, a few at a time, and a call to one of them jumps the queue.
#
# Each Python MCP server spends about a second of CPU importing the SDK. Eight of them starting at
# once on two cores take the CPU from the gateway just when it answers its first ``initialize``
# and ``tools/list`` from the cache (and forking each blocks its event loop for a few ms). So the
# gateway holds these starts until it serves (``release``; at most ``hold_seconds`` in any case),
# then lets ``limit`` of them start at once. A start keeps its place until its server is up or has
# failed, or for ``SLOT_SECONDS`` at most, so a server that hangs at start-up delays the others by
# that much, not by its whole start-up timeout. First starts the hub waits for (no cached list)
# and restarts after a crash do not queue.
SLOT_SECONDS = 2.0
"""The longest a start keeps its place in the queue."""


def default_limit() -> int:
    """Background starts at once: half the CPUs (at least one), leaving the rest to the gateway."""
    return max(1, (os.cpu_count() or 2) // 2)


class Slot:
    """A place in the queue, given back by ``release`` (idempotent)."""

    def __init__(self, limiter: anyio.CapacityLimiter | None = None) -> None:
        self._limiter = limiter

    def release(self) -> None:
        limiter, self._limiter = self._limiter, None
        if limiter is not None:
            limiter.release_on_behalf_of(self)


class StartQueue:
    """Background starts: held until ``release`` (or ``hold_seconds``), then ``limit`` at once.

    Args:
        limit: how many start at once.
        held: whether starts wait for ``release``.
        hold_seconds: the longest they wait for it.
    """

    def __init__(self, *, limit: int | None = None, held: bool = False, hold_seconds: float = 5.0) -> None:
        self._limiter = anyio.CapacityLimiter(limit or default_limit())
        self._released = anyio.Event()
        self._deadline = time.monotonic() + hold_seconds
        if not held:
            self._released.set()

    def release(self) -> None:
        """Let the held starts begin."""
        self._released.set()

    @property
    def held(self) -> bool:
        """Whether starts still wait for ``release`` (or the end of ``hold_seconds``)."""
        return not self._released.is_set() and time.monotonic() < self._deadline

    async def turn(self, wanted: anyio.Event) -> Slot:
        """Wait for a place; a place with nothing to give back at once when ``wanted`` is (or
        becomes) set: a call is waiting for this server."""
        if wanted.is_set():
            return Slot()
        slot = Slot()
        async with anyio.create_task_group() as tg:

            async def jump() -> None:
                await wanted.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(jump)
            with anyio.move_on_after(max(0.0, self._deadline - time.monotonic())):
                await self._released.wait()
            await self._limiter.acquire_on_behalf_of(slot)
            slot._limiter = self._limiter
            tg.cancel_scope.cancel()
        return slot


# When a crashed tool server is started again: exponential backoff inside a restart budget.
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


class RestartBudget:
    """The restarts of one server within its policy's window."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self._recent: collections.deque[float] = collections.deque()

    @property
    def used(self) -> int:
        """The restarts within the window, as of the last ``spend``."""
        return len(self._recent)

    def spend(self) -> float | None:
        """Count one more restart: the wait before it, or None when the budget is spent."""
        now = time.monotonic()
        while self._recent and now - self._recent[0] > self.policy.window_seconds:
            self._recent.popleft()
        if len(self._recent) >= self.policy.max_restarts:
            return None
        self._recent.append(now)
        return self.policy.delay(len(self._recent))


# What calls want of one tool server: whether one waits for it to start, how many run, and when
# the last one ended. A lazy server starts on its first call and stops when idle by it.
class Demand:
    """The calls of one server.

    Attributes:
        wanted: set when a call waits for the server to start (a new event after ``forget``).
        in_flight: the calls running now.
        last_used: ``time.monotonic()`` when the last call ended (or the server came up).
    """

    def __init__(self) -> None:
        self.wanted = anyio.Event()
        self.in_flight = 0
        self.last_used = time.monotonic()

    def forget(self) -> None:
        """The server stopped when idle: the next call asks for a new start."""
        self.wanted = anyio.Event()

    def touch(self) -> None:
        """Count now as a use (the server just came up)."""
        self.last_used = time.monotonic()

    @contextmanager
    def call(self) -> Iterator[None]:
        """One call, from its start to its end."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()

    async def until_idle(self, seconds: float) -> None:
        """Return once no call has run for ``seconds`` and none runs."""
        while True:
            left = self.last_used + seconds - time.monotonic()
            if left <= 0 and self.in_flight == 0:
                return
            await anyio.sleep(left if left > 0 else seconds)
