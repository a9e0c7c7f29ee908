"""One start of a tool server and its life until it ends: the transport (``_transports.py``),
the session with the repair filter (``_repair.py``), the legacy ``initialize`` handshake
(mcp-sdk-2.md G3), then serving until the server exits or the connection drops.

The ``ServerConnection`` that owns it decides the rest (``up``: list the tools, say it is up;
``down``: say it is restarting) and supervises one incarnation after another.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import ClientSession
from mcp.client._transport import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from ..config import RemoteServerConfig, StdioServerConfig
from ..exceptions import ToolServerError, ToolServerStartError
from ._failures import STDERR_SHOWN, crash_error, start_error
from ._orphans import ChildRecords
from ._repair import ResponseRepairer
from ._session import CLIENT_INFO, LiveSession
from ._start_queue import SLOT_SECONDS, Slot
from ._stdio import StdioChild
from ._transports import open_server_transport

logger = logging.getLogger(__name__)

CatalogKind = Literal["resources", "prompts"]

Up = Callable[
    [
        "Incarnation",
        LiveSession,
        types.InitializeResult,
        anyio.abc.TaskGroup,
        MemoryObjectReceiveStream[None],
    ],
    Awaitable[None],
]
"""Called once the handshake is done: ``(incarnation, live, init, tasks, tools_changed)``; it
lists the tools and may start tasks for the incarnation's life in ``tasks``; ``tools_changed``
yields once for each ``notifications/tools/list_changed`` (coalesced)."""


@dataclass
class Incarnation:
    """One start of a server, filled in as it goes.

    Attributes:
        name: the server's name.
        config: its configuration.
        records: where stdio children's process groups are recorded (``_orphans.py``).
        ready: set once it serves, or has failed to start.
        done: set once it has ended.
        child: the stdio child, once spawned.
        error: why it failed to start.
        ended: why it ended after serving.
        started_at: ``time.perf_counter()`` at its start.
        scope: cancels it (and reaps its process).
        idle_stopped: stopped on purpose after ``idleSeconds`` without calls (a lazy server).
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
                        self.config, name=self.name, records=self.records, on_child=spawned
                    ) as (read, write):
                        await self._serve(read, write, on_catalog_change, up, down)
                except Exception as exc:
                    if not self.ready.is_set():
                        self.error = await start_error(self.name, exc, self.child)
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

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                # a refresh already pending is enough; a closed stream means this incarnation ends
                with suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                    refresh_send.send_nowait(None)
            elif isinstance(message, types.ResourceListChangedNotification):
                on_catalog_change("resources")
            elif isinstance(message, types.PromptListChangedNotification):
                on_catalog_change("prompts")
            elif isinstance(message, Exception):
                logger.warning("%s: transport error: %s", self.name, message)

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logger.debug("%s log [%s]: %s", self.name, params.level, params.data)

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
            async with ClientSession(
                read, write, message_handler=on_message, logging_callback=on_log, client_info=CLIENT_INFO
            ) as session:
                init = await session.initialize()
                live = LiveSession(session, repairer, self.child, ended)
                await up(self, live, init, tg, refresh_read)
                self.ready.set()
                await ended.wait()
                self.ended = await crash_error(self.name, self.child, None)
                down(self)
            tg.cancel_scope.cancel()
