"""One ``agent_query`` call over MCP: input, a slot, the run, and everything that talks back.

``QueryCalls.call`` parses the arguments, takes a slot (``GatewayService.admit``), binds the
conversation, and runs the query with what the caller's connection allows:

- **progress** (``progress_sink``, below) when the caller sent a progress token;
- **a gone client** cancels its run (``resumable.py``) when its Streamable HTTP request is aborted;
- **approvals asked of the caller** (``ask_caller.py``) when it declared form elicitation and may
  approve (the ``approve`` scope, or ``approvals.selfApproval``): over the
  session's back channel on a 2025-era connection, or, on a 2026-era request, by answering the
  call with an ``InputRequiredResult`` and keeping the run (parked) until the client retries the
  call with its answer.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import HTTPConnection

from ...events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    ModelCallEnded,
    ModelCallStarted,
    RoundStarted,
    ToolCallEnded,
    ToolCallStarted,
    describe,
)
from ...exceptions import StateError
from ...loop.result import RunResult
from ..callers import Caller
from ..eventbus import BufferedSink, FanOut
from ..service import (
    CLIENT_GONE,
    Admission,
    Busy,
    GatewayService,
    NotReady,
    QueryInput,
    QueryInputError,
    UnknownSession,
    parse_query_input,
)
from .ask_caller import (
    BackChannelAsker,
    ParkedRun,
    ParkedRuns,
    approval_sink,
    may_answer,
    wants_forms,
)
from .resumable import GONE_KEY, Streams, cancel_when_gone

logger = logging.getLogger(__name__)

STARTUP_WAIT_SECONDS = 60.0
"""How long ``agent_query`` waits for the tool servers to come up before answering "starting"."""

Answer = types.CallToolResult | types.InputRequiredResult


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def parsed_query(
    service: GatewayService, params: types.CallToolRequestParams
) -> QueryInput | types.CallToolResult:
    """The arguments of an ``agent_query`` call, or the error result that refuses them (counted)."""
    try:
        return parse_query_input(
            dict(params.arguments or {}), max_query_chars=service.gateway.max_query_chars
        )
    except QueryInputError as exc:
        service.metrics.reject("invalid")
        return text_result(f"Invalid agent_query arguments: {exc}", is_error=True)


class QueryCalls:
    """``agent_query`` calls over one GatewayService (see the module docstring)."""

    def __init__(
        self,
        service: GatewayService,
        to_mcp: Callable[[RunResult], types.CallToolResult],
        streams: Streams | None = None,
    ) -> None:
        self.service = service
        self.to_mcp = to_mcp
        self.streams = streams
        self.parked = ParkedRuns(self_approval=service.config.approvals.self_approval)

    async def call(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, caller: Caller
    ) -> Answer:
        if params.request_state is not None:
            return await self._resume(ctx, params, caller)
        service = self.service
        request = parsed_query(service, params)
        if isinstance(request, types.CallToolResult):
            return request
        try:
            admission = await service.admit(caller, wait_ready=STARTUP_WAIT_SECONDS)
        except Busy as exc:
            return text_result(str(exc), is_error=True)
        except NotReady as exc:
            return text_result(f"Agent unavailable ({exc.state}): {exc.message}", is_error=True)
        try:
            request = await service.conversation(admission, request)
        except UnknownSession as exc:
            admission.release()
            service.metrics.reject("invalid")
            return text_result(str(exc), is_error=True)
        except StateError as exc:
            admission.release()
            return text_result(f"Agent unavailable: the conversation store failed: {exc}", is_error=True)
        if self._asks(ctx, caller) and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await self._start_parked(ctx, request, admission, caller)
        return await self._run_here(ctx, request, admission, caller)

    def _asks(self, ctx: ServerRequestContext[Any], caller: Caller) -> bool:
        """Whether this run's approvals are asked of its caller: gated tools exist, the caller may
        decide them, and its client can answer a form."""
        approvals = self.service.config.approvals
        return (
            self.service.may_hold_calls(caller)
            and may_answer(caller, self_approval=approvals.self_approval)
            and wants_forms(ctx.session.client_capabilities)
        )

    # ---------------------------------------------------------------- a run inside this request

    async def _run_here(
        self, ctx: ServerRequestContext[Any], request: QueryInput, admission: Admission, caller: Caller
    ) -> Answer:
        service = self.service
        asker: BufferedSink | None = None
        if self._asks(ctx, caller) and ctx.session.can_send_request:
            asker = approval_sink()
        gone, resumed, forget = self._gone(ctx)
        watcher = anyio.CancelScope()

        async def cancel_if_gone(gone: anyio.Event) -> None:
            try:
                with watcher:
                    await cancel_when_gone(gone, admission.cancel, resumed)
            finally:
                forget()

        try:
            async with self._progress(ctx) as progress, anyio.create_task_group() as tg:
                if gone is not None:
                    tg.start_soon(cancel_if_gone, gone)
                if asker is not None:
                    approvals = admission.agent.approvals
                    back = BackChannelAsker(
                        ctx.session,
                        approvals,
                        ctx.request_id,
                        caller,
                        self_approval=service.config.approvals.self_approval,
                    )
                    tg.start_soon(back.run, asker)
                try:
                    result = await service.run(request, admission, events=FanOut([progress, asker]))
                finally:
                    if asker is not None:
                        asker.close()
                    watcher.cancel()
        finally:
            admission.release()
        return self.to_mcp(result)

    @asynccontextmanager
    async def _progress(self, ctx: ServerRequestContext[Any]) -> AsyncIterator[BufferedSink | None]:
        """A sink whose events become this call's progress notifications (None without a token).
        On exit the sender sends what is queued and stops."""
        if progress_token_from_params(ctx.params) is None:
            yield None
            return
        sink = progress_sink()

        async def send(count: float, message: str) -> None:
            await ctx.session.report_progress(count, None, message)

        try:
            async with anyio.create_task_group() as tg:
                interval = self.service.gateway.progress_interval_seconds
                tg.start_soon(partial(send_progress, sink, send, interval=interval))
                try:
                    yield sink
                finally:
                    sink.close()
        finally:
            sink.aclose_receiver()

    def _gone(
        self, ctx: ServerRequestContext[Any]
    ) -> tuple[anyio.Event | None, anyio.Event | None, Callable[[], None]]:
        """For a Streamable HTTP request: the event set when its client leaves before the answer,
        the event set when the client resumes that stream instead (``resumable.py``), and how to
        forget the latter once the run is over."""
        request = ctx.request
        gone = request.scope.get(GONE_KEY) if isinstance(request, HTTPConnection) else None
        if not isinstance(request, HTTPConnection) or not isinstance(gone, anyio.Event):
            return None, None, lambda: None
        session = request.headers.get(MCP_SESSION_ID_HEADER)
        streams = self.streams
        if not session or streams is None or ctx.request_id is None:
            return gone, None, lambda: None
        request_id = str(ctx.request_id)
        return gone, streams.resumed(session, request_id), lambda: streams.forget(session, request_id)

    # ---------------------------------------------------------------- a 2026 run across rounds

    async def _start_parked(
        self, ctx: ServerRequestContext[Any], request: QueryInput, admission: Admission, caller: Caller
    ) -> Answer:
        try:
            parked = self.parked.park(caller, admission)
        except RuntimeError as exc:
            admission.release()
            return text_result(f"busy: {exc}; retry later", is_error=True)
        relay = parked.relay

        async def run() -> None:
            try:
                parked.result = await self.service.run(
                    request, admission, events=FanOut([parked.events, relay])
                )
            except BaseException as exc:
                parked.error = exc if isinstance(exc, Exception) else None
                if not isinstance(exc, Exception):
                    raise
            finally:
                parked.done.set()
                parked.events.close()

        self.service.spawn(run)
        self.service.spawn(partial(self.parked.watch, parked))
        return await self._round(ctx, parked)

    async def _resume(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, caller: Caller
    ) -> Answer:
        parked = self.parked.find(params.request_state or "", caller)
        if parked is None:
            return text_result(
                "unknown or expired request_state: the run it belonged to has ended; send the query again",
                is_error=True,
            )
        await self.parked.answer(parked, params.input_responses, parked.admission.agent.approvals)
        return await self._round(ctx, parked)

    async def _round(self, ctx: ServerRequestContext[Any], parked: ParkedRun) -> Answer:
        """Wait for the run's next question or its end; a client that leaves cancels the run."""
        relay = parked.relay
        finished = False
        try:
            async with self._progress(ctx) as progress:
                relay.target = progress
                stop = await self.parked.next_stop(parked, parked.admission.agent.approvals)
                finished = True
        except Exception as exc:
            logger.error("run of a parked agent_query failed: %r", exc)
            return text_result(f"Agent terminated (terminal_error): internal error: {exc}", is_error=True)
        finally:
            relay.target = None
            if not finished and not parked.done.is_set():  # the client went away mid-round
                parked.admission.cancel.set(CLIENT_GONE)
                self.parked.drop(parked)
        if isinstance(stop, types.InputRequiredResult):
            return stop
        return self.to_mcp(stop)


