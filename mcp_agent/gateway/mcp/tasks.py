"""``agent_query`` as a task: the MCP Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663).

A 2026-era client that declares the extension in a ``tools/call agent_query`` request's
capabilities gets a ``CreateTaskResult`` at once (``resultType: "task"``, ``taskId``, ``ttlMs``,
``pollIntervalMs``); the run goes on detached, in the service's task group, and survives the
client's disconnect. Other clients see no change: the call answers as before.

- **State.** The task is a ``TaskRecord`` in the gateway's state store (``State.tasks``), written
  before the answer (so an immediate ``tasks/get`` finds it) and rewritten whole by its owner as
  the run goes on: ``working``, ``input_required`` (with its questions), then ``completed`` (the
  ``CallToolResult`` a plain call gives: ``run_result_to_mcp``), ``cancelled`` (a ``tasks/cancel``
  stopped the run) or ``failed`` (a JSON-RPC error: the run raised, or its replica died). Every
  replica sharing the store (SQLite file, Redis) answers ``tasks/get``, and a restarted gateway
  answers with what was stored.
- **A dead owner.** The owner renews the task's lease (``alive_until``, ``state.leaseSeconds``,
  renewed every third of it) while the run goes on. A task still ``working`` or
  ``input_required`` past its lease died with its replica (killed, crashed, restarted): every
  replica answers it ``failed``, saying so (``DIED``). A replica stalled past its lease is
  taken for dead the same way (the caveat of every lease, as for session locks).
- **Expiry.** A task is kept ``ttlMs`` after its creation: ``DEFAULT_TTL_MS``, or what the client
  asked with the 2025-11-25 ``task.ttl`` hint, within ``MIN_TTL_MS``..``MAX_TTL_MS``. A run still
  going when its task expires is cancelled. An expired task is answered like an unknown one.
- **Callers.** A task belongs to the caller that created it; to anyone else its id is unknown
  (the same ``-32602`` as a task that does not exist).
- **Cancellation.** ``tasks/cancel`` on the owner cancels the run at once; on another replica it
  marks the record (``TaskStore.request_cancel``) and the owner, which looks every
  ``CHECK_SECONDS``, cancels the run then. A run ended by it is ``cancelled``.
- **Approvals.** When the caller may decide its run's approvals and its client declared form
  elicitation, a gated tool call moves the task to ``input_required`` with the question under
  the approval's id in ``inputRequests``; ``tasks/update`` with that key answers it (from any
  replica: approvals live in the shared store too), and the task goes back to ``working``.
  Otherwise approvals wait for the dashboard or REST, as for a plain call.
- **Notifications.** ``subscriptions/listen`` with ``notifications.taskIds`` (and the extension
  declared) streams ``notifications/tasks`` (the full task, as ``tasks/get`` gives it) for the
  caller's tasks among them: the current state at once, then each change (of a task another
  replica runs: read from the shared store every ``POLL_INTERVAL_MS``, until it ends).

A call of an exposed tool whose server declared the extension becomes that server's task,
relayed (``task_relay.py``, the ``Relay`` here): its record carries ``upstream``, and
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` of it go to the relay.

Requests about tasks from a client that did not declare the extension are refused with
``-32021``; ``tasks/result`` and ``tasks/list`` (removed by SEP-2663) stay unknown methods.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ServerEvent,
    event_matches,
    event_to_notification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field, ValidationError
from starlette.requests import HTTPConnection

from ...events import ApprovalRequested, ApprovalResolved
from ...exceptions import StateError
from ...loop.cancel import Cancel
from ...loop.result import RunResult
from ...messages import JSONObject, ToolSpec
from ...state.base import TaskStore
from ...state.records import TERMINAL_TASK_STATUSES, TaskRecord
from ..callers import Caller
from ..eventbus import BufferedSink
from ..service import (
    Busy,
    GatewayService,
    NotReady,
    QueryInput,
    UnknownSession,
    describe,
)
from .ask_caller import approval_sink, elicit_request, may_answer, resolve, wants_forms
from .query import STARTUP_WAIT_SECONDS, parsed_query, text_result

logger = logging.getLogger(__name__)

EXTENSION = "io.modelcontextprotocol/tasks"
DEFAULT_TTL_MS = 3_600_000
"""How long a task is kept when the client asks nothing (an hour)."""
MIN_TTL_MS = 1_000
MAX_TTL_MS = 86_400_000
"""The longest a client may ask a task to be kept (a day)."""
POLL_INTERVAL_MS = 1_000
CHECK_SECONDS = 1.0
"""How often the owner of a running task looks for a cancellation asked on another replica."""
CANCELLED = "cancelled: the caller cancelled the task"
EXPIRED = "cancelled: the task's time to live ran out"
DIED = (
    "the run died with its replica: gateway {replica} stopped renewing this task before the run "
    "ended (it was killed, crashed or restarted); send the query again"
)
NOT_FOUND = "Failed to retrieve task: Task not found"
INTERNAL_ERROR = -32603
INVALID_PARAMS = -32602


# ------------------------------------------------------------------------------------------ pure


def declared(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether a request's client capabilities declare the tasks extension."""
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and EXTENSION in (extensions or {})


