"""One MCP tool server for its whole life: spawn or connect, handshake, list, call, restart.

A ``ServerConnection`` supervises one server from ``agent.json``. ``run()`` starts it (a stdio
child through our own transport, or a remote server over Streamable HTTP or SSE:
``_transports.py``), does the legacy ``initialize`` handshake (mcp-sdk-2.md G3), lists its tools
page by page through the repair filter (G1, G2; ``_lists.py`` keeps them, and the tool cache),
and then serves until the server exits or the connection drops. Then it restarts it with
exponential backoff inside a restart budget (``restart.py``); meanwhile its tools answer
"temporarily unavailable". A server that fails its first start is reported (exit code, stderr
tail, or "did not start within N s": ``_failures.py``) and retried with backoff: the others
serve regardless.

``ask()`` sends any other request (resources, prompts: see ``catalog.py``) through the live
session, under a timeout, and turns every failure into an ``MCPError`` with a JSON-RPC code.
The server's ``notifications/resources/list_changed`` and ``prompts/list_changed`` are passed
to ``on_catalog_change``.

``call()`` never raises for anything the server does: a timeout (the server gets
``notifications/cancelled`` from the SDK and stays usable), a crash (in-flight calls fail at
once with the exit code and stderr tail), a JSON-RPC error or an invalid result all come back
as error ``ToolResult``\\ s (``_session.py``). Cancellation of the caller propagates and cancels
the call on the server. Message sizes (``maxMessageBytes``): see ``_transports.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import ClientSession, MCPError
from mcp_types import INTERNAL_ERROR

from ..config import RemoteServerConfig, StdioServerConfig
from ..exceptions import ToolServerExited
from ..messages import JSONObject, ToolResult
from ._demand import Demand
from ._failures import _leaves as _leaves  # importable here, as before the split
from ._failures import error_text
from ._incarnation import CatalogKind, Incarnation
from ._lists import KnownLists
from ._orphans import ChildRecords
from ._server_tools import ServerTool
from ._session import LiveSession, ProgressCallback, ask_on, call_tool_on
from ._start_queue import Slot, StartQueue
from ._stdio import StdioChild
from .cache import ToolCache
from .restart import RestartBudget, RestartPolicy
from .status import ServerState

__all__ = [
    "CatalogKind",
    "ProgressCallback",
    "RestartPolicy",
    "ServerConnection",
    "ServerState",
    "StartMode",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


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
    ) -> None:
        self.name = name
        self.config = config
        self.state: ServerState = "disabled" if config.disabled else "starting"
        self.error: str | None = None
        self.tools: tuple[ServerTool, ...] = ()
        self.startup_ms: float | None = None
        self.restarts = 0
        self.capabilities: types.ServerCapabilities | None = None
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
        self._lists = KnownLists(name, config, cache)
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
                logger.warning("tool server %s; restarting in %g s", failure, restart_in)
                self._set("restarting", reason)
                await anyio.sleep(restart_in)

    async def _start_once(self, tg: anyio.abc.TaskGroup, slot: Slot) -> Incarnation:
        """Start one incarnation and wait until it serves, fails, or runs out of time."""
        attempt = Incarnation(self.name, self.config, self._records)
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
        init: types.InitializeResult,
        tasks: anyio.abc.TaskGroup,
        tools_changed: MemoryObjectReceiveStream[None],
    ) -> None:
        """The handshake is done: list the tools, then serve."""
        self.capabilities = init.capabilities
        self.tools = await self._lists.list_tools(live, self.capabilities)
        self.startup_ms = round((time.perf_counter() - attempt.started_at) * 1000, 1)
        self._live = live
        self._demand.touch()
        self._set("up")
        tasks.start_soon(self._lists.keep_tools, live, self.capabilities, tools_changed, self._tools_changed)
        if self._lists.caching:
            tasks.start_soon(self._lists.keep_catalog, live, self.capabilities, self._on_catalog_change)
        if self.config.lazy and self.config.idle_seconds:
            tasks.start_soon(self._stop_when_idle, attempt)

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
            return await call_tool_on(
                live,
                server=self.name,
                config=self.config,
                mcp_name=mcp_name,
                arguments=arguments,
                shown=shown,
                start=start,
                timeout=timeout,
                on_progress=on_progress,
            )