# MCP progress for one ``agent_query`` run: a notification per step, and a heartbeat while it waits.
#
# Clients reset their request timeout on progress (the TypeScript SDK's ``resetTimeoutOnProgress``,
# the Python SDK), so a healthy run that waits a long time — on the model, a tool, an approval —
# must keep saying so: when nothing was sent for ``interval`` seconds, a heartbeat says what the
# run waits for and for how long ("round 2/10: waiting for the model (15 s)"). Steps (round start,
# tool call, tool result, approval asked and answered) are sent as they happen.
#
# Only a caller that sent a progress token gets any of this (MCP has no other way to send it).
# The run never waits for a slow client: events reach the sender through a bounded buffer that
# drops the oldest news (``BufferedSink``), and only the kinds shown here are queued at all.

SHOWN = (RoundStarted, ToolCallStarted, ToolCallEnded, ApprovalRequested, ApprovalResolved)
"""Events sent as a step of their own."""
TRACKED = (*SHOWN, ModelCallStarted, ModelCallEnded)
"""Events that change what the run waits for."""
BUFFER = 64

Send = Callable[[float, str], Awaitable[None]]
"""Sends one notification: (progress, message)."""


class Waiting:
    """What a run waits for now, kept up to date from its events (pure; the clock is injected)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.round = 0
        self.max_rounds = 0
        self._model_since: float | None = None
        self._tools: dict[str, tuple[str, float]] = {}  # call id -> (name, since)
        self._approvals: dict[str, tuple[str, float]] = {}  # approval id -> (name, since)
        self._since = clock()

    def update(self, event: Event) -> None:
        now = self._clock()
        if isinstance(event, RoundStarted):
            self.round, self.max_rounds = event.round, event.max_rounds
        elif isinstance(event, ModelCallStarted):
            self._model_since = now
        elif isinstance(event, ModelCallEnded):
            self._model_since = None
        elif isinstance(event, ToolCallStarted):
            self._tools[event.call_id] = (event.name, now)
        elif isinstance(event, ToolCallEnded):
            self._tools.pop(event.call_id, None)
        elif isinstance(event, ApprovalRequested):
            self._approvals[event.approval_id] = (event.name, now)
        elif isinstance(event, ApprovalResolved):
            self._approvals.pop(event.approval_id, None)

    def describe(self) -> str:
        """ "round 2/10: waiting for the model (15 s)", or for tools, or for approvals."""
        now = self._clock()
        if self._approvals:
            name, since = min(self._approvals.values(), key=lambda item: item[1])
            what = f"waiting for approval of {name}"
            more = len(self._approvals) - 1
        elif self._tools:
            name, since = min(self._tools.values(), key=lambda item: item[1])
            what = f"waiting for {name}"
            more = len(self._tools) - 1
        elif self._model_since is not None:
            what, since, more = "waiting for the model", self._model_since, 0
        else:
            what, since, more = "working", self._since, 0
        also = f" and {more} more" if more > 0 else ""
        head = f"round {self.round}/{self.max_rounds}: " if self.round and self.max_rounds else ""
        return f"{head}{what}{also} ({now - since:.0f} s)"


def progress_sink() -> BufferedSink:
    """The sink a run's progress sender reads: only the events that matter here are queued."""
    return BufferedSink(BUFFER, accept=TRACKED)


async def send_progress(
    sink: BufferedSink,
    send: Send,
    *,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Send a notification per step and a heartbeat after each ``interval`` s without one
    (0 = no heartbeat), until ``sink`` is closed. A failure to send ends the sending quietly."""
    waiting = Waiting(clock)
    count = 0
    last = clock()
    receive = sink.__aiter__()
    try:
        while True:
            event: Event | None = None
            wait = max(last + interval - clock(), 0) if interval > 0 else math.inf
            with anyio.move_on_after(wait):
                try:
                    event = await receive.__anext__()
                except StopAsyncIteration:
                    return
            if event is None:  # nothing for ``interval`` seconds: say what we wait for
                message: str | None = waiting.describe()
            else:
                waiting.update(event)
                message = describe(event, waiting.max_rounds) if isinstance(event, SHOWN) else None
            if message is not None:
                count += 1
                await send(count, message)
                last = clock()
    except Exception:
        logger.debug("progress notifications stopped", exc_info=True)
    finally:
        sink.aclose_receiver()
