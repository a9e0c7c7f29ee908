"""Calls to exposed tools as tasks: a tool server's tasks relayed to the client that asked for one.

A 2026 client that declares the Tasks extension (``tasks.py``) in a ``tools/call`` of an exposed
tool whose server declared the extension too: the call goes through the same guards as a plain
exposed call (argument validation, approvals, budgets, a query slot: ``GatewayService.call_tool``),
reaches the server with the extension declared (``tools/server/tasks.py``), and when the server
answers with a task, the client gets a task of the gateway's at once.

- **Ids.** The client's task id is the gateway's own (``task_…``, unguessable), stored as a
  ``TaskRecord`` with ``upstream = {server, taskId}`` in the state store: the caller that created
  it is its only reader (to anyone else it is unknown, ``-32602``), and the server's id never
  leaves the gateway.
- **Following.** The replica that created it (its owner) follows the server's task: it polls
  ``tasks/get`` at the server's ``pollIntervalMs`` and stores each change (status, message,
  ``inputRequests``, the result or error) with its lease renewed; ``notifications/tasks`` on a
  ``subscriptions/listen`` come from those stored changes (``TaskListen``), on every replica.
  The result is shaped as a plain exposed call's (``shaped``: cut to ``maxResultChars``, held to
  the advertised ``outputSchema``).
- **Requests.** ``tasks/get``, ``tasks/cancel`` and ``tasks/update`` are forwarded to the server
  by a replica that can reach the server's task: its owner, or any replica when the server is a
  remote one (every replica speaks to the same URL). Another replica of a stdio server (its own
  child process knows nothing of the task) answers ``tasks/get`` from the store and asks the owner
  for a cancellation through the store (``TaskStore.request_cancel``); ``tasks/update`` there is
  refused with a message that names the owner.
- **A server that lost the task.** The server answers ``-32602`` for it (restarted, or its TTL
  ran out there), or a stdio server's process is gone: the task is ``failed``, saying so
  (``LOST``, ``GONE``), never left ``working``. An owner that died stops renewing the lease and
  the task is answered ``failed`` as for ``agent_query`` (``tasks.DIED``).
- **A server without the extension.** The call is answered as a plain call (``resultType:
  "complete"``). The extension lets a server decide per request whether to make a task, and a
  client that declared it must take a plain result, so this is what the server itself would do.
  The gateway does not wrap such a call in a task of its own: the server did not say that its
  call may outlive the request, and a gateway task could not be followed by another replica nor
  survive its owner (the call lives in one process's connection), so the task would promise more
  than the gateway can keep.
- **What the server asked no task of.** When the server answers the call itself (it decided not
  to make a task), or a guard stopped the call, that answer is the call's, as for a plain call.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.context import HandlerResult
from mcp.shared.exceptions import MCPError

from ...config import StdioServerConfig
from ...exceptions import StateError
from ...loop.guards import cut_parts
from ...messages import JSONObject, ToolSpec
from ...state.records import TaskRecord
from ...tools.presentation import call_result
from ...tools.relay import relaying_to
from ...tools.server.connection import ServerConnection
from ...tools.server.tasks import (
    CreatedTask,
    UpstreamTask,
    cancel_task,
    get_task,
    offers_tasks,
    poll_seconds,
    update_task,
)
from ..callers import Caller
from ..service import NotReady
from .passthrough import advertised_output_schema, tool_result_to_mcp
from .query import text_result
from .relay import LogLevels, RequestChannel
from .tasks import DEFAULT_TTL_MS, MAX_TTL_MS, MIN_TTL_MS, Tasks, create_result

logger = logging.getLogger(__name__)

LOST = "server {server} no longer knows this task (it restarted, or the task expired there): {detail}"
GONE = "server {server} went away while its task ran ({detail}); the task went with it"
UNREACHABLE = "server {server} cannot be reached now: {detail}"
NOT_HERE = (
    "this task's server {server} runs under gateway replica {replica} (a stdio server of its own); "
    "send tasks/update to that replica"
)
REQUEST_SECONDS = 30.0
MIN_FOLLOW_SECONDS = 0.05
INTERNAL_ERROR = -32603
INVALID_PARAMS = -32602

InnerCall = Callable[
    [ToolSpec, JSONObject, Caller], Awaitable[types.CallToolResult | types.InputRequiredResult]
]
"""One guarded exposed call in the current relay channel (``AgentQueryTool._inner_result``)."""


class TaskChannel(RequestChannel):
    """The channel of an exposed call whose client asked for a task: it takes the server's task."""

    created: tuple[str, CreatedTask] | None = None

    def take_task(self, server: str, created: CreatedTask) -> bool:
        self.created = (server, created)
        return True


Shape = Callable[[types.CallToolResult], types.CallToolResult]
"""What the gateway makes of a relayed task's result (``TaskRelay.shaped``)."""


