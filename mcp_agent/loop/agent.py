"""The ``Agent``: a model, its tools and their sessions, the library face of mcp_agent.

It runs each query through the loop (``run.py``'s ``run``) with the configured limits, gate,
approvals, pages (a session's in the state, beside it; a run's own in memory) and tracing;
holds the query's session for the run (``SessionStore.hold``) and saves its transcript; records
every run in ``state.runs`` (in flight, then its ending) and, with ``record``, to a file
(``recording.py``); and makes single tool calls from outside the loop (the gateway's
``exposeTools``) go through the same guards.

A query travels to ``run`` as one ``Ask``: ``query`` makes it, ``_query`` settles its limits
and its session, ``_run`` hands it to the loop (through the recorder when recording).

The Agent is given its parts: a ``Provider``, a ``ToolSource`` and a ``State``. Which concrete
ones an agent.json names is decided in one place, ``mcp_agent.assembly.open_agent``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any

import anyio
from pydantic import ValidationError

from ..config import AgentConfig, Limits
from ..events import EventSink
from ..exceptions import ConfigError, StateError
from ..messages import JSONObject, Message, ToolCall, ToolResult
from ..providers.base import Provider
from ..providers.servers.info import server_info_of
from ..state.base import PageStore, RunStore, SessionStore, State
from ..state.memory import MemoryPageStore
from ..state.records import Session, valid_session_id
from ..telemetry.base import TraceSettings
from ..telemetry.setup import start_trace
from ..tools.allowed import EVERY_TOOL, AllowedTools, ToolFilter
from ..tools.base import ToolSource
from ..tools.router import ToolRouter
from ._dispatch import Dispatcher, Emitter
from ._records import (
    TimelineSink,
    begun,
    broken_off,
    finished,
    kept_transcript,
    memory_state,
    note_unsaved,
    quietly,
)
from .approvals import ApprovalQueue, Gate, GlobGate
from .cancel import CancelSwitch
from .guards import cut_parts
from .history import trim_history
from .provenance import ProvenancePolicy
from .recording import Recorder, RecordTo, record_path, settings_of
from .result import RunResult, TerminationReason
from .run import run

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ask:
    """One query on its way from ``Agent.query`` to ``run``: what to answer, within what, for whom.

    ``query`` makes it; ``_query`` settles the query's own limits and its session (``replace``);
    ``_run`` hands its fields to ``run``.

    Attributes:
        text: the question (``run`` refuses one that is not text).
        run_id: the run's id, carried in every event and in its record.
        limits: the limits in force (the configured ones, tightened by the query's own).
        sinks: every sink that gets the run's events (the agent's, the query's, its timeline).
        cancel: set it to end the run ``cancelled``.
        caller: who asks, carried in events and approvals.
        only: the tools the run may offer and call (the caller's ``gateway.callers.NAME.tools``).
        session_id: the conversation the run continues; None for a run of its own.
        history: the session's transcript before the run.
        input_error: why the input is unusable; the run then ends at once as ``terminal_error``.
    """

    text: str
    run_id: str
    limits: Limits
    sinks: tuple[EventSink, ...]
    cancel: CancelSwitch | None = None
    caller: str | None = None
    only: ToolFilter = EVERY_TOOL
    session_id: str | None = None
    history: Sequence[Message] = ()
    input_error: str | None = None


# --------------------------------------------------------------------------------------------
# the Agent: the Python API


class Agent:
    """A model, its tools and their sessions: the library face of mcp_agent.

    One Agent serves many concurrent queries. Queries on one session run one after another
    (the session's lock, ``SessionStore.hold``); different sessions and session-less queries
    run concurrently. Every query is recorded in ``state.runs`` (in flight, then its ending).

    Args:
        provider: the model server.
        tools: the tools (a ToolHub, or any ToolSource).
        config: limits, system prompt, approvals and sessions settings; defaults when None.
        state: where conversations, approvals and run records are kept (``open_state``); in
            this process's memory when None. The Agent uses it and does not close it.
        sessions: where conversations live, instead of ``state.sessions``.
        approvals: where calls needing approval wait (a queue over ``state.approvals`` by default).
        events: a sink that receives every event of every run.
        gate: which calls may run; by default a GlobGate of ``approvals.require`` and
            ``approvals.requireDestructive``.
        record: record every run (``loop/recording.py``): a file, or a function of the run id
            giving each run's file. None records nothing.
        pages: where the runs whose pages are not kept in ``state`` (those without a session, or
            with ``sessions`` of their own) keep their paged results; this Agent's memory when None.
    """

    def __init__(
        self,
        provider: Provider,
        tools: ToolSource,
        config: AgentConfig | None = None,
        *,
        state: State | None = None,
        sessions: SessionStore | None = None,
        approvals: ApprovalQueue | None = None,
        events: EventSink | None = None,
        gate: Gate | None = None,
        record: RecordTo | None = None,
        pages: PageStore | None = None,
    ) -> None:
        self.config = config or AgentConfig()
        self.record = record
        self.provider = provider
        self._tools = tools
        self._system_prompt = self.config.prompt()
        self._state: State = state if state is not None else memory_state(self.config)
        self._sessions = sessions if sessions is not None else self._state.sessions
        self._approvals = (
            approvals
            if approvals is not None
            else ApprovalQueue(
                self.config.approvals.timeout_seconds,
                max_pending=self.config.approvals.max_pending,
                store=self._state.approvals,
                replica=self._state.replica,
            )
        )
        self._gate = gate if gate is not None else _default_gate(self.config, tools)
        self._policy = ProvenancePolicy.from_config(self.config)
        self._direct_gate = gate if gate is not None else _default_gate(self.config, tools, direct=True)
        self._events = events
        self._pages: PageStore = (
            pages if pages is not None else MemoryPageStore(self.config.limits.max_paged_bytes_total)
        )
        """Paged results of the runs without a session (those of sessions go beside them: ``_pages_for``)."""
        self._router = ToolRouter(self.config.llm.tool_budget, self.config.llm.pinned_tools)
        self._trace_settings = TraceSettings.from_config(self.config)

    @property
    def tools(self) -> ToolSource:
        return self._tools

    @property
    def approvals(self) -> ApprovalQueue:
        return self._approvals

    @property
    def sessions(self) -> SessionStore:
        return self._sessions

    @property
    def state(self) -> State:
        return self._state

    @property
    def runs(self) -> RunStore:
        return self._state.runs

    async def query(
        self,
        text: str,
        *,
        session_id: str | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        events: EventSink | None = None,
        cancel: CancelSwitch | None = None,
        caller: str | None = None,
        only: ToolFilter = EVERY_TOOL,
    ) -> RunResult:
        """Answer ``text``; never raises for a run's outcome (read ``termination_reason``).

        Args:
            text: the question.
            session_id: continue this conversation (created when unknown); None runs alone.
                ``agent.sessions.create()`` makes a new session with an unguessable id.
            limits: limits for this query; they can only tighten the configured ones.
            events: a sink for this query's events, besides the agent's own.
            cancel: set it to end the run ``cancelled``.
            caller: who asks (the gateway's caller name), carried in events and approvals.
            only: the tools this query may use (``tools/allowed.py``): the model is offered only
                these, and a call of another is answered as a call of an unknown tool.

        Bad input (a query that is not text, invalid limits, a malformed session id) does not
        raise either: the run ends at once as ``terminal_error`` and ``detail`` says what was wrong.
        """
        run_id = secrets.token_hex(8)
        record = begun(
            run_id, text, session_id=session_id or None, caller=caller, replica=self._state.replica
        )
        timeline = TimelineSink(record.started)
        sinks = (*(sink for sink in (self._events, events) if sink is not None), timeline)
        ask = Ask(text, run_id, self.config.limits, sinks, cancel=cancel, caller=caller, only=only)
        await quietly(self._state.runs.begin, record)
        try:
            result = await self._query(ask, session_id, limits)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
                await quietly(
                    self._state.runs.end,
                    broken_off(record, exc, cancelled=cancelled, timeline=timeline.spans()),
                )
            raise
        with anyio.CancelScope(shield=True):
            await quietly(self._state.runs.end, finished(record, result, timeline.spans()))
        return result

    async def _query(
        self, ask: Ask, session_id: str | None, limits: Limits | Mapping[str, Any] | None
    ) -> RunResult:
        """``ask`` with the query's own limits and its session settled, run (and the session saved)."""
        try:
            ask = replace(ask, limits=self._tighten(limits))
        except ConfigError as exc:
            return await self._run(replace(ask, input_error=exc.message))
        if not session_id:  # None (or ""): a run of its own, nothing kept
            return await self._run(ask)
        if not isinstance(session_id, str) or not valid_session_id(session_id):
            error = "session_id: use 1-128 letters, digits and . _ : @ - (starting with a letter or digit)"
            return await self._run(replace(ask, input_error=error))
        async with AsyncExitStack() as stack:
            try:
                session = await stack.enter_async_context(self._sessions.hold(session_id, owner=ask.caller))
            except (TypeError, ValueError) as exc:
                return await self._run(replace(ask, input_error=f"session_id: {exc}"))
            except StateError as exc:
                error = f"session_id: the conversation could not be loaded ({exc})"
                return await self._run(replace(ask, input_error=error, session_id=session_id))
            result = await self._run(replace(ask, history=session.transcript, session_id=session.id))
            if not result.rounds and result.termination_reason is TerminationReason.TERMINAL_ERROR:
                return result  # refused input: nothing to keep
            return await self._save(session, result)
        raise AssertionError("unreachable")  # pragma: no cover (mypy: async with may swallow)

    async def _save(self, session: Session, result: RunResult) -> RunResult:
        """Keep the run's transcript in its session; a failure goes into ``detail``, the answer stays."""
        transcript = kept_transcript(trim_history(result.transcript, self.config.limits.max_history_chars))
        try:
            saved = await self._sessions.save(session, transcript, release=True)  # the hold's last write
        except StateError as exc:
            return note_unsaved(result, str(exc))
        if not saved:
            return note_unsaved(result, "it was deleted while the run went on")
        return result

    async def call_tool(
        self,
        name: str,
        arguments: JSONObject,
        *,
        session_id: str | None = None,
        events: EventSink | None = None,
        caller: str | None = None,
        only: ToolFilter = EVERY_TOOL,
    ) -> ToolResult:
        """One tool call from outside the loop (the gateway's ``exposeTools``), with its guards.

        The call goes through what a call the model makes goes through: the name resolved (a
        tool ``only`` does not permit is unknown), the arguments validated and coerced, the gate
        asked (``tainted``: the arguments come from outside) and any approval awaited,
        ``toolTimeoutSeconds``, ``maxResultChars``, and the ToolCallStarted/Ended (and approval)
        events. Never raises for what the tool does.

        The result's ``text`` is what the model would read; when the tool ran, ``content`` holds
        the server's own parts with their text cut to ``maxResultChars`` (``cut_parts``) and
        ``structured`` its ``structuredContent`` (whole). A call that did not run (invalid
        arguments, denied, timed out) has only its text.
        """
        run_id = secrets.token_hex(8)
        sinks = [sink for sink in (self._events, events) if sink is not None]
        emit = Emitter(sinks, run_id, session_id, caller)
        limits = self.config.limits
        trace = start_trace(
            run_id=run_id, session_id=session_id, caller=caller, settings=self._trace_settings, run_span=False
        )
        dispatcher = Dispatcher(
            self._allowed(only), limits, emit, gate=self._direct_gate, approvals=self._approvals, trace=trace
        )
        call = ToolCall(f"direct_{run_id}", name, dict(arguments))
        plan = await dispatcher.prepare([call], round=0, tainted=True, offered=dispatcher.offered())
        await dispatcher.execute(plan)
        [message] = dispatcher.finish(plan, "the call was interrupted")
        [slot] = plan.slots
        raw = slot.result
        if raw is None:
            return ToolResult(message.content, is_error=message.is_error, elapsed_ms=slot.ms)
        content, _ = cut_parts(raw.content, limits.max_result_chars)
        return ToolResult(
            message.content,
            is_error=message.is_error,
            content=content,
            structured=raw.structured,
            elapsed_ms=slot.ms,
        )

    def _tighten(self, limits: Limits | Mapping[str, Any] | None) -> Limits:
        if limits is not None and not isinstance(limits, Limits | Mapping):
            raise ConfigError(f"invalid limits: expected limits or a mapping, not {type(limits).__name__}")
        try:
            return self.config.limits.tighten(limits)
        except ValidationError as exc:
            raise ConfigError(f"invalid limits: {exc}", "limits") from None

    async def _run(self, ask: Ask) -> RunResult:
        """The loop for ``ask``, recorded to ``record`` when set (a refused input is not recorded)."""
        tools = self._allowed(ask.only)
        recorder = self._recorder(ask, tools) if self.record is not None and ask.input_error is None else None
        provider, sinks = self.provider, ask.sinks
        if recorder is not None:
            provider, tools, sinks = recorder.provider(provider), recorder.tools(tools), (*sinks, recorder)
        try:
            result = await run(
                ask.text,
                provider=provider,
                tools=self._routed_tools(tools),
                limits=ask.limits,
                system_prompt=self._system_prompt,
                history=ask.history,
                events=sinks,
                cancel=ask.cancel,
                gate=self._gate,
                approvals=self._approvals,
                session_id=ask.session_id,
                temperature=self.config.llm.temperature,
                max_output_tokens=self.config.llm.max_output_tokens,
                tool_choice=self.config.llm.tool_choice,
                input_error=ask.input_error,
                caller=ask.caller,
                pages=self._pages_for(ask.session_id),
                run_id=ask.run_id,
                telemetry=self._trace_settings,
                policy=self._policy,
            )
            if recorder is not None:
                recorder.finish(result)
        finally:
            if recorder is not None:
                recorder.close()
        if recorder is not None and recorder.error is not None:
            logger.warning("recording to %s failed: %s", recorder.path, recorder.error)
        return result

    def _recorder(self, ask: Ask, tools: ToolSource) -> Recorder:
        """A recorder for ``ask``'s run over ``tools`` (``loop/recording.py``), its header written."""
        assert self.record is not None
        recorder = Recorder(record_path(self.record, ask.run_id))
        recorder.start(
            query=ask.text,
            run_id=ask.run_id,
            settings=settings_of(self.config, ask.limits),
            tools=tools.list_tools(),
            config=self.config,
            server=server_info_of(self.provider),
            history=ask.history,
            session_id=ask.session_id,
        )
        return recorder

    def _allowed(self, only: ToolFilter) -> ToolSource:
        """The agent's tools as ``only`` narrows them (``tools/allowed.py``); all of them, unwrapped,
        when it permits everything."""
        return self._tools if only.everything else AllowedTools(self._tools, only)

    def _pages_for(self, session_id: str | None) -> PageStore:
        """Where a run keeps its paged results: a session's in the state, beside the session (any
        process sharing the state reads them), as long as the sessions are the state's; else in
        this Agent's memory."""
        if session_id and self._sessions is self._state.sessions:
            return self._state.pages
        return self._pages

    def _routed_tools(self, tools: ToolSource) -> ToolSource:
        """The tools for one run: routed (``llm.toolBudget``) when the budget applies to this model
        server as known now (its kind and context window can be learned after start-up)."""
        info = server_info_of(self.provider)
        budget = self._router.budget_for(kind=info.kind, context_window=info.context_window)
        return tools if budget is None else self._router.for_run(tools, budget)


def _default_gate(config: AgentConfig, tools: ToolSource, *, direct: bool = False) -> Gate | None:
    """The gate of ``approvals``: for the model's calls, or (``direct``) for exposed calls."""
    approvals = config.approvals
    destructive = approvals.gates_destructive(direct=direct)
    if not approvals.require and not destructive:
        return None
    return GlobGate(approvals.require, require_destructive=destructive, tools=tools)
