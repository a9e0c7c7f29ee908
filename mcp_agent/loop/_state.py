"""The state of one run and the checks at its commit points (used by ``run.run``).

``RunState`` holds what one run needs and throws away at the end: the messages, the counters,
the dispatcher (with the per-run failure ledger and fingerprints) and the event emitter. Each
check (``interrupted``, ``out_of_rounds``, ``out_of_tokens``, ``loop_detected``,
``out_of_tool_calls``) returns an ``Ending`` or None, so ``run`` reads as a list of commit points.
Also the run's plumbing: ``cancelled_by`` (a cancel event as a cancel scope), ``sole`` and
``as_sinks``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import anyio

from .._plural import counted
from ..config import Limits
from ..events import EventSink, RunEnded
from ..messages import Message, ToolCall, ToolSpec, Turn, Usage
from ..providers.base import Provider
from ..state.base import PageStore
from ..state.memory import MemoryPageStore
from ..telemetry.base import NO_TRACE, RunTrace
from ..tools.base import ToolSource
from ._dispatch import Dispatcher, Emitter, Plan
from .approvals import ApprovalQueue, Gate
from .cancel import Cancel, CancelSwitch, why
from .guards import rounds_exhausted, tokens_exhausted, tool_calls_fit
from .history import history_chars, message_chars, trim_history
from .pages import RunPages
from .provenance import Exposure, ProvenancePolicy, latest_exposure
from .result import EARLY_STOP_REASONS, RunResult, TerminationReason

logger = logging.getLogger(__name__)

R = TerminationReason


@dataclass(frozen=True)
class Ending:
    """How the run ends: the reason, its detail, the answer; ``why`` answers unrun calls."""

    reason: TerminationReason
    detail: str = ""
    answer: str = ""
    early_stopped: bool = False
    why: str = ""
    truncated: bool = False


class RunState:
    """The state of one run: its messages, counters and per-run guards. Thrown away at the end."""

    def __init__(
        self,
        query: str,
        *,
        provider: Provider,
        tools: ToolSource,
        limits: Limits,
        system_prompt: str | None,
        history: Sequence[Message],
        sinks: Sequence[EventSink],
        cancel: CancelSwitch | None,
        gate: Gate | None,
        approvals: ApprovalQueue | None,
        run_id: str,
        session_id: str | None,
        request: dict[str, Any],
        input_error: str | None = None,
        caller: str | None = None,
        pages: PageStore | None = None,
        trace: RunTrace = NO_TRACE,
        policy: ProvenancePolicy | None = None,
    ) -> None:
        self.input_error = input_error or query_problem(query)
        """Why the input is unusable (the run then ends ``terminal_error`` before any model call)."""
        if self.input_error is not None:
            query = shown_text(query)
        self.query = query
        self.started = time.perf_counter()
        self.deadline = anyio.current_time() + limits.timeout_seconds if limits.timeout_seconds else None
        self.provider = provider
        self.limits = limits
        self.cancel = cancel
        self.request = request
        self.run_id, self.session_id = run_id, session_id
        self.emit = Emitter(sinks, run_id, session_id, caller)
        self.pages = _run_pages(pages, limits, run_id, session_id, history)
        self.trace = trace
        """The run's spans (``NO_TRACE`` when nothing is traced)."""
        self.dispatcher = Dispatcher(
            tools,
            limits,
            self.emit,
            gate=gate,
            approvals=approvals,
            pages=self.pages,
            trace=trace,
            policy=policy,
        )
        self.offered: list[ToolSpec] = self.dispatcher.offered()
        self.messages: list[Message] = list(history)
        if system_prompt and not (self.messages and self.messages[0].role == "system"):
            self.messages.insert(0, Message.system(system_prompt))
        self.messages.append(Message.user(query))
        self.chars = history_chars(self.messages)  # kept up to date by add()
        self.call_ids = {call.id for m in history for call in m.tool_calls}
        self.tainted = any(m.role == "tool" for m in history)
        self.exposure: Exposure | None = latest_exposure(history)
        """The latest untrusted result in the transcript (``loop/provenance.py``)."""
        self.history_cap = limits.max_history_chars
        self.usage = Usage()
        self.model: str | None = None
        """The model that gave the latest answer (``Turn.model``)."""
        self.rounds = 0
        self.open_plan: Plan | None = None
        self.partial = ""
        """An answer cut off at the output cap while its continuation runs (kept if the run is cut
        off meanwhile)."""

    # the checks at the commit points

    def invalid_input(self) -> Ending | None:
        if self.input_error is None:
            return None
        return Ending(R.TERMINAL_ERROR, f"invalid input: {self.input_error}", why="invalid input")

    def interrupted(self) -> Ending | None:
        if self.cancel is not None and self.cancel.is_set():
            detail = f"{why(self.cancel)} (round {self.rounds})"
            return Ending(R.CANCELLED, detail, self.partial, why="cancelled", truncated=bool(self.partial))
        if self.deadline is not None and anyio.current_time() >= self.deadline:
            return self.timed_out()
        return None

    def cut_off_by(self) -> str:
        """What cut an in-flight call off: the caller's cancel, the run's deadline, or neither."""
        if self.cancel is not None and self.cancel.is_set():
            return "cancelled"
        if self.deadline is not None and anyio.current_time() >= self.deadline:
            seconds = self.limits.timeout_seconds
            return f"timed out: the run's limit of {seconds:g} s (limits.timeoutSeconds) passed"
        return "interrupted"

    def timed_out(self) -> Ending:
        seconds = self.limits.timeout_seconds
        detail = f"timed out after {seconds:g} s (round {self.rounds})"
        return Ending(R.TIMEOUT, detail, self.partial, why="the run timed out", truncated=bool(self.partial))

    def out_of_rounds(self) -> Ending | None:
        if rounds_exhausted(self.rounds, self.limits.max_rounds):
            return Ending(
                R.MAX_ROUNDS, f"reached max rounds ({self.limits.max_rounds})", why="max rounds reached"
            )
        return None

    def out_of_tokens(self) -> Ending | None:
        used, limit = self.usage.total_tokens, self.limits.max_tokens
        if tokens_exhausted(used, limit):
            detail = (
                f"token budget exhausted: {counted(used, 'token')} used (limit {limit}, round {self.rounds})"
            )
            return Ending(R.TOKEN_BUDGET, detail, why="token budget exhausted")
        return None

    def loop_detected(self, plan: Plan) -> Ending | None:
        if plan.loop is None:
            return None
        name, count = plan.loop
        detail = f"loop detected: {name} called {counted(count, 'time')} with identical arguments (round {self.rounds})"
        return Ending(R.LOOP_DETECTED, detail, why=detail)

    def out_of_tool_calls(self, plan: Plan) -> Ending | None:
        used, limit = self.dispatcher.executed, self.limits.max_tool_calls
        if tool_calls_fit(used, plan.wanted, limit):
            return None
        detail = (
            f"tool-call budget exhausted: {counted(plan.wanted, 'call')} asked for, "
            f"{max(limit - used, 0)} of {limit} left (round {self.rounds})"
        )
        return Ending(R.TOOL_BUDGET, detail, why="tool-call budget exhausted")

    def wants_early_stop(self, ending: Ending) -> bool:
        return self.limits.early_stop and ending.reason in EARLY_STOP_REASONS

    # the transcript

    def add(self, *messages: Message) -> None:
        self.messages.extend(messages)
        self.chars += sum(message_chars(m) for m in messages)

    def history(self) -> list[Message]:
        """The messages for the next model call, trimmed to the history cap."""
        if not self.history_cap or self.chars <= self.history_cap:
            return list(self.messages)
        return trim_history(self.messages, self.history_cap)

    def name_calls(self, calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
        """The calls with ids unique in the transcript (a missing or reused id is replaced)."""
        named = []
        for index, call in enumerate(calls):
            if not call.id or call.id in self.call_ids:
                new_id, n = f"call_{self.rounds}_{index}", 0
                while new_id in self.call_ids:
                    n += 1
                    new_id = f"call_{self.rounds}_{index}_{n}"
                call = replace(call, id=new_id)
            self.call_ids.add(call.id)
            named.append(call)
        return tuple(named)

    def answer(self, turn: Turn, *, truncated: str = "") -> Ending:
        """The run's answer; ``truncated`` says how it was cut off (it is flagged, and the detail)."""
        if not turn.content.strip():
            detail = (
                f"empty response from the model (finish_reason={turn.finish_reason}, round {self.rounds})"
            )
            return Ending(R.EMPTY_RESPONSE, detail)
        self.partial = ""
        self.add(turn.to_message())
        return Ending(R.SUCCESS, truncated, turn.content.strip(), truncated=bool(truncated))

    def commit(self, turn: Turn, plan: Plan) -> None:
        """Append the assistant message, its calls as prepared (coerced arguments, unique ids)."""
        self.add(replace(turn.to_message(), tool_calls=plan.calls))
        self.open_plan = plan

    def close_turn(self, why: str) -> None:
        """Append one result per call of the open turn, in call order."""
        plan, self.open_plan = self.open_plan, None
        if plan is not None:
            answers = self.dispatcher.finish(plan, why)
            self.add(*answers)
            self.exposure = latest_exposure(answers, self.exposure)
            self.tainted = self.tainted or any(slot.result is not None for slot in plan.slots)

    # the end

    def result(self, ending: Ending) -> RunResult:
        self.close_turn(ending.why or "the run ended")
        result = RunResult(
            answer=ending.answer,
            termination_reason=ending.reason,
            early_stopped=ending.early_stopped,
            truncated=ending.truncated,
            detail=ending.detail,
            rounds=self.rounds,
            tool_calls=tuple(self.dispatcher.records),
            usage=self.usage,
            elapsed_ms=(time.perf_counter() - self.started) * 1000,
            transcript=tuple(self.messages),
            session_id=self.session_id,
            run_id=self.run_id,
            model=self.model,
        )
        self._ended(
            ending.reason, ending.detail, ending.early_stopped, result.elapsed_ms, answer=ending.answer
        )
        return result

    def end_abruptly(self, exc: BaseException) -> None:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            reason, detail = R.CANCELLED, f"cancelled from outside (round {self.rounds})"
        else:
            reason, detail = R.TERMINAL_ERROR, f"internal error: {type(exc).__name__}: {exc}"
            logger.error("run %s failed: %s", self.run_id, detail)
        self._ended(reason, detail, False, (time.perf_counter() - self.started) * 1000, error=exc)

    def _ended(
        self,
        reason: TerminationReason,
        detail: str,
        early_stopped: bool,
        elapsed_ms: float,
        *,
        answer: str = "",
        error: BaseException | None = None,
    ) -> None:
        logger.debug("run %s ended: %s %s", self.run_id, reason.value, detail)
        # a turn cut off from outside was never closed: its calls count too
        tool_calls = len(self.dispatcher.records) + (len(self.open_plan.slots) if self.open_plan else 0)
        self.emit(
            RunEnded,
            termination_reason=reason.value,
            early_stopped=early_stopped,
            detail=detail,
            rounds=self.rounds,
            tool_calls=tool_calls,
            usage=self.usage.to_dict(),
            elapsed_ms=elapsed_ms,
        )
        self.trace.ended(
            reason=reason.value,
            ok=reason is R.SUCCESS or early_stopped,
            detail=detail,
            rounds=self.rounds,
            tool_calls=tool_calls,
            usage=self.usage,
            early_stopped=early_stopped,
            answer=answer,
            error=error,
        )


def _run_pages(
    store: PageStore | None, limits: Limits, run_id: str, session_id: str | None, history: Sequence[Message]
) -> RunPages | None:
    """The run's view of paged results (None when results are cut instead)."""
    if not limits.page_results or not limits.max_result_chars:
        return None
    return RunPages.for_run(
        store if store is not None else MemoryPageStore(limits.max_paged_bytes_total),
        run_id=run_id,
        session_id=session_id,
        page_chars=limits.max_result_chars,
        max_scope_bytes=limits.max_paged_bytes,
        max_total_bytes=limits.max_paged_bytes_total,
        history=history,
    )


@asynccontextmanager
async def cancelled_by(cancel: CancelSwitch | None) -> AsyncIterator[None]:
    """Cut the body off (quietly) as soon as ``cancel`` is set: a ``Cancel`` cancels the scope
    itself, a plain event through a task that waits for it."""
    if cancel is None:
        yield
        return
    if isinstance(cancel, Cancel):
        with cancel.scope():
            yield
        return
    with anyio.CancelScope() as scope:

        async def watch() -> None:
            await cancel.wait()
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()


def query_problem(query: object) -> str | None:
    """Why ``query`` cannot be sent to a model (not a string, or not encodable as UTF-8), or None."""
    if not isinstance(query, str):
        return f"the query must be a string, not {type(query).__name__}"
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"the query is not valid Unicode text (a lone surrogate at character {exc.start})"
    return None


def shown_text(value: object) -> str:
    """``value`` as text that can always be encoded (for events and the transcript of a refused run)."""
    text = value if isinstance(value, str) else repr(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def sole(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one, else ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def as_sinks(events: EventSink | Sequence[EventSink] | None) -> list[EventSink]:
    if events is None:
        return []
    if isinstance(events, Sequence):
        return [sink for sink in events if sink is not None]
    return [events]