def upstream_fields(
    record: TaskRecord, task: UpstreamTask, *, now: float, shape: Shape | None = None
) -> TaskRecord:
    """``record`` with the server's view of its task (pure; ``shape`` shapes a result).

    Raises:
        ValueError: a completed task's result is not a ``CallToolResult``.
    """
    result: JSONObject | None = None
    if task.status == "completed" and task.result is not None:
        parsed = types.CallToolResult.model_validate(task.result, by_name=False)
        if shape is not None:
            parsed = shape(parsed)
        result = parsed.model_dump(by_alias=True, mode="json", exclude_none=True)
    error = task.error
    if task.status == "failed" and not error:
        error = {"code": INTERNAL_ERROR, "message": task.status_message or "the server's task failed"}
    changed = replace(
        record,
        status=task.status,
        status_message=task.status_message or "",
        result=result,
        error=error if task.status == "failed" else None,
        input_requests=task.input_requests if task.status == "input_required" else None,
        poll_ms=task.poll_interval_ms or record.poll_ms,
    )
    return changed if changed == record else replace(changed, updated=now)


def failed(record: TaskRecord, message: str, *, now: float) -> TaskRecord:
    return replace(
        record,
        status="failed",
        status_message=message,
        error={"code": INTERNAL_ERROR, "message": message},
        result=None,
        input_requests=None,
        updated=now,
    )


