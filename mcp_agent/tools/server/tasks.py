"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) as a client of a tool server.

The SDK has no Tasks code; this module speaks it through the SDK's public client API:

- **Declared to every 2026 server.** ``CLAIM`` is a ``ResultClaim`` the ``ClientSession`` of each
  server is built with (``connection.py``), so a 2026-07-28 session declares the extension in
  every request's capabilities and parses a ``resultType: "task"`` answer to ``tools/call`` as a
  ``CreatedTask``. The SDK stamps a session's capabilities on each request itself, whole: there is
  no public way to declare the extension on one request only. A legacy (2025) session never
  declares it (a claim is active only at modern versions).
- **A task nobody asked for is followed.** A server may answer any call of such a session with a
  task. When the call's channel does not take it (``TaskTaker``: the gateway relays the task to a
  client that asked for one, ``gateway/mcp/task_relay.py``), ``follow`` polls ``tasks/get`` at the
  server's ``pollIntervalMs`` (held within ``MIN_POLL_MS``..``MAX_POLL_MS``) until the task ends
  and the call answers its result, as a plain call would have; a call cancelled or timed out
  meanwhile sends ``tasks/cancel``. So callers that ask no task see no change but that latency.
- **Requests.** ``get_task``, ``cancel_task`` and ``update_task`` send ``tasks/get``,
  ``tasks/cancel`` and ``tasks/update`` (``Mcp-Name``: the task id) with ``send_request``.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.client.extension import ClaimContext, ResultClaim
from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
MIN_POLL_MS = 20
MAX_POLL_MS = 5_000
REQUEST_SECONDS = 30.0
"""How long one ``tasks/*`` request may take."""


class CreatedTask(types.Result):
    """A ``CreateTaskResult``: the server runs the call as a task."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class UpstreamTask(types.Result):
    """A task as ``tasks/get`` answers it (a ``DetailedTask``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    task_id: str = ""
    status: str = "working"
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


class GetTaskRequest(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param: ClassVar[str | None] = "taskId"


class CancelTaskRequest(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param: ClassVar[str | None] = "taskId"


class UpdateTaskRequest(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param: ClassVar[str | None] = "taskId"


@runtime_checkable
class TaskTaker(Protocol):
    """A call's channel that relays a server's task to its client (instead of following it)."""

    def take_task(self, server: str, created: CreatedTask) -> bool:
        """Whether the channel took ``created`` for its client (False: the call follows it)."""
        ...


def offers_tasks(capabilities: types.ServerCapabilities | None) -> bool:
    """Whether a server declared the tasks extension."""
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and EXTENSION in (extensions or {})


def poll_seconds(poll_ms: int | None) -> float:
    """The pause between two ``tasks/get``: the server's hint, held within the bounds."""
    return min(max(poll_ms or 1000, MIN_POLL_MS), MAX_POLL_MS) / 1000


async def get_task(session: ClientSession, task_id: str) -> UpstreamTask:
    """``tasks/get``. Raises ``MCPError`` (the server's, or a timeout)."""
    request = GetTaskRequest(params=TaskIdParams(taskId=task_id))
    return await session.send_request(request, UpstreamTask, request_read_timeout_seconds=REQUEST_SECONDS)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    """``tasks/cancel``. Raises ``MCPError``."""
    request = CancelTaskRequest(params=TaskIdParams(taskId=task_id))
    await session.send_request(request, types.EmptyResult, request_read_timeout_seconds=REQUEST_SECONDS)


async def update_task(session: ClientSession, task_id: str, responses: dict[str, Any]) -> None:
    """``tasks/update`` with the client's ``inputResponses``. Raises ``MCPError``."""
    request = UpdateTaskRequest(params=UpdateTaskParams(taskId=task_id, inputResponses=responses))
    await session.send_request(request, types.EmptyResult, request_read_timeout_seconds=REQUEST_SECONDS)


async def follow(session: ClientSession, created: CreatedTask) -> UpstreamTask:
    """Poll a task until it ends; its last state. Cancelled (or timed out by the caller's scope),
    it sends ``tasks/cancel`` first. Raises ``MCPError`` when ``tasks/get`` fails."""
    poll = created.poll_interval_ms
    try:
        while True:
            await anyio.sleep(poll_seconds(poll))
            task = await get_task(session, created.task_id)
            if task.terminal:
                return task
            if task.status == "input_required":  # nobody here can answer it: the task is dropped
                await _cancel_quietly(session, created.task_id)
                return task
            poll = task.poll_interval_ms or poll
    except anyio.get_cancelled_exc_class():
        await _cancel_quietly(session, created.task_id)
        raise


async def _cancel_quietly(session: ClientSession, task_id: str) -> None:
    with (
        anyio.CancelScope(shield=True),
        anyio.move_on_after(REQUEST_SECONDS),
        suppress(MCPError, anyio.ClosedResourceError, RuntimeError),
    ):
        await cancel_task(session, task_id)


def outcome(task: UpstreamTask) -> types.CallToolResult:
    """A followed task's end as the call's result (an error result unless it completed)."""
    if task.status == "completed" and task.result is not None:
        return types.CallToolResult.model_validate(task.result, by_name=False)
    if task.status == "input_required":
        text = "the server's task needs input (tasks/update), which this call cannot give"
    elif task.status == "cancelled":
        text = f"the server cancelled its task{': ' + task.status_message if task.status_message else ''}"
    else:
        message = (task.error or {}).get("message") or task.status_message or "the task failed"
        text = f"the server's task failed: {message}"
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


async def _resolve(created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
    with anyio.fail_after(ctx.read_timeout_seconds):
        return outcome(await follow(ctx.session, created))


CLAIM: ResultClaim[CreatedTask] = ResultClaim(result_type="task", model=CreatedTask, resolve=_resolve)
"""The claim a ``ClientSession`` is built with (``extensions={EXTENSION: {}}``)."""