def ttl_of(params: types.CallToolRequestParams) -> int:
    """The task's TTL: the client's ``task.ttl`` hint (2025-11-25), held within the bounds."""
    asked = params.task.ttl if params.task is not None else None
    if asked is None:
        return DEFAULT_TTL_MS
    return min(max(int(asked), MIN_TTL_MS), MAX_TTL_MS)


def iso(wall: float) -> str:
    """A wall time as ISO 8601 in UTC (``2026-12-06T11:20:00.000Z``)."""
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_fields(record: TaskRecord, *, now: float) -> JSONObject:
    """The task as ``tasks/get`` and ``notifications/tasks`` carry it (a ``DetailedTask``); a task
    not ended whose owner's lease lapsed is ``failed`` (``DIED``)."""
    status, message = record.status, record.status_message
    error = record.error
    if not record.terminal and record.alive_until < now:
        status, message = "failed", DIED.format(replica=record.replica or "?")
        error = {"code": INTERNAL_ERROR, "message": message}
    wire: JSONObject = {
        "taskId": record.id,
        "status": status,
        "createdAt": iso(record.created),
        "lastUpdatedAt": iso(record.updated),
        "ttlMs": record.ttl_ms,
        "pollIntervalMs": record.poll_ms,
    }
    if message:
        wire["statusMessage"] = message
    if status == "completed" and record.result is not None:
        wire["result"] = record.result
    elif status == "failed":
        wire["error"] = error or {"code": INTERNAL_ERROR, "message": message or "the task failed"}
    elif status == "input_required":
        wire["inputRequests"] = record.input_requests or {}
    return wire


def create_result(record: TaskRecord) -> JSONObject:
    """The ``CreateTaskResult`` of a new task: the flat task, ``resultType: "task"``."""
    wire = task_fields(record, now=record.created)
    return {"resultType": "task", **wire}