class TaskRelay:
    """Relays the tasks of exposed tools' servers (see the module docstring)."""

    def __init__(self, tasks: Tasks, inner: InnerCall, levels: LogLevels) -> None:
        self.tasks = tasks
        self.service = tasks.service
        self.inner = inner
        self.levels = levels

    # ---------------------------------------------------------------- which calls

    def _connection(self, server: str) -> ServerConnection | None:
        hub = self.service.hub
        return hub.connection(server) if hub is not None else None

    def relayable(self, name: str) -> ToolSpec | None:
        """The exposed tool ``name`` when its server declared the tasks extension."""
        if not self.service.gateway.expose_tools:
            return None
        spec = next((spec for spec in self.service.tool_specs() if spec.name == name), None)
        if spec is None or not spec.server:
            return None
        connection = self._connection(spec.server)
        return spec if connection is not None and offers_tasks(connection.capabilities) else None

    # ---------------------------------------------------------------- creating a task

    async def start(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        spec: ToolSpec,
        caller: Caller,
    ) -> HandlerResult:
        channel = TaskChannel(ctx, caller, self.levels)
        try:
            with relaying_to(channel):
                answer = await self.inner(spec, dict(params.arguments or {}), caller)
        finally:
            channel.end()
        if channel.created is None:  # a guard stopped it, or the server answered it itself
            return answer
        server, created = channel.created
        now = time.time()
        state = self.service.state_store
        record = TaskRecord(
            id="task_" + secrets.token_urlsafe(24),
            caller=caller.name,
            status=created.status,
            status_message=created.status_message or "",
            created=now,
            updated=now,
            ttl_ms=min(max(created.ttl_ms or DEFAULT_TTL_MS, MIN_TTL_MS), MAX_TTL_MS),
            poll_ms=created.poll_interval_ms or 1000,
            replica=state.replica if state is not None else "",
            alive_until=now + self.tasks.lease(),
            upstream={"server": server, "taskId": created.task_id, "tool": spec.name},
        )
        try:
            await self.tasks.store.put(record)  # durable before the answer
            self.service.spawn(lambda: self._follow(record.id, record.poll_ms))
        except (StateError, NotReady) as exc:
            if isinstance(exc, StateError):
                self.service.store_failed(exc)
            await self._cancel_upstream(record)
            return text_result(f"Agent unavailable: the task could not be kept: {exc}", is_error=True)
        return create_result(record)

    # ---------------------------------------------------------------- the owner follows

    async def _follow(self, task_id: str, poll_ms: int) -> None:
        """Poll the server's task and store its changes, until it ends or expires."""
        cancel_sent = False
        while True:
            await anyio.sleep(max(poll_seconds(poll_ms), MIN_FOLLOW_SECONDS))
            try:
                record = await self.tasks.store.get(task_id)
            except StateError as exc:
                logger.warning("task %s: could not read its record: %s", task_id, exc)
                continue
            if record is None or record.terminal:
                return
            if record.cancel_requested and not cancel_sent:
                cancel_sent = True
                await self._cancel_upstream(record)
            poll_ms = (await self.refresh(record)).poll_ms

    # ---------------------------------------------------------------- the server's view

    def reachable_here(self, record: TaskRecord) -> bool:
        """Whether this replica can speak to the server that runs the task."""
        state = self.service.state_store
        if state is not None and record.replica == state.replica:
            return True
        connection = self._connection(self._server(record))
        return connection is not None and not isinstance(connection.config, StdioServerConfig)

    @staticmethod
    def _server(record: TaskRecord) -> str:
        return str((record.upstream or {}).get("server", ""))

    @staticmethod
    def _upstream_id(record: TaskRecord) -> str:
        return str((record.upstream or {}).get("taskId", ""))

    async def fetch(self, record: TaskRecord) -> TaskRecord:
        """The record with the server's current view of the task (not stored)."""
        now = time.time()
        server, upstream_id = self._server(record), self._upstream_id(record)
        connection = self._connection(server)
        if connection is None:
            return failed(record, GONE.format(server=server, detail="it is no longer configured"), now=now)
        try:
            task = await connection.ask(
                f"tasks/get {upstream_id}",
                lambda session: get_task(session, upstream_id),
                timeout=REQUEST_SECONDS,
            )
        except MCPError as exc:
            if exc.code == INVALID_PARAMS:
                return failed(record, LOST.format(server=server, detail=exc.message), now=now)
            stdio = isinstance(connection.config, StdioServerConfig)
            if connection.state in ("failed", "disabled") or (stdio and connection.state != "up"):
                return failed(record, GONE.format(server=server, detail=exc.message), now=now)
            message = UNREACHABLE.format(server=server, detail=exc.message)
            return record if record.status_message == message else replace(record, status_message=message)
        try:
            return upstream_fields(record, task, now=now, shape=partial(self.shaped, record))
        except ValueError as exc:  # a completed task whose result is no CallToolResult
            return failed(record, f"server {server} returned an invalid task result: {exc}", now=now)

    def shaped(self, record: TaskRecord, result: types.CallToolResult) -> types.CallToolResult:
        """A relayed task's result as a plain exposed call's: the text cut to ``maxResultChars``
        and held to the tool's advertised ``outputSchema`` (``passthrough.py``)."""
        name = str((record.upstream or {}).get("tool", ""))
        spec = next((spec for spec in self.service.tool_specs() if spec.name == name), None)
        raw = call_result(result, time.perf_counter())
        content, _ = cut_parts(raw.content, self.service.config.limits.max_result_chars)
        return tool_result_to_mcp(
            replace(raw, content=content),
            name=name,
            output_schema=advertised_output_schema(spec) if spec is not None else None,
        )

    async def refresh(self, record: TaskRecord) -> TaskRecord:
        """Fetch the server's view and store it when it changed. The lease is renewed (after a
        third of it) by the owner, and by any replica when every replica reaches the server."""
        fresh = await self.fetch(record)
        lease = self.tasks.lease()
        now = time.time()
        if record.alive_until - now < lease * 2 / 3 and self.reachable_here(record):
            fresh = replace(fresh, alive_until=now + lease)
        if fresh != record:
            try:
                await self.tasks.store.put(fresh)
            except StateError as exc:
                logger.warning("task %s: could not store its state: %s", record.id, exc)
        return fresh

    # ---------------------------------------------------------------- the client's requests

    async def get(self, record: TaskRecord) -> TaskRecord:
        """``tasks/get``: forwarded when the server can be reached from here, else the stored state."""
        if record.terminal or not self.reachable_here(record):
            return record
        return await self.refresh(record)

    async def cancel(self, record: TaskRecord) -> None:
        """``tasks/cancel``: forwarded, or asked of the owner through the store."""
        if record.terminal:
            return
        if not self.reachable_here(record):
            try:
                await self.tasks.store.request_cancel(record.id)
            except StateError as exc:
                self.service.store_failed(exc)
                raise MCPError(INTERNAL_ERROR, f"the task store failed: {exc}") from None
            return
        await self._cancel_upstream(record)
        await self.refresh(record)

    async def update(self, record: TaskRecord, responses: dict[str, Any]) -> None:
        """``tasks/update``: the client's answers to the server's ``inputRequests``, forwarded."""
        if record.terminal:
            return
        if not self.reachable_here(record):
            raise MCPError(
                INTERNAL_ERROR, NOT_HERE.format(server=self._server(record), replica=record.replica or "?")
            )
        connection = self._connection(self._server(record))
        if connection is None:
            raise MCPError(INTERNAL_ERROR, f"server {self._server(record)} is no longer configured")
        upstream_id = self._upstream_id(record)
        await connection.ask(
            f"tasks/update {upstream_id}",
            lambda session: update_task(session, upstream_id, responses),
            timeout=REQUEST_SECONDS,
        )
        await self.refresh(record)

    async def _cancel_upstream(self, record: TaskRecord) -> None:
        connection = self._connection(self._server(record))
        if connection is None:
            return
        upstream_id = self._upstream_id(record)
        try:
            await connection.ask(
                f"tasks/cancel {upstream_id}",
                lambda session: cancel_task(session, upstream_id),
                timeout=REQUEST_SECONDS,
            )
        except MCPError as exc:  # ended meanwhile, or gone: the next tasks/get says which
            logger.info(
                "task %s: tasks/cancel on server %s: %s", record.id, self._server(record), exc.message
            )


__all__ = ["TaskChannel", "TaskRelay", "failed", "upstream_fields"]
