"""ToolHub: every configured MCP tool server behind one ToolSource.

``open_tool_hub(servers)`` starts all servers at once, each under its own start-up timeout,
and yields when every one is up or has failed; a server that failed is reported in
``status()``, its tools are absent, and it is retried with backoff in the background (its
tools appear when it comes up). With a state folder, a server whose tool list is cached
(``cache.py``) does not hold the hub back: its cached tools are offered at once, it starts in
the background, a call to it waits for its start, and a real list that differs replaces the
cached one (subscribers are told). These background starts run a few at a time (half the
CPUs), so that they leave the gateway room to answer, and a call to a server that has not started
yet jumps the queue (``StartQueue``, ``server/connection.py``). ``lazy`` servers start on their first call and stop
after ``idleSeconds`` without calls. The hub owns one ``ServerConnection`` task per
server in its task group (structured concurrency): leaving the context, calling ``aclose()`` or
cancelling the owner stops every server and reaps every process, grandchildren included.
Given a state folder (the CLI and the gateway give theirs), the hub first reaps what an earlier,
killed owner left and records its stdio servers' process groups while they run (``stdio/processes.py``).

The model only ever sees exposed names (``server__tool``, see ``presentation.py``); the hub keeps
the reverse map and routes each call to its server. A cached list only speeds up listing: it
decides nothing. Before a call goes out, its server is up and the name is a tool of its live
list (``live_spec``, the ``LiveToolSource`` side: the loop gates and validates on that
definition); a name the cache gave a tool the running server lacks, or that now belongs to
another server's tool, is answered with an error and never carries a call or its arguments
anywhere, and a definition that changed (owner, annotations, parameters) between the offer and
the start is not called on the old one. The tool list is recomputed whenever a server comes up,
restarts, fails or announces ``tools/list_changed``; subscribers are told when it actually
changed.

With ``hub.catalog`` (``catalog.py``) the servers' resources and prompts are listed, read and
got through the same live sessions (a starting server's from the cache); ``subscribe_catalog``
tells when they changed: a server announced ``resources/list_changed`` or
``prompts/list_changed``, a server offering them came up or went down, or a server that started
lists something else than the cache held.

Per-call timeout: the server's ``callTimeoutSeconds`` when set, else the ``timeout`` argument
(the loop passes ``limits.toolTimeoutSeconds``), else the hub's ``default_timeout``; 0 or None
means none.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc
import mcp_types as types

from ..auth.token_store import tokens_folder
from ..config import RemoteServerConfig, StdioServerConfig
from ..messages import JSONObject, ToolResult, ToolSpec
from .base import redefinition
from .cache import ToolCache
from .catalog import Catalog
from .pins import ToolPins
from .presentation import ServerTool, exposed_specs
from .server.connection import RestartPolicy, ServerConnection, StartMode, StartQueue
from .server.lists import CatalogKind
from .server.session import ProgressCallback
from .status import ServerStatus
from .stdio.processes import ChildRecords, procfs_available, reap_orphans

logger = logging.getLogger(__name__)

_MAX_LISTED_NAMES = 50


class ToolHub:
    """All tool servers as one ToolSource. Build it with :func:`open_tool_hub`.

    Attributes:
        catalog: the servers' resources, resource templates and prompts.
    """

    def __init__(
        self,
        servers: Mapping[str, StdioServerConfig | RemoteServerConfig],
        *,
        default_timeout: float | None = None,
        restart_policy: RestartPolicy | None = None,
        records: ChildRecords | None = None,
        cache: ToolCache | None = None,
        start: StartMode = "background",
        hold_starts: bool = False,
        start_limit: int | None = None,
        relay_calls: bool = False,
        tokens: Path | None = None,
        pins: ToolPins | None = None,
    ) -> None:
        self._default_timeout = default_timeout
        self.pins = pins
        """The pinned tool definitions that gate each server's list (``pins.py``); None: none."""
        if pins is not None:
            pins.on_change = self._recompute
        self._queue = StartQueue(held=hold_starts, limit=start_limit)
        self._connections = {
            name: ServerConnection(
                name,
                config,
                on_change=self._recompute,
                on_catalog_change=self._catalog_changed,
                policy=restart_policy,
                records=records,
                cache=cache,
                start=start,
                relay_calls=relay_calls,
                queue=self._queue,
                tokens=tokens,
            )
            for name, config in servers.items()
        }
        self.catalog = Catalog(self._connections, default_timeout=default_timeout)
        self._offering: dict[CatalogKind, tuple[str, ...]] = {"resources": (), "prompts": ()}
        self._catalog_subscribers: list[Callable[[CatalogKind], None]] = []
        self._specs: tuple[ToolSpec, ...] = ()
        self._routes: dict[str, tuple[ServerConnection, str]] = {}
        self._by_name: dict[str, ToolSpec] = {}
        self._gone: dict[str, ServerConnection] = {}  # names whose server failed, for a clear error
        self._held: dict[str, ServerConnection] = {}  # names withheld by the pins (changed definitions)
        self._warnings: tuple[str, ...] = ()
        self._subscribers: list[Callable[[], None]] = []
        self._update_listeners: list[Callable[[str, str], Awaitable[None]]] = []
        self._closed = False
        self._started = False

    # ------------------------------------------------------------ ToolSource

    def list_tools(self) -> Sequence[ToolSpec]:
        """The tools offered now, by exposed name (a snapshot; no I/O)."""
        return self._specs

    async def call_tool(
        self,
        name: str,
        arguments: JSONObject,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> ToolResult:
        """Call a tool by its exposed name. Never raises for tool or server failures.

        The call goes out only to a server that is up, for a tool of its live list under this
        name (``live_spec``), and only when the tool's definition is still the one offered when
        the call came in: a server that starts (or restarts when idle) with another owner,
        other annotations or other parameters for this name gets no call, and the error says
        what changed, so the caller checks the new definition and calls again.

        Args:
            name: the exposed name.
            arguments: the validated arguments.
            timeout: the caller's per-call deadline in seconds (None or 0: none); a server's
                ``callTimeoutSeconds`` takes precedence.
            on_progress: receives the server's progress notifications for this call.
        """
        offered = self._by_name.get(name)
        live = await self.live_spec(name)
        if isinstance(live, ToolResult):
            return live
        if offered is not None and (what := redefinition(offered, live)):
            text = (
                f"tool {name} was not called: {what} when its server started. "
                "The tools offered have been updated: check its definition and call it again if still needed."
            )
            return ToolResult(text, is_error=True)
        connection, mcp_name = self._routes[name]  # live_spec returned with no wait since: still so
        if connection.config.call_timeout_seconds is not None:
            timeout = connection.config.call_timeout_seconds
        elif timeout is None:
            timeout = self._default_timeout
        return await connection.call(
            mcp_name, arguments, timeout=timeout or None, display_name=name, on_progress=on_progress
        )

    def on_resource_updated(self, listener: Callable[[str, str], Awaitable[None]]) -> None:
        """Pass each server's ``notifications/resources/updated`` to ``listener(server, uri)``."""
        self._update_listeners.append(listener)
        for connection in self._connections.values():
            connection.relay.updated = self._resource_updated

    async def _resource_updated(self, server: str, uri: str) -> None:
        for listener in list(self._update_listeners):
            await listener(server, uri)

    def declares(self, feature: Literal["completions", "subscribe"]) -> bool:
        """Whether a server that is up declared ``completions`` or ``resources.subscribe``."""
        for connection in self._connections.values():
            capabilities = connection.capabilities
            if connection.state != "up" or capabilities is None:
                continue
            if feature == "completions" and capabilities.completions is not None:
                return True
            if (
                feature == "subscribe"
                and capabilities.resources is not None
                and capabilities.resources.subscribe
            ):
                return True
        return False

    def connection(self, name: str) -> ServerConnection | None:
        """The server ``name`` of agent.json (None: no such server)."""
        return self._connections.get(name)

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        """Ask every server that declares ``logging`` for logs from ``level`` up (now, and at
        each later start: ``ServerConnection.set_log_level``)."""
        async with anyio.create_task_group() as tg:
            for connection in self._connections.values():
                tg.start_soon(connection.set_log_level, level)

    async def live_spec(self, name: str) -> ToolSpec | ToolResult:
        """The tool ``name`` as its server's live list defines it (``LiveToolSource``).

        A server that is starting is waited for, a lazy or idle one is started first (both
        bounded by its ``startupTimeoutSeconds``). A name offered from a cached list whose running
        server has no such tool, or that belongs to another tool once the server's live list
        is in, is answered with an error that says so: it never routes a call elsewhere.
        """
        if self._closed:
            return ToolResult(f"tool {name} is unavailable: the tool servers are shut down", is_error=True)
        route = self._routes.get(name)
        if route is None:
            held = self._held.get(name)
            if held is not None:
                text = (
                    f"tool {name} is unavailable: its definition changed since it was pinned, and it is "
                    f"withheld until an operator accepts it (mcp-agent tools --accept {held.name})"
                )
                return ToolResult(text, is_error=True)
            gone = self._gone.get(name)
            if gone is not None and gone.state == "failed":
                text = f"tool {name} is unavailable: server {gone.name} failed: {gone.error}"
                return ToolResult(text, is_error=True)
            return ToolResult(self._unknown(name), is_error=True)
        connection, mcp_name = route
        if connection.state in ("starting", "idle"):
            await connection.wait_started()
        if connection.state != "up":
            return ToolResult(connection.unavailable(name), is_error=True)
        now = self._routes.get(name)
        if now is None or now[0] is not connection or now[1] != mcp_name:
            return ToolResult(self._moved(name, connection, mcp_name), is_error=True)
        return self._by_name[name]

    def _moved(self, name: str, connection: ServerConnection, mcp_name: str) -> str:
        """Why ``name``, offered as ``mcp_name`` of ``connection`` from its cached list, is no
        longer that tool now that the server is up."""
        renamed = next((n for n, (c, m) in self._routes.items() if c is connection and m == mcp_name), None)
        owner = self._routes.get(name)
        parts = [f"tool {name} was not called: server {connection.name}'s cached tool list offered it"]
        if renamed is not None:
            parts.append(f"the running server names its tool {mcp_name!r} {renamed}")
        else:
            parts.append(f"the running server has no tool {mcp_name!r}")
        if owner is not None:
            parts.append(f"{name} is now tool {owner[1]!r} of server {owner[0].name}")
        return (
            "; ".join(parts)
            + ". The tools offered have been updated: check them and call again if still needed."
        )

    def _unknown(self, name: str) -> str:
        names = sorted(self._routes)
        if not names:
            return f"unknown tool {name!r}: no tools are available"
        shown = ", ".join(names[:_MAX_LISTED_NAMES])
        more = f" and {len(names) - _MAX_LISTED_NAMES} more" if len(names) > _MAX_LISTED_NAMES else ""
        return f"unknown tool {name!r}. Available tools: {shown}{more}"

    # ---------------------------------------------------------------- status

    def status(self) -> list[ServerStatus]:
        """Every configured server's state, in configuration order."""
        counts: dict[str, int] = {}
        for spec in self._specs:
            counts[spec.server] = counts.get(spec.server, 0) + 1
        return [
            ServerStatus(
                name=c.name,
                status=c.state,
                error=c.error,
                tool_count=counts.get(c.name, 0),
                startup_ms=c.startup_ms,
                restarts=c.restarts,
                junk_lines=c.junk_lines,
                glob_warnings=c.lists.glob_warnings,
                from_cache=c.lists.from_cache,
                lazy=c.config.lazy,
                cache_note=c.lists.cache_note,
                protocol_version=c.protocol_version,
            )
            for c in self._connections.values()
        ]

    @property
    def warnings(self) -> tuple[str, ...]:
        """Naming warnings of the current tool list (collisions, cut names)."""
        return self._warnings

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` whenever the tool list changes; returns the unsubscribe function.

        The callback runs synchronously in the hub's task: keep it short and do not raise (an
        exception is logged and ignored).
        """
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def subscribe_catalog(self, callback: Callable[[CatalogKind], None]) -> Callable[[], None]:
        """Call ``callback("resources")`` or ``callback("prompts")`` when that list may have
        changed; returns the unsubscribe function. Same rules as ``subscribe``."""
        self._catalog_subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._catalog_subscribers:
                self._catalog_subscribers.remove(callback)

        return unsubscribe

    def _catalog_changed(self, kind: CatalogKind) -> None:
        if self._closed or not self._started:
            return
        for callback in list(self._catalog_subscribers):
            try:
                callback(kind)
            except Exception:
                logger.exception("catalog subscriber %r raised", callback)

    # ------------------------------------------------------------ life cycle

    def release_starts(self) -> None:
        """Let the background starts held by ``hold_starts`` begin (the gateway calls it once it
        serves). Idempotent."""
        self._queue.release()

    async def _start(self, tg: anyio.abc.TaskGroup) -> None:
        """Start every enabled server concurrently; return when each is up or has failed."""
        async with anyio.create_task_group() as starting:
            for connection in self._connections.values():
                starting.start_soon(tg.start, connection.run)
        self._started = True
        self._recompute()

    async def aclose(self) -> None:
        """Stop every server and wait until their processes are gone. Idempotent."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            for connection in self._connections.values():
                connection.stop()
            for connection in self._connections.values():
                if connection.running:
                    await connection.stopped.wait()
        self._routes = {}
        self._by_name = {}
        self._specs = ()

    def _recompute(self) -> None:
        """Rebuild names, specs and routes from the servers' tools; tell subscribers on change."""
        if self._closed or not self._started:
            return
        for kind in ("resources", "prompts"):
            offering = tuple(c.name for c in self._connections.values() if c.offers(kind))
            if offering != self._offering[kind]:
                self._offering[kind] = offering
                self._catalog_changed(kind)
        # a server still starting, or lazy and idle, offers its cached list (when it has one)
        serving = [
            c for c in self._connections.values() if c.state in ("up", "restarting", "starting", "idle")
        ]
        tools = [tool for c in serving for tool in self._offered(c)]
        specs, names, warnings = exposed_specs(
            tools, {name: c.config for name, c in self._connections.items()}
        )
        pins = self.pins
        held = {
            exposed: self._connections[server]
            for exposed, (server, mcp_name) in names.items()
            if pins is not None and pins.is_held(server, mcp_name)
        }
        if held:  # named with the rest (so no other name shifts), offered not
            specs = tuple(spec for spec in specs if spec.name not in held)
        self._held = held
        routes = {
            exposed: (self._connections[server], mcp_name)
            for exposed, (server, mcp_name) in names.items()
            if exposed not in held
        }
        if tuple(warnings) != self._warnings:
            for warning in warnings:
                logger.warning("tool names: %s", warning)
        self._warnings = tuple(warnings)
        for name, (connection, _) in self._routes.items():
            if name not in routes:
                self._gone[name] = connection
        self._routes = routes
        self._by_name = {spec.name: spec for spec in specs}
        if tuple(specs) == self._specs:
            return
        self._specs = tuple(specs)
        for callback in list(self._subscribers):
            try:
                callback()
            except Exception:
                logger.exception("tool list subscriber %r raised", callback)

    def _offered(self, connection: ServerConnection) -> tuple[ServerTool, ...]:
        """The server's tools, each marked held or not by the pins (the hub filters the held)."""
        if self.pins is not None:
            self.pins.offered(connection.name, connection.tools, from_cache=connection.lists.from_cache)
        return connection.tools


@asynccontextmanager
async def open_tool_hub(
    servers: Mapping[str, StdioServerConfig | RemoteServerConfig],
    *,
    default_timeout: float | None = None,
    restart_policy: RestartPolicy | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    cache: bool = True,
    start: StartMode = "background",
    hold_starts: bool = False,
    start_limit: int | None = None,
    relay_calls: bool = False,
    pins: ToolPins | None = None,
) -> AsyncIterator[ToolHub]:
    """Start every tool server concurrently and yield the hub once each is up or has failed.

    Args:
        servers: the servers by name, as ``AgentConfig.servers()`` returns them.
        default_timeout: the per-call timeout when neither the server's ``callTimeoutSeconds``
            nor the caller's ``timeout`` sets one (None or 0: none).
        restart_policy: backoff and budget for restarting crashed servers.
        state_dir: the state folder (``mcp_agent.state.folder.private_state_dir()`` for the CLI and the
            gateway): first reap what killed gateways left, then record every stdio server's
            process group in its ``children/`` while it runs. None (the default for library
            use): neither (Linux only either way). The tokens of remote servers that need an
            OAuth login are in its ``oauth/`` (``auth/token_store.py``; without a ``state_dir``:
            the configured state folder's).
        cache: with a ``state_dir``, keep each server's tool list in its ``tool-cache/``
            (``cache.py``) and offer a cached list at once on the next start.
        start: what a server with a cached list does: ``background`` (the default: the hub
            yields at once, the server starts meanwhile and a call to it waits for it),
            ``wait`` (the hub yields when every server is up or has failed, as without a cache),
            ``on_call`` (it starts on its first call; ``mcp-agent tools``). Servers with
            ``lazy: true`` start on their first call unless ``start`` is ``wait``.
        hold_starts: the background starts (``start="background"`` with a cached list) wait
            for ``hub.release_starts()`` (5 s at most); the gateway releases them once it serves.
        start_limit: how many background starts run at once (default: half the CPUs, at least
            one; ``StartQueue``). A call to a server that has not started jumps the queue.
        relay_calls: the gateway exposes the tools (``gateway.exposeTools``): the servers are told
            that their client answers sampling, elicitation and roots requests, which go to the
            client of the exposed call that caused them (``relay.py``).
        pins: each server's tools pinned on first sight, a changed one withheld until accepted
            (``pins.py``); loaded before the first list (a store failure raises ``StateError``).

    Leaving the context (also by cancellation) stops every server and reaps its processes.
    """
    records = None
    if state_dir is not None and procfs_available():
        records = ChildRecords(Path(state_dir) / "children")
        await reap_orphans(records.folder)
    tool_cache = ToolCache.of_state_dir(state_dir) if state_dir is not None and cache else None
    hub = ToolHub(
        servers,
        default_timeout=default_timeout,
        restart_policy=restart_policy,
        records=records,
        cache=tool_cache,
        start=start,
        hold_starts=hold_starts,
        start_limit=start_limit,
        relay_calls=relay_calls,
        tokens=tokens_folder(state_dir) if state_dir is not None else None,
        pins=pins,
    )
    if pins is not None:
        await pins.load()
    async with anyio.create_task_group() as tg:
        try:
            if pins is not None:
                await tg.start(pins.run)
            await hub._start(tg)
            yield hub
        finally:
            await hub.aclose()
            if pins is not None:
                pins.stop()
