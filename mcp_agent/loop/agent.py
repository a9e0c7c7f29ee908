"""The ``Agent``: a model, its tools and their sessions, the library face of mcp_agent.

It runs each query through the loop (``run.py``'s ``run``) with the configured limits, gate,
approvals, pages (a session's in the state, beside it; a run's own in memory) and tracing;
holds the query's session for the run (``SessionStore.hold``) and saves its transcript; records
every run in ``state.runs`` (in flight, then its ending); and makes single tool calls from
outside the loop (the gateway's ``exposeTools``) go through the same guards. ``Agent.from_config`` opens the provider, the tool servers and the state of an agent.json.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from pydantic import ValidationError

from ..config import AgentConfig, Limits, load_config
from ..events import (
    EventSink,
)
from ..exceptions import ConfigError, StateError
from ..messages import JSONObject, Message, ToolCall, ToolResult
from ..providers.base import Provider
from ..providers.servers.info import server_info_of
from ..state.base import PageStore, RunStore, SessionStore, State
from ..state.memory import MemoryPageStore
from ..state.records import Session, valid_session_id
from ..telemetry.base import TraceSettings
from ..telemetry.setup import flush_tracing, setup_tracing, start_trace
from ..tools.base import ToolSource
from ..tools.router import ToolRouter
from ._dispatch import Dispatcher
from ._emitter import Emitter
from ._records import begun, broken_off, finished, kept_transcript, memory_state, note_unsaved, quietly
from ._timeline import TimelineSink
from .approvals import ApprovalQueue, Gate, GlobGate, require_warnings
from .cancel import CancelSwitch
from .guards import cut_parts
from .history import trim_history
from .recording import RecordTo
from .result import RunResult, TerminationReason
from .run import run

logger = logging.getLogger(__name__)

R = TerminationReason


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
        self._events = events
        self._pages: PageStore = MemoryPageStore(self.config.limits.max_paged_bytes_total)
        """Paged results of the runs without a session (those of sessions go beside them: ``_pages_for``)."""
        self._router = ToolRouter(self.config.llm.tool_budget, self.config.llm.pinned_tools)
        self._trace_settings = TraceSettings.from_config(self.config)

    @classmethod
    def from_config(
        cls,
        config: AgentConfig | str | os.PathLike[str],
        *,
        record_children: bool = True,
        hold_starts: bool = False,
        **options: Any,
    ) -> AbstractAsyncContextManager[Agent]:
        """An Agent over the configured model server and tool servers, for ``async with``.

        Starts every tool server and opens one model client; both are closed on exit.
        ``options`` (``sessions``, ``approvals``, ``events``, ``gate``) go to the constructor.
        With ``record_children`` (the default, as for the CLI and the gateway) the tool
        servers' processes are recorded in the state folder (``$MCP_AGENT_STATE_DIR``, else
        ``$XDG_STATE_HOME/mcp-agent``, else ``~/.local/state/mcp-agent``), and what an earlier,
        killed process left there is reaped first. Once the servers are up, each
        ``approvals.require`` glob that matches no offered tool is logged as a warning. With
        ``hold_starts`` the servers offered from the tool cache do not start until
        ``agent.tools.release_starts()`` (the gateway calls it once it serves; 5 s at most).

        Raises:
            ConfigError: the config file is missing or invalid.
        """
        return _open_agent(cls, config, options, record_children=record_children, hold_starts=hold_starts)

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

        Bad input (a query that is not text, invalid limits, a malformed session id) does not
        raise either: the run ends at once as ``terminal_error`` and ``detail`` says what was wrong.
        """
        run_id = secrets.token_hex(8)
        record = begun(
            run_id, text, session_id=session_id or None, caller=caller, replica=self._state.replica
        )
        timeline = TimelineSink(record.started)
        sinks = [sink for sink in (self._events, events) if sink is not None] + [timeline]
        options: dict[str, Any] = {"sinks": sinks, "cancel": cancel, "caller": caller, "run_id": run_id}
        await quietly(self._state.runs.begin, record)
        try:
            result = await self._query(text, session_id, limits, options)
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
        self,
        text: str,
        session_id: str | None,
        limits: Limits | Mapping[str, Any] | None,
        options: dict[str, Any],
    ) -> RunResult:
        try:
            effective = self._tighten(limits)
        except ConfigError as exc:
            return await self._run(text, self.config.limits, input_error=exc.message, **options)
        if not session_id:  # None (or ""): a run of its own, nothing kept
            return await self._run(text, effective, **options)
        if not isinstance(session_id, str) or not valid_session_id(session_id):
            error = "session_id: use 1-128 letters, digits and . _ : @ - (starting with a letter or digit)"
            return await self._run(text, effective, input_error=error, **options)
        async with AsyncExitStack() as stack:
            try:
                session = await stack.enter_async_context(
                    self._sessions.hold(session_id, owner=options["caller"])
                )
            except (TypeError, ValueError) as exc:
                return await self._run(text, effective, input_error=f"session_id: {exc}", **options)
            except StateError as exc:
                error = f"session_id: the conversation could not be loaded ({exc})"
                return await self._run(text, effective, input_error=error, session_id=session_id, **options)
            result = await self._run(
                text, effective, history=session.transcript, session_id=session.id, **options
            )
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
    ) -> ToolResult:
        """One tool call from outside the loop (the gateway's ``exposeTools``), with its guards.

        The call goes through what a call the model makes goes through: the name resolved, the
        arguments validated and coerced, the gate asked (``tainted``: the arguments come from
        outside) and any approval awaited, ``toolTimeoutSeconds``, ``maxResultChars``, and the
        ToolCallStarted/Ended (and approval) events. Never raises for what the tool does.

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
            self._tools, limits, emit, gate=self._gate, approvals=self._approvals, trace=trace
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

    async def _run(
        self,
        text: str,
        limits: Limits,
        *,
        sinks: Sequence[EventSink],
        cancel: CancelSwitch | None,
        caller: str | None,
        run_id: str | None = None,
        history: Sequence[Message] = (),
        session_id: str | None = None,
        input_error: str | None = None,
    ) -> RunResult:
        options: dict[str, Any] = dict(
            sinks=sinks, cancel=cancel, caller=caller, history=history, session_id=session_id, run_id=run_id
        )
        if self.record is not None and input_error is None:
            return await self._recorded(text, limits, **options)
        return await self._run_with(
            self.provider, self._tools, text, limits, input_error=input_error, **options
        )

    async def _recorded(self, text: str, limits: Limits, **options: Any) -> RunResult:
        """One run recorded to ``record`` (``loop/recording.py``)."""
        from .recording import Recorder, record_path, settings_of

        assert self.record is not None
        run_id = options.pop("run_id", None) or secrets.token_hex(8)
        recorder = Recorder(record_path(self.record, run_id))
        recorder.start(
            query=text,
            run_id=run_id,
            settings=settings_of(self.config, limits),
            tools=self._tools.list_tools(),
            config=self.config,
            server=server_info_of(self.provider),
            history=options["history"],
            session_id=options["session_id"],
        )
        options["sinks"] = [*options["sinks"], recorder]
        try:
            provider, tools = recorder.provider(self.provider), recorder.tools(self._tools)
            result = await self._run_with(provider, tools, text, limits, run_id=run_id, **options)
            recorder.finish(result)
        finally:
            recorder.close()
        if recorder.error is not None:
            logger.warning("recording to %s failed: %s", recorder.path, recorder.error)
        return result

    async def _run_with(
        self,
        provider: Provider,
        tools: ToolSource,
        text: str,
        limits: Limits,
        *,
        sinks: Sequence[EventSink],
        cancel: CancelSwitch | None,
        caller: str | None,
        history: Sequence[Message] = (),
        session_id: str | None = None,
        input_error: str | None = None,
        run_id: str | None = None,
    ) -> RunResult:
        return await run(
            text,
            provider=provider,
            tools=self._routed_tools(tools),
            limits=limits,
            system_prompt=self._system_prompt,
            history=history,
            events=sinks,
            cancel=cancel,
            gate=self._gate,
            approvals=self._approvals,
            session_id=session_id,
            temperature=self.config.llm.temperature,
            max_output_tokens=self.config.llm.max_output_tokens,
            tool_choice=self.config.llm.tool_choice,
            input_error=input_error,
            caller=caller,
            pages=self._pages_for(session_id),
            run_id=run_id,
            telemetry=self._trace_settings,
        )

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


def _default_gate(config: AgentConfig, tools: ToolSource) -> Gate | None:
    approvals = config.approvals
    if not approvals.require and not approvals.require_destructive:
        return None
    return GlobGate(approvals.require, require_destructive=approvals.require_destructive, tools=tools)


@asynccontextmanager
async def _open_agent(
    cls: type[Agent],
    config: AgentConfig | str | os.PathLike[str],
    options: dict[str, Any],
    *,
    record_children: bool,
    hold_starts: bool = False,
) -> AsyncIterator[Agent]:
    # the one wiring point: concrete providers and tool servers are imported here only
    from ..providers.factory import open_provider
    from ..providers.servers.info import server_info_of, sized_for_server
    from ..state.folder import private_state_dir
    from ..tools.hub import open_tool_hub

    if not isinstance(config, AgentConfig):
        config = load_config(config)
    setup_tracing(config.telemetry)  # OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT says so (and none is set)
    async with (
        open_provider(config.llm) as provider,
        open_tool_hub(
            config.servers(),
            default_timeout=config.limits.tool_timeout_seconds,
            state_dir=private_state_dir() if record_children else None,
            hold_starts=hold_starts,
        ) as hub,
    ):
        down = [status.name for status in hub.status() if status.status not in ("up", "disabled")]
        for warning in require_warnings(config.approvals.require, hub, down=down):
            logger.warning("%s", warning)
        config = sized_for_server(config, server_info_of(provider), hub.list_tools())
        try:
            yield cls(provider, hub, config, **options)
        finally:
            await flush_tracing()
