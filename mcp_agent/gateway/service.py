"""The gateway's core, shared by MCP and REST: owns the Agent, admits and runs queries, shuts down.

``lifespan.open_service(config, factory)`` starts the Agent in the background (so the HTTP server
answers health at once, ``starting`` until the tool servers are up) and yields a
``GatewayService``. Every query (and every exposed tool call) goes through it:

- input is parsed beforehand by the pure ``parse_query_input`` (below; the same rules for
  ``agent_query``'s arguments and ``POST /api/v1/query``'s body);
- a slot is taken from ``Admissions``: ``maxConcurrentQueries`` run, up to ``maxQueuedQueries``
  wait up to ``queueTimeoutSeconds``, then ``Busy``; each caller within its share;
- a conversation belongs to the caller that started it (``conversation``): another caller's
  ``session_id`` is answered as unknown;
- the client's limits only tighten the configured ones (``Limits.tighten``);
- events go to the event bus, the metrics and the caller's own sink, never blocking the run;
  each carries its caller, so listeners see only what they may;
- at shutdown every running query is told to stop (its ``cancel`` event), so each caller gets a
  ``cancelled`` result while its transport still stands, and the queue is turned away.

Conversations, approvals and run records live in the Agent's ``State`` (``state_store``, which
``lifespan.open_service`` opens or is given, recovers and keeps alive). How that store is doing is
``store`` (``store_health.py``): health shows it. When the gateway can no longer serve (its
service ended on an error, its store failed past ``state.maxOutageSeconds``), ``give_up`` says so
and the server stops, so that the process exits non-zero and its supervisor restarts it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
import anyio.abc
from pydantic import ValidationError

from ..auth.resource import ProtectedResource
from ..config import AgentConfig, Limits
from ..events import Event, EventSink, ModelCallEnded
from ..exceptions import StateError
from ..loop.agent import Agent
from ..loop.approvals import is_destructive
from ..loop.cancel import Cancel
from ..loop.result import RunResult
from ..messages import JSONObject, ToolResult, ToolSpec
from ..state.base import SharedEvents, State
from ..state.records import valid_session_id
from ..telemetry.logs import RunLogFields, log_fields
from ..tools.catalog import Catalog
from ..tools.hub import ToolHub
from ..tools.pins import ToolPins
from ..tools.status import ServerStatus
from .admission import Admissions, Busy, Closed, Slot
from .callers import Caller, CallerBook, gateway_tool_glob_warnings, tool_filters
from .eventbus import ChangeNotices, EventBus, FanOut
from .metrics import Metrics
from .store_health import StoreHealth, is_outage

logger = logging.getLogger(__name__)

T = TypeVar("T")


class AgentFactory(Protocol):
    """Builds and owns the Agent for the gateway's lifetime (default: ``assembly.open_agent``), given
    the config and the gateway's ``State`` (a test's agent may keep a state of its own)."""

    def __call__(self, config: AgentConfig, *, state: State) -> AbstractAsyncContextManager[Agent]: ...


__all__ = ["Admission", "AgentFactory", "Busy", "GatewayService", "NotReady", "UnknownSession", "describe"]


def describe(exc: BaseException) -> str:
    """An exception as one line (a group of one: its one exception), for why a service ended."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


class NotReady(Exception):
    """The gateway cannot run queries now: ``state`` is ``starting``, ``failed`` or ``stopping``."""

    def __init__(self, state: str, message: str) -> None:
        super().__init__(message)
        self.state = state
        self.message = message


