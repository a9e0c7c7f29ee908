"""What the gateway needs from the Agent, as small Protocols, so the gateway depends on a seam.

The real ``mcp_agent.loop.agent.Agent`` satisfies these; tests may use any object that does.
Only ``query`` is essential. The rest (tools, approvals, sessions) feed the REST API and the
tool description, and are read defensively: a value may be a dataclass with ``to_dict``, a
pydantic model or a plain mapping.

**exposeTools seam.** Calling an inner tool from outside must go through the same validation,
approval, timeout, truncation and events as a call the loop makes. That is the Agent's job,
through ``call_tool``; the gateway never calls the ToolHub directly.

**Resources and prompts** (also ``exposeTools``) have no guards in the loop: the gateway reaches
them through the ToolHub's ``catalog`` (``ResourceCatalog``), read defensively too (a tool
source without one has none).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import mcp_types as types

from ..config import AgentConfig, Limits
from ..events import EventSink
from ..loop.cancel import CancelSwitch
from ..loop.result import RunResult
from ..messages import JSONObject, ToolResult, ToolSpec


class QueryRunner(Protocol):
    """Runs one query. Never raises for run outcomes (they are in the RunResult).

    An external anyio cancellation propagates after the run emitted ``RunEnded``; setting
    ``cancel`` instead ends the run with a ``cancelled`` result that is returned.
    """

    async def query(
        self,
        text: str,
        *,
        session_id: str | None = None,
        limits: Limits | None = None,
        events: EventSink | None = None,
        cancel: CancelSwitch | None = None,
        caller: str | None = None,
    ) -> RunResult: ...


class ToolCatalog(Protocol):
    """The ToolHub as the gateway sees it."""

    def list_tools(self) -> Sequence[ToolSpec]: ...

    def status(self) -> Sequence[Any]: ...

    def subscribe(self, callback: Callable[[], Any]) -> Any: ...


class ResourceCatalog(Protocol):
    """The tool servers' resources and prompts (``tools/catalog.py``). Reads and gets raise
    ``MCPError`` (a JSON-RPC error for the client) for what the servers do."""

    async def list_resources(self, cursor: str | None = None) -> types.ListResourcesResult: ...

    async def list_resource_templates(
        self, cursor: str | None = None
    ) -> types.ListResourceTemplatesResult: ...

    async def read_resource(self, uri: str) -> types.ReadResourceResult: ...

    async def list_prompts(self) -> types.ListPromptsResult: ...

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> types.GetPromptResult: ...


class ApprovalBook(Protocol):
    """The approval queue: pending requests and their resolution (exactly one resolver wins)."""

    async def pending(self) -> Sequence[Any]: ...

    async def resolve(
        self, approval_id: str, approved: bool, reason: str = "", *, by: str | None = None
    ) -> bool: ...


class SessionBook(Protocol):
    """Conversation sessions. The gateway issues their ids (``create``: unguessable), each
    owned by the caller that started it (the session's ``owner``)."""

    async def create(self, owner: str | None = None) -> Any: ...

    async def get(self, session_id: str) -> Any | None: ...

    async def list(self) -> Sequence[Any]: ...

    async def delete(self, session_id: str) -> bool: ...


class RunBook(Protocol):
    """The record of runs (``mcp_agent.state.RunStore``)."""

    async def get(self, run_id: str) -> Any | None: ...

    async def list(
        self,
        *,
        caller: str | None = None,
        reason: str | None = None,
        text: str | None = None,
        limit: int = 50,
        before: float | None = None,
    ) -> Sequence[Any]: ...


class AgentLike(QueryRunner, Protocol):
    """Everything the gateway uses from the Agent."""

    @property
    def tools(self) -> ToolCatalog: ...

    @property
    def approvals(self) -> ApprovalBook: ...

    @property
    def sessions(self) -> SessionBook: ...

    async def call_tool(
        self,
        name: str,
        arguments: JSONObject,
        *,
        session_id: str | None = None,
        events: EventSink | None = None,
        caller: str | None = None,
    ) -> ToolResult:
        """One inner tool call with the loop's guards: validation, approval, timeout, truncation,
        events. Must not raise for anything the tool does."""
        ...

    @property
    def config(self) -> AgentConfig: ...


def as_dict(value: Any) -> JSONObject:
    """A JSON-ready dict from a status, approval or session value of unknown shape."""
    if isinstance(value, Mapping):
        return dict(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return dict(model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "__dict__"):
        return {key: item for key, item in vars(value).items() if not key.startswith("_")}
    return {"value": str(value)}