def missing_capability() -> MCPError:
    return MCPError(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def wire_form(model: BaseModel) -> JSONObject:
    dumped: JSONObject = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


# ------------------------------------------------------------------------------------------ params


class TaskIdParams(types.RequestParams):
    """``tasks/get`` and ``tasks/cancel``."""

    task_id: str = Field(alias="taskId")


class UpdateTaskParams(types.RequestParams):
    """``tasks/update``."""

    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


class TaskStatusNotification(BaseModel):
    """``notifications/tasks`` (the SDK has no type for it)."""

    method: str = "notifications/tasks"
    params: dict[str, Any]


# ------------------------------------------------------------------------------------------ tasks


@dataclass(eq=False)
class LocalTask:
    """A task whose run goes on in this process."""

    record: TaskRecord
    caller: Caller
    cancel: Cancel = field(default_factory=Cancel)
    admitting: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cancel_asked: bool = False
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    questions: dict[str, JSONObject] = field(default_factory=dict)
    ended: bool = False


CallerOf = Callable[[ServerRequestContext[Any]], Caller | None]


class Relay(Protocol):
    """The relay of tool servers' tasks (``task_relay.TaskRelay``): a task with an ``upstream``
    is the server's, and its requests go there."""

    def relayable(self, name: str) -> ToolSpec | None: ...

    async def start(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        spec: ToolSpec,
        caller: Caller,
    ) -> HandlerResult: ...

    async def get(self, record: TaskRecord) -> TaskRecord: ...

    async def cancel(self, record: TaskRecord) -> None: ...

    async def update(self, record: TaskRecord, responses: dict[str, Any]) -> None: ...


class Tasks(Extension):
    """The tasks extension of the gateway's MCP server (see the module docstring)."""

    identifier = EXTENSION

    def __init__(
        self,
        service: GatewayService,
        to_mcp: Callable[[RunResult], types.CallToolResult],
        caller_of: CallerOf,
        *,
        tool_name: str,
    ) -> None:
        self.service = service
        self.to_mcp = to_mcp
        self.caller_of = caller_of
        self.tool_name = tool_name
        self.local: dict[str, LocalTask] = {}
        self.relay: Relay | None = None
        """Exposed tools' tasks, relayed to their servers (``serve_tasks`` sets it)."""
        self._watchers: dict[str, set[Callable[[JSONObject], None]]] = {}

    # ---------------------------------------------------------------- the SDK's extension seam

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self.get),
            MethodBinding("tasks/update", UpdateTaskParams, self.update),
            MethodBinding("tasks/cancel", TaskIdParams, self.cancel),
        ]

    async def intercept_tool_call(
        self, params: types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """``agent_query`` from a 2026 client that declared the extension becomes a task; an
        exposed tool's call becomes its server's task, relayed, when the server makes one."""
        if params.name != self.tool_name:
            return await self._relayed_call(params, ctx, call_next)
        if (
            params.request_state is not None
            or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            or not declared(ctx.session.client_capabilities)
        ):
            return await call_next(ctx)
        caller = self.caller_of(ctx)
        if caller is None:
            return await call_next(ctx)  # the call refuses it as it always did
        return await self.start(ctx, params, caller)

    async def _relayed_call(
        self, params: types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        relay = self.relay
        if (
            relay is None
            or params.request_state is not None
            or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            or not declared(ctx.session.client_capabilities)
        ):
            return await call_next(ctx)
        spec = relay.relayable(params.name)
        caller = self.caller_of(ctx)
        if spec is None or caller is None or not caller.may_use(spec.name):
            return await call_next(ctx)  # the call answers it (an unknown tool, for another's)
        return await relay.start(ctx, params, spec, caller)

    @property
    def store(self) -> TaskStore:
        state = self.service.state_store
        if state is None:
            raise NotReady(self.service.state, "the gateway has no state store yet")
        return state.tasks

    def lease(self) -> float:
        state = self.service.state_store
        return state.limits.lease_seconds if state is not None else 30.0

    # ---------------------------------------------------------------- creating a task

    async def start(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, caller: Caller
    ) -> HandlerResult:
        service = self.service
        request = parsed_query(service, params)
        if isinstance(request, types.CallToolResult):
            return request
        now = time.time()
        state = service.state_store
        record = TaskRecord(
            id="task_" + secrets.token_urlsafe(24),
            caller=caller.name,
            status="working",
            created=now,
            updated=now,
            ttl_ms=ttl_of(params),
            poll_ms=POLL_INTERVAL_MS,
            replica=state.replica if state is not None else "",
            alive_until=now + self.lease(),
        )
        try:
            await self.store.put(record)  # durable before the answer: tasks/get finds it at once
        except (StateError, NotReady) as exc:
            if isinstance(exc, StateError):
                service.store_failed(exc)
            return text_result(f"Agent unavailable: the task store failed: {exc}", is_error=True)
        task = LocalTask(record, caller)
        asks = self._asks(ctx, caller)
        self.local[record.id] = task
        try:
            service.spawn(lambda: self._run(task, request, asks))
        except NotReady as exc:
            self.local.pop(record.id, None)
            await self._finish(task, "failed", error={"code": INTERNAL_ERROR, "message": exc.message})
            return text_result(f"Agent unavailable ({exc.state}): {exc.message}", is_error=True)
        return create_result(record)

    def _asks(self, ctx: ServerRequestContext[Any], caller: Caller) -> bool:
        """Whether the run's approvals are put to the caller (as ``QueryCalls._asks``)."""
        approvals = self.service.config.approvals
        return (
            self.service.may_hold_calls(caller)
            and may_answer(caller, self_approval=approvals.self_approval)
            and wants_forms(ctx.session.client_capabilities)
        )

    # ---------------------------------------------------------------- the detached run

    async def _run(self, task: LocalTask, request: QueryInput, asks: bool) -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._keep, task)
                try:
                    await self._admitted_run(task, request, asks)
                finally:
                    tg.cancel_scope.cancel()
        except Exception as exc:
            logger.exception("the run of task %s failed", task.record.id)
            await self._finish(
                task, "failed", error={"code": INTERNAL_ERROR, "message": f"internal error: {describe(exc)}"}
            )
        finally:
            self.local.pop(task.record.id, None)
            if not task.ended:  # cancelled from outside (the service's task group at shutdown)
                with anyio.CancelScope(shield=True):
                    await self._finish(
                        task, "failed", error={"code": INTERNAL_ERROR, "message": "the gateway stopped"}
                    )

    async def _admitted_run(self, task: LocalTask, request: QueryInput, asks: bool) -> None:
        service = self.service
        with task.admitting:
            try:
                admission = await service.admit(
                    task.caller, wait_ready=STARTUP_WAIT_SECONDS, cancel=task.cancel
                )
            except Busy as exc:
                await self._complete(task, text_result(str(exc), is_error=True))
                return
            except NotReady as exc:
                await self._complete(
                    task, text_result(f"Agent unavailable ({exc.state}): {exc.message}", is_error=True)
                )
                return
        if task.admitting.cancelled_caught:
            await self._finish(task, "cancelled", message=CANCELLED)
            return
        try:
            request = await service.conversation(admission, request)
        except UnknownSession as exc:
            admission.release()
            service.metrics.reject("invalid")
            await self._complete(task, text_result(str(exc), is_error=True))
            return
        except StateError as exc:
            admission.release()
            await self._complete(
                task, text_result(f"Agent unavailable: the conversation store failed: {exc}", is_error=True)
            )
            return
        sink: BufferedSink | None = approval_sink() if asks else None
        async with anyio.create_task_group() as tg:
            if sink is not None:
                tg.start_soon(self._relay_questions, task, sink)
            try:
                result = await service.run(request, admission, events=sink)
            finally:
                if sink is not None:
                    sink.close()
        if task.cancel_asked and result.termination_reason == "cancelled":
            await self._finish(task, "cancelled", message=CANCELLED)
        else:
            await self._complete(task, self.to_mcp(result))

    async def _keep(self, task: LocalTask) -> None:
        """Renew the task's lease, act on a cancellation asked elsewhere, end it at its TTL."""
        lease = self.lease()
        renew_every = lease / 3
        renewed = time.monotonic()
        while not task.ended:
            await anyio.sleep(min(CHECK_SECONDS, renew_every))
            try:
                stored = await self.store.get(task.record.id)
            except StateError as exc:
                logger.warning("task %s: could not read its record: %s", task.record.id, exc)
                continue
            if stored is not None and stored.cancel_requested and not task.cancel_asked:
                self._cancel_here(task)
            if time.time() >= task.record.expires - CHECK_SECONDS and not task.cancel.is_set():
                task.cancel.set(EXPIRED)
                task.admitting.cancel()
            if time.monotonic() - renewed >= renew_every:
                renewed = time.monotonic()
                await self._write(task, alive_until=time.time() + lease)

    async def _relay_questions(self, task: LocalTask, sink: BufferedSink) -> None:
        """The run's approval questions, as the task's ``input_required`` state."""
        try:
            async for event in sink:
                if isinstance(event, ApprovalRequested):
                    task.questions[event.approval_id] = wire_form(elicit_request(event))
                elif isinstance(event, ApprovalResolved):
                    if task.questions.pop(event.approval_id, None) is None:
                        continue
                else:
                    continue
                waiting = dict(task.questions)
                await self._write(
                    task,
                    status="input_required" if waiting else "working",
                    status_message="waiting for the caller to approve a tool call" if waiting else "",
                    input_requests=waiting or None,
                )
        finally:
            sink.aclose_receiver()

    def _cancel_here(self, task: LocalTask) -> None:
        task.cancel_asked = True
        task.cancel.set(CANCELLED)
        task.admitting.cancel()

    # ---------------------------------------------------------------- writing the record

    async def _write(self, task: LocalTask, **changes: Any) -> None:
        """Store the owner's next version of the task (never after it ended); tell its watchers."""
        async with task.lock:
            if task.ended:
                return
            task.record = replace(task.record, updated=time.time(), **changes)
            try:
                await self.store.put(task.record)
            except StateError as exc:
                logger.warning("task %s: could not store its state: %s", task.record.id, exc)
            self._tell(task.record)

    async def _complete(self, task: LocalTask, result: types.CallToolResult) -> None:
        await self._finish(task, "completed", result=wire_form(result))

    async def _finish(
        self,
        task: LocalTask,
        status: str,
        *,
        message: str = "",
        result: JSONObject | None = None,
        error: JSONObject | None = None,
    ) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            await self._write(
                task,
                status=status,
                status_message=message,
                result=result,
                error=error,
                input_requests=None,
            )
            task.ended = True

    # ---------------------------------------------------------------- tasks/get, tasks/update, tasks/cancel

    async def _find(self, ctx: ServerRequestContext[Any], task_id: str) -> tuple[TaskRecord, Caller]:
        """The caller's task ``task_id``; -32021 without the extension, -32602 when it is unknown,
        expired or another caller's (one answer for all three)."""
        if not declared(ctx.session.client_capabilities):
            raise missing_capability()
        request = ctx.request
        if isinstance(request, HTTPConnection):
            name = request.headers.get("mcp-name")
            if name is not None and name != task_id:
                raise MCPError(types.HEADER_MISMATCH, "Mcp-Name header does not match params.taskId")
        caller = self.caller_of(ctx)
        try:
            record = await self.store.get(task_id)
        except StateError as exc:
            self.service.store_failed(exc)
            raise MCPError(INTERNAL_ERROR, f"the task store failed: {exc}") from None
        except NotReady as exc:
            raise MCPError(INTERNAL_ERROR, exc.message) from None
        if record is None or caller is None or record.caller != caller.name:
            raise MCPError(INVALID_PARAMS, NOT_FOUND)
        return record, caller

    async def get(self, ctx: ServerRequestContext[Any], params: TaskIdParams) -> HandlerResult:
        record, _ = await self._find(ctx, params.task_id)
        if record.upstream is not None and self.relay is not None:
            record = await self.relay.get(record)
        return task_fields(record, now=time.time())

    async def update(self, ctx: ServerRequestContext[Any], params: UpdateTaskParams) -> HandlerResult:
        record, caller = await self._find(ctx, params.task_id)
        if record.upstream is not None and self.relay is not None:
            await self.relay.update(record, params.input_responses)
            return {}
        waiting = record.input_requests or {}
        agent = self.service.agent
        if agent is None:
            raise MCPError(INTERNAL_ERROR, "the agent is not running")
        for key, response in params.input_responses.items():
            if key not in waiting:
                continue  # unknown, answered already, or superseded: ignored
            try:
                answer = types.ElicitResult.model_validate(response)
            except ValidationError:
                continue
            await resolve(
                agent.approvals,
                key,
                answer,
                caller,
                self_approval=self.service.config.approvals.self_approval,
            )
        return {}

    async def cancel(self, ctx: ServerRequestContext[Any], params: TaskIdParams) -> HandlerResult:
        record, _ = await self._find(ctx, params.task_id)
        if record.terminal:
            return {}
        if record.upstream is not None and self.relay is not None:
            await self.relay.cancel(record)
            return {}
        here = self.local.get(record.id)
        if here is not None:
            self._cancel_here(here)
            return {}
        try:
            await self.store.request_cancel(record.id)
        except StateError as exc:
            self.service.store_failed(exc)
            raise MCPError(INTERNAL_ERROR, f"the task store failed: {exc}") from None
        return {}

    # ---------------------------------------------------------------- notifications/tasks

    def _tell(self, record: TaskRecord) -> None:
        watchers = self._watchers.get(record.id)
        if not watchers:
            return
        wire = task_fields(record, now=time.time())
        for watcher in list(watchers):
            watcher(wire)

    def watch(self, task_id: str, watcher: Callable[[JSONObject], None]) -> Callable[[], None]:
        self._watchers.setdefault(task_id, set()).add(watcher)

        def unwatch() -> None:
            watchers = self._watchers.get(task_id)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    del self._watchers[task_id]

        return unwatch

    def listen_handler(self, inner: ListenFn, bus: Any) -> TaskListen:
        return TaskListen(self, inner, bus)


ListenFn = Callable[
    [ServerRequestContext[Any, Any], types.SubscriptionsListenRequestParams],
    Awaitable[types.SubscriptionsListenResult],
]
"""A ``subscriptions/listen`` handler (the SDK's ``ListenHandler``, or one that wraps it)."""


class TaskListen:
    """``subscriptions/listen``: with ``notifications.taskIds`` it also streams ``notifications/tasks``
    for the caller's tasks running here; without, the SDK's ``ListenHandler`` serves it as before."""

    MAX_BUFFERED = 1024

    def __init__(self, tasks: Tasks, inner: ListenFn, bus: Any) -> None:
        self.tasks = tasks
        self.inner = inner
        self.bus = bus

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> HandlerResult:
        requested = params.notifications
        wanted = (requested.model_extra or {}).get("taskIds")
        if not wanted:
            return await self.inner(ctx, params)
        if not declared(ctx.session.client_capabilities):
            raise missing_capability()
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        caller = self.tasks.caller_of(ctx)
        ids = [str(task_id) for task_id in wanted if isinstance(task_id, str)][:100]
        mine: list[TaskRecord] = []
        for task_id in ids:
            try:
                record = await self.tasks.store.get(task_id)
            except (StateError, NotReady):
                record = None
            if record is not None and caller is not None and record.caller == caller.name:
                mine.append(record)
        honored = types.SubscriptionFilter.model_validate(
            {
                "toolsListChanged": True if requested.tools_list_changed else None,
                "promptsListChanged": True if requested.prompts_list_changed else None,
                "resourcesListChanged": True if requested.resources_list_changed else None,
                "resourceSubscriptions": list(requested.resource_subscriptions)
                if requested.resource_subscriptions
                else None,
                "taskIds": [record.id for record in mine],
            }
        )
        uris = frozenset(honored.resource_subscriptions or ())
        subscription_id = ctx.request_id
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, receive = anyio.create_memory_object_stream[ServerEvent | JSONObject](self.MAX_BUFFERED)

        def deliver(item: ServerEvent | JSONObject) -> None:
            try:
                send.send_nowait(item)
            except (anyio.WouldBlock, anyio.ClosedResourceError):
                send.close()  # a client that stopped reading: its stream ends

        def on_event(event: ServerEvent) -> None:
            if event_matches(honored, uris, event):
                deliver(event)

        stops = [self.bus.subscribe(on_event)]
        stops.extend(self.tasks.watch(record.id, deliver) for record in mine)
        session = ctx.session
        try:
            await session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=subscription_id,
            )
            now = time.time()
            for record in mine:  # the state now: a task that ended before the listen is told too
                deliver(task_fields(record, now=now))
            async with anyio.create_task_group() as tg:
                elsewhere = [record for record in mine if record.id not in self.tasks.local]
                if elsewhere:  # run by another replica: its changes are read from the store
                    tg.start_soon(self._poll, elsewhere, deliver)
                async for item in receive:
                    if isinstance(item, dict):
                        note: Any = TaskStatusNotification(params={**item, "_meta": meta})
                    else:
                        note = event_to_notification(item, meta)
                    await session.send_notification(note, related_request_id=subscription_id)
                tg.cancel_scope.cancel()
        finally:
            for stop in stops:
                stop()
            send.close()
            receive.close()
        return types.SubscriptionsListenResult(_meta=meta)

    async def _poll(self, records: list[TaskRecord], deliver: Callable[[JSONObject], None]) -> None:
        """Deliver the changes of tasks another replica runs, read from the store every
        ``POLL_INTERVAL_MS``, until each has ended (or is gone)."""
        now = time.time()
        last = {record.id: task_fields(record, now=now) for record in records if not record.terminal}
        while last:
            await anyio.sleep(POLL_INTERVAL_MS / 1000)
            for task_id in list(last):
                try:
                    record = await self.tasks.store.get(task_id)
                except (StateError, NotReady):
                    continue
                if record is None:
                    del last[task_id]
                    continue
                wire = task_fields(record, now=time.time())
                if wire != last[task_id]:
                    deliver(wire)
                    last[task_id] = wire
                if wire["status"] in TERMINAL_TASK_STATUSES:
                    del last[task_id]


__all__ = ["EXTENSION", "Relay", "TaskListen", "Tasks", "create_result", "declared", "task_fields", "ttl_of"]