class UnknownSession(Exception):
    """The caller named a conversation the gateway never issued, one that expired, or another's."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"unknown session_id {session_id!r} (expired, deleted or never issued); "
            "omit session_id to start a new conversation"
        )
        self.session_id = session_id


class ModelFailures:
    """An EventSink that sets ``failed`` when a model call fails: the model-server watcher
    (``lifespan.watch_model_server``) waits on it to probe again at once, then calls ``renew``."""

    def __init__(self) -> None:
        self.failed = anyio.Event()

    def emit(self, event: Event) -> None:
        if isinstance(event, ModelCallEnded) and not event.ok:
            self.failed.set()

    def renew(self) -> None:
        if self.failed.is_set():
            self.failed = anyio.Event()


SHUTTING_DOWN = "cancelled: the gateway is shutting down (send the query again once it is back)"
CLIENT_GONE = "cancelled: the caller's connection closed before the answer"
NO_ANSWER = "cancelled: the caller did not come back with its answer to the approval question"
"""Why the gateway cancels a run (the run's ``cancelled`` detail says it; see ``loop/cancel.py``)."""


class Admission:
    """A query slot held for ``caller``; ``release`` (idempotent) gives it back."""

    def __init__(
        self, service: GatewayService, agent: Agent, caller: Caller, slot: Slot, cancel: Cancel
    ) -> None:
        self.service = service
        self.agent = agent
        self.caller = caller
        self.cancel = cancel
        self._slot = slot

    def release(self) -> None:
        if not self._slot.released:
            self.service._release(self)
            self.service.admissions.release(self._slot)


class GatewayService:
    """Runs queries against the Agent for every transport; see the module docstring."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.gateway = gateway = config.gateway
        self.callers = CallerBook.from_config(
            gateway.auth_token,
            {name: (caller.token, caller.scopes) for name, caller in gateway.callers.items()},
            share=gateway.caller_share,
            open_ended=gateway.oauth is not None,
            tools=tool_filters(gateway.callers),
        )
        self.resource: ProtectedResource | None = None
        """The gateway as an OAuth protected resource (``gateway.oauth``), or None."""
        if gateway.oauth is not None and gateway.oauth_resource is not None:
            self.resource = ProtectedResource(gateway.oauth, gateway.oauth_resource)
        self.admissions = Admissions(
            max_running=gateway.max_concurrent_queries,
            max_queued=gateway.max_queued_queries,
            queue_timeout=gateway.queue_timeout_seconds,
            share=self.callers.share_of,
        )
        self.bus = EventBus()
        self.shared_events: SharedEvents | None = None
        """Where this replica's run events go for the others (a shared state backend's channel,
        ``lifespan`` sets it); their events come back into ``bus``."""
        self.metrics = Metrics.for_config(config, tools=self.tool_specs)
        self.agent: Agent | None = None
        self.state_store: State | None = None
        """Conversations, approvals and run records (``open_service`` opens or takes it)."""
        self.store = StoreHealth(config.state.max_outage_seconds)
        """How ``state_store`` is doing (the heartbeat and failing requests say; health shows it)."""
        self.gave_up = anyio.Event()
        """Set by ``give_up``: the server stops, and ``serve`` raises ``GatewayFailed``."""
        self.fatal: str | None = None
        """Why the gateway gave up (``give_up``), or None."""
        self.state = "starting"
        self.error: str | None = None
        self.ready = anyio.Event()
        self.tool_changes = ChangeNotices("tools-changed")
        self.catalog_changes = ChangeNotices("catalog")
        self._running: set[Cancel] = set()
        self._idle = anyio.Event()
        self._idle.set()
        self.model_server: JSONObject = {"reachable": None, "model_present": None, "error": None}
        """What the latest probe of the model server found (health shows it; ``lifespan`` probes at
        start-up, every 30 s and after a failed model call)."""
        self.model_failures = ModelFailures()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._serving = False

    def spawn(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``work`` in the service's own task group: work that outlives the request that
        started it (a 2026 run between the rounds of its approval questions). Shutdown cancels
        the runs (their cancel events) like any other.

        Raises:
            NotReady: the service is not running.
        """
        if self._tasks is None:
            raise NotReady(self.state, "the gateway is not running")
        self._tasks.start_soon(work)

    # ---------------------------------------------------------------- state

    def attach(self, agent: Agent) -> None:
        """Use ``agent`` from now on (it is started); listen to its tool changes."""
        self.agent = agent
        self._apply_shares(agent)
        self._warn_tool_globs()
        if self.state != "stopping":  # a shutdown that began while starting stays a shutdown
            self.state = "ready"
        hub = self.hub
        if hub is not None:
            hub.subscribe(self.notify_tools_changed)
            hub.subscribe_catalog(self.notify_catalog_changed)
        self.ready.set()
        self.notify_tools_changed()
        self._release_starts()

    def now_serving(self) -> None:
        """The transport accepts requests (the lifespan says so when it has started): the tool
        servers' background starts, held so far (``hold_starts``), may begin once the agent is
        attached too, so they do not slow the gateway's own start."""
        self._serving = True
        self._release_starts()

    @property
    def hub(self) -> ToolHub | None:
        """The Agent's tool servers, when its tools are a ToolHub (an Agent over another
        ToolSource, such as a test's memory source, has no servers to show or to start)."""
        tools = self.agent.tools if self.agent is not None else None
        return tools if isinstance(tools, ToolHub) else None

    def _release_starts(self) -> None:
        hub = self.hub
        if self._serving and hub is not None:
            hub.release_starts()

    def _warn_tool_globs(self) -> None:
        """Warn once for each caller's ``tools`` glob (and ``gateway.oauth.tools`` rule's) that
        matches none of the tools offered."""
        warnings = gateway_tool_glob_warnings(self.gateway, [spec.name for spec in self.tool_specs()])
        down = [status.name for status in self.server_status() if status.status not in ("up", "disabled")]
        note = f" (servers not up: {', '.join(down)})" if down else ""
        for warning in warnings:
            logger.warning("%s; the caller cannot use what it was meant for%s", warning, note)

    def _apply_shares(self, agent: Agent) -> None:
        """Bound each caller's conversations and pending approvals to its share."""
        agent.approvals.max_per_caller = self.callers.share_of(self.config.approvals.max_pending)
        sessions = agent.sessions
        sessions.max_per_owner = self.callers.share_of(self.config.sessions.max_sessions)

    def fail(self, message: str) -> None:
        self.state = "failed"
        self.error = message
        self.ready.set()

    def give_up(self, reason: str) -> None:
        """The gateway cannot serve any more: stop the server (gracefully: running queries get
        their ``cancelled`` results) so that ``serve`` raises ``GatewayFailed`` and the process
        exits non-zero, and its supervisor restarts it, instead of living on answering errors."""
        if self.fatal is None:
            self.fatal = reason
            logger.critical("the gateway cannot serve any more and stops, to be restarted: %s", reason)
        self.gave_up.set()

    def store_failed(self, exc: StateError) -> None:
        """A request met a failing store: health says so at once (the next good beat clears it)."""
        if is_outage(exc) and self.store.failed(exc):
            logger.error("state store failing: %s", exc)

    @property
    def in_flight(self) -> int:
        return self.metrics.in_flight

    def tool_specs(self, caller: Caller | None = None) -> Sequence[ToolSpec]:
        """The inner tools offered now: every one, or those ``caller`` may use."""
        if self.agent is None:
            return []
        try:
            specs = self.agent.tools.list_tools()
        except Exception:
            logger.exception("listing tools failed")
            return []
        return list(specs if caller is None else caller.tools_of(specs))

    def may_hold_calls(self, caller: Caller) -> bool:
        """Whether a run of ``caller`` may hold a call for approval: ``approvals.require`` globs,
        ``requireDestructive: true``, ``policy.mode`` enforce (``loop/provenance.py``), or (by
        default) a destructive tool among its tools now."""
        approvals = self.config.approvals
        if approvals.require or approvals.require_destructive or self.config.policy.mode == "enforce":
            return True
        return approvals.gates_destructive() and any(
            is_destructive(spec.annotations) for spec in self.tool_specs(caller)
        )

    def server_status(self) -> list[ServerStatus]:
        hub = self.hub
        return hub.status() if hub is not None else []

    @property
    def pins(self) -> ToolPins | None:
        """The tool servers' pinned definitions (``tools/pins.py``); None without a hub or pins."""
        hub = self.hub
        return hub.pins if hub is not None else None

    def health(self) -> tuple[str, list[str]]:
        """The gateway's status and, when ``degraded``, why.

        ``ok``: serving with everything up. ``degraded``: serving, but the model server was not
        reachable, lacks the model, tool servers are down, or the state store fails (each a
        reason). ``starting``, ``stopping`` (draining) and ``failed`` (the agent could not start):
        not serving.
        """
        if self.state != "ready":
            return self.state, [self.error] if self.state == "failed" and self.error else []
        reasons: list[str] = []
        if self.model_server.get("reachable") is False:
            reasons.append("model server unreachable")
        elif self.model_server.get("model_present") is False:
            reasons.append(f"model {self.config.llm.model!r} is not on the model server")
        down = []
        for status in self.server_status():
            if status.status in ("failed", "restarting"):
                down.append(status.name)
        if down:
            reasons.append(f"tool server{'s' if len(down) > 1 else ''} down: {', '.join(sorted(down))}")
        if not self.store.ok:
            reasons.append(f"state store failing: {self.store.error}")
        return ("degraded" if reasons else "ok"), reasons

    # ---------------------------------------------------------------- tool changes

    def notify_tools_changed(self, *_: Any) -> None:
        """Called (sync) by the ToolHub when its tools change; ``tool_changes`` does the rest."""
        self.tool_changes.notify("tools")

    def on_tools_changed(self, listener: Callable[[], Awaitable[None]]) -> None:
        """Run ``listener`` (async) after each change of the tools."""

        async def told(_: str) -> None:
            await listener()

        self.tool_changes.listen(told)

    def catalog(self) -> Catalog | None:
        """The tool servers' resources and prompts, when the agent is ready and has them."""
        hub = self.hub
        return hub.catalog if self.state == "ready" and hub is not None else None

    def notify_catalog_changed(self, kind: str) -> None:
        """Called (sync) by the ToolHub when its ``resources`` or ``prompts`` may have changed."""
        self.catalog_changes.notify(kind)

    def on_catalog_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        """Run ``listener(kind)`` (async) after each change of the resources or prompts."""
        self.catalog_changes.listen(listener)

    # ---------------------------------------------------------------- admission

    def ready_agent(self) -> Agent:
        if self.state == "ready" and self.agent is not None:
            return self.agent
        if self.state == "stopping":
            self.metrics.reject("shutting_down")
            raise NotReady("stopping", "the gateway is shutting down")
        self.metrics.reject("starting")
        if self.state == "failed":
            raise NotReady("failed", f"the agent failed to start: {self.error}")
        raise NotReady("starting", "the agent is starting (tool servers are coming up); retry shortly")

    async def admit(
        self, caller: Caller, *, wait_ready: float = 0, cancel: Cancel | None = None
    ) -> Admission:
        """A query slot for ``caller``: at once, or after waiting in the queue.

        Args:
            caller: who asks (its share of the slots and of the queue applies).
            wait_ready: while the agent is starting, wait this long for it instead of refusing.
            cancel: the run's cancel event (a new one when None).

        Raises:
            NotReady: starting, failed or shutting down.
            Busy: no slot within ``queueTimeoutSeconds``, or no room in the queue.
        """
        if wait_ready > 0 and self.state == "starting":
            with anyio.move_on_after(wait_ready):
                await self.ready.wait()
        agent = self.ready_agent()
        try:
            slot = await self.admissions.acquire(caller.name)
        except Busy:
            self.metrics.reject("busy")
            raise
        except Closed:
            self.metrics.reject("shutting_down")
            raise NotReady("stopping", "the gateway is shutting down") from None
        if self.state != "ready":  # the gateway began to stop while we waited
            self.admissions.release(slot)
            self.metrics.reject("shutting_down")
            raise NotReady("stopping", "the gateway is shutting down")
        admission = Admission(self, agent, caller, slot, cancel if cancel is not None else Cancel())
        self._running.add(admission.cancel)
        if self._idle.is_set():
            self._idle = anyio.Event()
        self.metrics.in_flight += 1
        return admission

    def _release(self, admission: Admission) -> None:
        self.metrics.in_flight -= 1
        self._running.discard(admission.cancel)
        if not self._running:
            self._idle.set()

    # ---------------------------------------------------------------- queries

    async def conversation(self, admission: Admission, request: QueryInput) -> QueryInput:
        """The request bound to a conversation of the caller's.

        Without ``session_id`` a new conversation is opened for the caller under an unguessable id
        (the result carries it, to continue); a ``session_id`` must name a live conversation the
        gateway issued to this caller (an admin may continue anyone's), so a caller can neither
        guess, collide with, nor read another's conversation.

        Raises:
            UnknownSession: the id is not a live conversation of this caller's.
            StateError: the state store failed.
        """
        sessions, caller = admission.agent.sessions, admission.caller
        try:
            if request.session_id is None:
                return dataclasses.replace(request, session_id=(await sessions.create(owner=caller.name)).id)
            session = await sessions.get(request.session_id)
        except StateError as exc:
            self.store_failed(exc)
            raise
        if session is None or not caller.sees(session.owner):
            raise UnknownSession(request.session_id)
        return request

    async def run(
        self, request: QueryInput, admission: Admission, *, events: EventSink | None = None
    ) -> RunResult:
        """Run one query in the slot ``admission`` holds (released at the end).

        Args:
            request: the validated input, bound to a conversation (``conversation``).
            admission: the slot; set ``admission.cancel`` to end the run as ``cancelled`` (a result
                is still returned).
            events: the caller's own sink (progress, a REST stream), besides bus and metrics.
        """
        try:
            agent = admission.agent
            # the client's limits only tighten the configured ones (the Agent applies Limits.tighten too)
            limits = agent.config.limits.tighten(request.limits) if request.limits is not None else None
            with log_fields(
                session_id=request.session_id, caller=admission.caller.name
            ):  # on its log records
                return await agent.query(
                    request.query,
                    session_id=request.session_id,
                    limits=limits,
                    events=FanOut(
                        [
                            RunLogFields(),
                            self.bus,
                            self.shared_events,
                            self.metrics,
                            self.model_failures,
                            events,
                        ]
                    ),
                    cancel=admission.cancel,
                    caller=admission.caller.name,
                    only=admission.caller.tools,
                )
        finally:
            admission.release()

    async def call_tool(
        self, name: str, arguments: JSONObject, caller: Caller, *, events: EventSink | None = None
    ) -> ToolResult:
        """One inner tool call for ``exposeTools``, through the Agent's guards (never around them),
        in a query slot of the caller's like any query.

        Raises:
            NotReady: starting, failed or shutting down.
            Busy: no slot within ``queueTimeoutSeconds``, or no room in the queue.
        """
        admission = await self.admit(caller)
        try:
            sink = FanOut([self.bus, self.shared_events, self.metrics, events])
            return await admission.agent.call_tool(
                name, arguments, events=sink, caller=caller.name, only=caller.tools
            )
        finally:
            admission.release()

    async def in_slot(self, caller: Caller, work: Callable[[], Awaitable[T]]) -> T:
        """Do ``work`` (a resource read, a prompt get) in a query slot of the caller's.

        Raises:
            NotReady: starting, failed or shutting down.
            Busy: no slot within ``queueTimeoutSeconds``, or no room in the queue.
        """
        admission = await self.admit(caller)
        try:
            return await work()
        finally:
            admission.release()

    # ---------------------------------------------------------------- shutdown

    def begin_shutdown(self) -> int:
        """Refuse new queries, turn the queue away, tell the running ones to stop.

        Returns how many were running.
        """
        self.state = "stopping"
        self.ready.set()
        self.admissions.close()
        for cancel in list(self._running):
            cancel.set(SHUTTING_DOWN)
        return len(self._running)

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no query runs; False when ``timeout`` passed first."""
        with anyio.move_on_after(timeout):
            await self._idle.wait()
            return True
        return False


# The input of a query, ``{query, session_id?, limits?}``, parsed and checked (pure, no I/O).
#
# The same rules serve ``agent_query``'s arguments and the body of ``POST /api/v1/query``: a
# missing, empty or too long query, a malformed session id, unknown limit keys and wrongly typed
# values are refused with a message that names the field and says what is expected. ``null`` for
# an optional member (and ``""`` for ``session_id``) means absent: clients in a "strict" tool mode
# send every property. Limit keys
# are accepted in the file's camelCase or in snake_case; types are checked strictly (``"3"`` is
# not a number, ``true`` is not an integer).
class QueryInputError(ValueError):
    """The arguments of a query are invalid; the message says which and why."""


@dataclass(frozen=True)
class QueryInput:
    """A validated query request (MCP arguments or REST body)."""

    query: str
    session_id: str | None = None
    limits: Limits | None = None


def _format_errors(prefix: str, exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        where = f"{prefix}.{loc}" if loc else prefix
        message = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def unencodable_at(text: str) -> int | None:
    """The index of the first character UTF-8 cannot encode (a lone surrogate), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def parse_query_input(data: Any, *, max_query_chars: int = 0) -> QueryInput:
    """Validate ``{query, session_id?, limits?}``.

    Raises:
        QueryInputError: a missing, empty or too long query, a bad session id, unknown or
            mistyped limits, unknown keys.
    """
    if not isinstance(data, Mapping):
        raise QueryInputError("arguments must be an object with a 'query' string")
    unknown = sorted(set(data) - {"query", "session_id", "limits"})
    if unknown:
        raise QueryInputError(
            f"unknown argument(s): {', '.join(unknown)} (expected query, session_id, limits)"
        )
    query = data.get("query")
    if query is None:
        raise QueryInputError("'query' is required: the question or instruction for the agent")
    if not isinstance(query, str):
        raise QueryInputError(f"'query' must be a string, not {type(query).__name__}")
    if not query.strip():
        raise QueryInputError("'query' must not be empty")
    if (bad := unencodable_at(query)) is not None:
        raise QueryInputError(
            f"'query' is not valid Unicode text: a lone surrogate (U+{ord(query[bad]):04X}) at character {bad}"
        )
    if max_query_chars and len(query) > max_query_chars:
        raise QueryInputError(
            f"'query' is {len(query)} characters long; the limit is {max_query_chars} (gateway.maxQueryChars)"
        )
    session_id = data.get("session_id")
    if session_id == "":  # strict-mode clients fill what they do not need: absent
        session_id = None
    if session_id is not None:
        if not isinstance(session_id, str):
            raise QueryInputError(f"'session_id' must be a string, not {type(session_id).__name__}")
        if not valid_session_id(session_id):
            raise QueryInputError(
                "'session_id' must be 1-128 characters of letters, digits and . _ : @ - (starting with a "
                "letter or digit)"
            )
    raw_limits = data.get("limits")
    limits = None
    if raw_limits is not None:
        if not isinstance(raw_limits, Mapping):
            raise QueryInputError(f"'limits' must be an object, not {type(raw_limits).__name__}")
        given = {key: value for key, value in raw_limits.items() if value is not None}  # null: absent
        try:
            limits = Limits.model_validate(given, strict=True) if given else None
        except ValidationError as exc:
            raise QueryInputError(_format_errors("limits", exc)) from None
    return QueryInput(query=query, session_id=session_id, limits=limits)


def limits_schema() -> JSONObject:
    """The JSON Schema of ``agent_query``'s ``limits`` argument, from the Limits model."""
    properties: JSONObject = {}
    for name, info in Limits.model_fields.items():
        key = info.alias or name
        if info.annotation is bool:
            schema: JSONObject = {"type": ["boolean", "null"]}
        elif info.annotation is int:
            schema = {"type": ["integer", "null"], "minimum": 0}
        else:
            schema = {"type": ["number", "null"], "minimum": 0}
        if info.description:
            schema["description"] = " ".join(info.description.split())
        properties[key] = schema
    return {
        "type": ["object", "null"],
        "description": (
            "Tighter limits for this query (they can only lower the server's; 0 means off; null or "
            "a missing member: the server's)."
        ),
        "properties": properties,
        "additionalProperties": False,
    }
