"""Tool dispatch for one turn: prepare every call in order, run them in parallel, answer each once.

The run (``loop/run.py``) hands each turn's calls to a ``Dispatcher``, which lives as long as
the run and owns the per-run guards (failure ledger, call book, executed-call count):

1. ``prepare`` (in call order): a withdrawn tool → ``disabled``; an unknown name → the list of
   available names; unparseable arguments → the parse problem; schema violations → the
   validator's text. None of these call the tool. A valid call gets its coerced arguments and
   its fingerprint: an identical call earlier in the same turn makes it ``shared``; the book
   notes the round it repeats and whether it trips the loop guard. Then the gate gives its
   verdict (a denial is answered at once; ``need_approval`` waits at execution).
2. The run checks the loop guard and the tool-call budget on the prepared ``Plan``.
3. ``execute``: each call is first checked against its tool's live definition when the source
   may have offered a cached one (``LiveToolSource``: the hub starts a lazy server here, within
   its ``startupTimeoutSeconds``); a definition that differs in owner is answered with an error,
   one that differs in annotations or parameters prepares the call again on it (validation and
   the gate), so approvals are decided on what the server really offers. Then approvals are
   asked concurrently (all pending at once); then at most
   ``maxParallelTools`` calls run in a task group, each under ``toolTimeoutSeconds`` (passed to
   the tool source) plus a loop-side safety bound. A result longer than ``maxResultChars`` is
   paged when the run has ``RunPages`` (``loop/pages.py``: the first page, a handle, and the
   ``read_result`` tool offered from then on, answered here without the tool source or the
   gate), else cut with a note; then, in call order, the ledger marks failures and adds the hint.
   A call whose tool was redefined while it waited (for approval, for a free slot) is answered
   with what changed instead of going out on a decision about the old definition.
4. ``finish``: one tool message per call, in call order, whatever happened; a call that never
   ran is answered ``not executed: <why>``. Every call gets a ToolCallStarted/ToolCallEnded pair.
   The images a tool returned ride along on its message (``Message.images``); which of them
   reach the model, if any, is the provider's business (``llm.vision``).

Each call travels as a ``Slot`` of the turn's ``Plan``: its verdict, its deadline, whether it
waits for approval or shares an identical call's result, and once known its answer (text, error
flag, timing, paging, images) and its span; the run reads the plan's loop-guard finding and its
cost in executions (``loop/_state.py``). Events go out through the run's ``Emitter``, which
stamps each with the run's ids and hands it to every sink (the run's own events too): a sink
that raises is logged and ignored, since events must never break a run.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from ..config import Limits, PolicyConfig
from ..events import (
    PREVIEW_CHARS,
    ApprovalRequested,
    ApprovalResolved,
    Event,
    EventSink,
    ToolCallEnded,
    ToolCallStarted,
)
from ..exceptions import StateError
from ..messages import Image, Message, Provenance, ToolCall, ToolResult, ToolSpec
from ..telemetry.base import NO_TRACE, NULL_TOOL_SPAN, RunTrace, ToolSpan
from ..tools.base import ToolSource, as_live, redefinition, same_owner
from ..tools.presentation import content_images
from ..tools.relay import call_deadline
from ..tools.schema import checker_for, format_errors
from .approvals import ApprovalQueue, ApprovalsFull, Decision, Gate, denied_text
from .guards import (
    FAILURE_HINT,
    CallBook,
    FailureLedger,
    cut_text,
    fingerprint,
    first_line,
    is_failure,
    is_loop,
)
from .pages import RunPages
from .provenance import Exposure, Flag, ProvenancePolicy
from .result import ToolCallRecord

logger = logging.getLogger(__name__)


NO_POLICY = ProvenancePolicy(PolicyConfig(mode="off"))
"""Provenance recorded, nothing checked: for a Dispatcher built without a policy."""
_HELD = (
    "held by policy.mode enforce: a call with side effects after the run read untrusted text "
    "needs a person's approval"
)
_CHECK_AGAIN = "The tools offered have been updated: check its definition and call it again if still needed."


def safety_bound(timeout: float) -> float:
    """The loop's own bound on one call, in case a tool source ignores its ``timeout``.

    A tenth more than the timeout, at least one second more: the source's timeout fires first.
    """
    return timeout + max(1.0, timeout / 10)


@dataclass
class Slot:
    """One call of a turn and, once known, its answer.

    ``verdict`` follows ``ToolCallEnded``: ``run``, ``shared``, ``unknown_tool``,
    ``invalid_arguments``, ``denied``, ``disabled``, ``skipped``.
    """

    call: ToolCall
    verdict: str = "run"
    timeout: float | None = None
    text: str = ""
    is_error: bool = False
    ok: bool = False
    done: bool = False
    started: bool = False
    executed: bool = False
    needs_approval: bool = False
    result: ToolResult | None = None
    primary: int | None = None
    repeat_of: int | None = None
    ms: float = 0.0
    truncated: bool = False
    pages: int = 0
    total_chars: int = 0
    handle: str = ""
    images: tuple[Image, ...] = ()
    spec: ToolSpec | None = None
    span: ToolSpan = NULL_TOOL_SPAN
    flag: Flag | None = None
    """What the provenance policy does with the call (it comes after untrusted text), if anything."""

    def answer(self, text: str, verdict: str, *, is_error: bool = True, ok: bool = False) -> None:
        self.text, self.verdict, self.is_error, self.ok, self.done = text, verdict, is_error, ok, True

    @property
    def pending(self) -> bool:
        """Would run (or wait for approval) and has no answer yet."""
        return self.verdict == "run" and not self.done


@dataclass
class Plan:
    """The prepared calls of one turn.

    Attributes:
        round: the round the turn belongs to.
        slots: one per call, in the model's order.
        loop: ``(name, occurrences)`` when a call trips the loop guard.
        tainted: tool output was in the context when the calls were made (the gate's ``tainted``).
        exposure: the latest untrusted result in the context then (``loop/provenance.py``).
    """

    round: int
    slots: list[Slot]
    loop: tuple[str, int] | None = None
    tainted: bool = False
    exposure: Exposure | None = None

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(slot.call for slot in self.slots)

    @property
    def wanted(self) -> int:
        """How many executions this turn would cost (shared and rejected calls cost none)."""
        return sum(1 for slot in self.slots if slot.pending)


class Emitter:
    """Builds events with the run's ids and hands them to every sink.

    A sink that raises is logged and ignored: events must never break a run.
    """

    def __init__(
        self, sinks: Sequence[EventSink], run_id: str, session_id: str | None, caller: str | None = None
    ) -> None:
        self.sinks = tuple(sinks)
        self.run_id = run_id
        self.session_id = session_id
        self.caller = caller

    def __call__(self, event_type: Callable[..., Event], /, **fields: Any) -> None:
        if not self.sinks:
            return
        event = event_type(run_id=self.run_id, session_id=self.session_id, caller=self.caller, **fields)
        for sink in self.sinks:
            try:
                sink.emit(event)
            except Exception:
                logger.exception("event sink %r failed on %s", sink, event.type)


class Dispatcher:
    """Prepares, runs and answers the tool calls of one run's turns."""

    def __init__(
        self,
        tools: ToolSource,
        limits: Limits,
        emit: Emitter,
        *,
        gate: Gate | None = None,
        approvals: ApprovalQueue | None = None,
        pages: RunPages | None = None,
        trace: RunTrace = NO_TRACE,
        policy: ProvenancePolicy | None = None,
    ) -> None:
        self.tools = tools
        self.policy = policy if policy is not None else NO_POLICY
        self._exposure: Exposure | None = None  # the prepared turn's
        self._live = as_live(tools)
        self.pages = pages
        self.trace = trace
        self.limits = limits
        self.emit = emit
        self.gate = gate
        self.approvals = approvals
        self.ledger = FailureLedger(limits.failure_hint_after, limits.disable_tool_after)
        self.book = CallBook()
        self.executed = 0
        self.records: list[ToolCallRecord] = []

    def offered(self) -> list[ToolSpec]:
        """The tools to offer this round: the source's, minus those withdrawn by the ledger, plus
        ``read_result`` while a paged result can be read."""
        withdrawn = self.ledger.disabled
        specs = [spec for spec in self.tools.list_tools() if spec.name not in withdrawn]
        if self.pages is not None:
            reader = self.pages.spec({spec.name for spec in specs})
            if reader is not None and reader.name not in withdrawn:
                specs.append(reader)
        return specs

    def _reads_pages(self, name: str) -> bool:
        return self.pages is not None and self.pages.is_tool(name)

    # ----------------------------------------------------------------------------------------
    # 1. prepare

    def unprepared(self, calls: Sequence[ToolCall], round: int) -> Plan:
        """A plan for calls that will not be prepared (the run stops before dispatch)."""
        return Plan(round, [Slot(call) for call in calls])

    async def prepare(
        self,
        calls: Sequence[ToolCall],
        *,
        round: int,
        tainted: bool,
        offered: Sequence[ToolSpec],
        exposure: Exposure | None = None,
    ) -> Plan:
        """Resolve, validate, fingerprint and gate each call, in order (``exposure``: the
        latest untrusted result the context holds, for the provenance policy)."""
        specs = {spec.name: spec for spec in offered}
        plan = Plan(round, [], tainted=tainted, exposure=exposure)
        self._exposure = exposure
        first_of: dict[str, int] = {}
        for index, call in enumerate(calls):
            slot = self._check(call, specs)
            plan.slots.append(slot)
            if slot.done:
                self._rejected(round, slot)
                continue
            fp = fingerprint(slot.call.name, slot.call.arguments)
            if fp in first_of:
                slot.verdict, slot.primary = "shared", first_of[fp]
                continue
            first_of[fp] = index
            sighting = self.book.see(fp, round)
            slot.repeat_of = sighting.previous_round
            if plan.loop is None and is_loop(sighting.count, self.limits.loop_threshold):
                plan.loop = (slot.call.name, sighting.count)
            if not self._reads_pages(slot.call.name):  # rereading what a tool already returned
                await self._gate(slot, tainted)
                if slot.done:
                    self._rejected(round, slot)
        return plan

    def _check(self, call: ToolCall, specs: dict[str, ToolSpec]) -> Slot:
        slot = Slot(call)
        disabled = self.ledger.disabled_reason(call.name)
        spec = slot.spec = specs.get(call.name)
        if spec is not None:  # the tool's own deadline (its server's callTimeoutSeconds) wins
            own = spec.timeout_seconds
            slot.timeout = (own if own is not None else self.limits.tool_timeout_seconds) or None
        if disabled is not None:
            slot.answer(disabled, "disabled")
        elif spec is None:
            names = ", ".join(sorted(specs)) or "(none)"
            slot.answer(f"error: unknown tool {call.name!r}. Available tools: {names}", "unknown_tool")
        elif call.error is not None:
            received = (call.raw_arguments or "")[:200]
            slot.answer(
                f"error: the arguments of {call.name} could not be read: {call.error}. "
                f"Received: {received!r}. Call the tool again with one JSON object.",
                "invalid_arguments",
            )
        else:
            self._validate(slot, spec)
        return slot

    @staticmethod
    def _validate(slot: Slot, spec: ToolSpec) -> None:
        """Validate and coerce the call's arguments against ``spec``; answer the slot when invalid."""
        call = slot.call
        try:
            check = checker_for(spec.parameters).check(call.arguments)
        except Exception:  # a broken schema must not stop the run: call with what we have
            logger.exception("validating the arguments of %s failed; calling it unvalidated", call.name)
            return
        if not check.ok:
            slot.answer(format_errors(call.name, check), "invalid_arguments")
        else:
            slot.call = replace(call, arguments=check.arguments)

    async def _gate(self, slot: Slot, tainted: bool) -> None:
        """Ask the gate, then the provenance policy: a denial answers the slot,
        ``need_approval`` (or a call the policy holds) marks it (the caller emits)."""
        slot.needs_approval = False
        if self.gate is not None:
            verdict = await self.gate.check(slot.call, tainted=tainted)
            if verdict.kind == "deny":
                slot.answer(denied_text(verdict.reason or "blocked by policy"), "denied")
                return
            slot.needs_approval = verdict.kind == "need_approval"
        slot.flag = self.policy.check(slot.call, slot.spec, self._exposure)
        if slot.flag is not None and slot.flag.action == "hold":
            slot.needs_approval = True

    def _rejected(self, round: int, slot: Slot) -> None:
        self._started(round, slot)
        self._ended(round, slot)

    # ----------------------------------------------------------------------------------------
    # 3. execute

    async def execute(self, plan: Plan) -> None:
        """Run every pending call of ``plan``: approvals first, then bounded in parallel."""
        limiter = anyio.CapacityLimiter(self.limits.max_parallel_tools or math.inf)
        pending = [slot for slot in plan.slots if slot.pending]
        if len(pending) == 1:  # one call (an exposed tool's, most often): no task of its own
            await self._run_one(plan.round, pending[0], limiter, plan.tainted)
        elif pending:
            async with anyio.create_task_group() as tg:
                for slot in pending:
                    tg.start_soon(self._run_one, plan.round, slot, limiter, plan.tainted)
        for slot in plan.slots:  # in call order: the ledger, then the shared copies
            if slot.result is not None:
                mark = self.ledger.record(slot.call.name, slot.result.text, is_error=slot.result.is_error)
                if mark.hint:
                    slot.text = f"{slot.text}\n\n{FAILURE_HINT}"
            elif slot.verdict == "shared" and slot.primary is not None:
                first = plan.slots[slot.primary]
                slot.answer(first.text, "shared", is_error=first.is_error, ok=first.ok)
                slot.truncated, slot.pages, slot.total_chars = first.truncated, first.pages, first.total_chars
                slot.handle = first.handle
                self._rejected(plan.round, slot)

    async def _run_one(
        self, round: int, slot: Slot, limiter: anyio.CapacityLimiter, tainted: bool = False
    ) -> None:
        try:
            refused = await self._go_live(round, slot, tainted)
            if slot.done:  # prepared again on the live definition: invalid, or denied
                return
            if slot.needs_approval and refused is None:
                self._started(round, slot)
                decision = await self._ask(slot)
                if not decision.approved:
                    held = slot.flag is not None and slot.flag.action == "hold"
                    reason = f"{decision.reason}; {_HELD}" if held else decision.reason
                    slot.answer(denied_text(reason), "denied")
                    return
            async with limiter:
                if not slot.started:
                    self._started(round, slot)
                self.executed += 1
                slot.executed = True
                start = time.perf_counter()
                try:
                    with slot.span.current():  # an MCP call made inside carries the span's context
                        result = refused or self._redefined(slot) or await self._call(slot.call, slot.timeout)
                finally:  # also when cut off: the event says how long it ran
                    slot.ms = (time.perf_counter() - start) * 1000
            slot.result = result
            slot.images = tuple(content_images(result.content))
            text = await self._shorten(slot, result.text)
            if slot.repeat_of is not None:
                text = f"{text}\n\n[NOTE: identical to a call in round {slot.repeat_of}]"
            slot.answer(
                text, "run", is_error=result.is_error, ok=not is_failure(result.text, result.is_error)
            )
        finally:
            if slot.started:
                self._ended(round, slot)

    async def _go_live(self, round: int, slot: Slot, tainted: bool) -> ToolResult | None:
        """Check the call against its tool's live definition before anything else happens to it.

        A ``LiveToolSource`` may have offered a definition read from a cache: it starts the
        tool's server if need be and gives the live one (``live_spec``). When the live
        definition differs in what the checks rely on (``redefinition``), the call is prepared
        again on it: validated against its parameters and gated on its annotations, so an
        approval is asked, or not, for what the server really offers. A name that now belongs
        to another tool, or to none, is answered with the source's error (returned: the call
        does not go out, its arguments go nowhere).
        """
        name = slot.call.name
        if slot.spec is None or self._live is None or self._reads_pages(name):
            return None
        live = await self._live.live_spec(name)
        if isinstance(live, ToolResult):
            return live
        checked, slot.spec = slot.spec, live
        if not same_owner(checked, live):
            return ToolResult(
                f"tool {name} was not called: {redefinition(checked, live)}. {_CHECK_AGAIN}", is_error=True
            )
        if not redefinition(checked, live):
            return None
        self._validate(slot, live)
        if not slot.done:
            await self._gate(slot, tainted)
        if slot.done:
            self._started(round, slot)
        return None

    def _redefined(self, slot: Slot) -> ToolResult | None:
        """An error instead of the call when the tool's definition changed since the call was
        checked (while it waited for approval or for a free slot): the decision was about the
        old one."""
        if slot.spec is None or self._reads_pages(slot.call.name):
            return None
        now = next((spec for spec in self.tools.list_tools() if spec.name == slot.call.name), None)
        what = redefinition(slot.spec, now) if now is not None else ""
        if not what:
            return None
        return ToolResult(
            f"tool {slot.call.name} was not called: {what} while the call waited. {_CHECK_AGAIN}",
            is_error=True,
        )

    async def _shorten(self, slot: Slot, text: str) -> str:
        """A result the model can take: paged, or cut with a note, when longer than a page (cut
        too when its pages cannot be kept: the store failed, or the session is gone)."""
        limit = self.limits.max_result_chars
        if not limit or len(text) <= limit or self._reads_pages(slot.call.name):
            return text
        paged = None
        if self.pages is not None and self.limits.page_results:
            paged = await self.pages.page(slot.call.name, text)
        if paged is None:
            text, slot.truncated = cut_text(text, limit)
            return text
        slot.pages, slot.total_chars, slot.handle = paged.pages, paged.total_chars, paged.handle
        return paged.text

    async def _ask(self, slot: Slot) -> Decision:
        if self.approvals is None:
            return Decision(False, "this tool needs approval and no approver is configured")
        provenance = slot.flag.exposure.to_dict() if slot.flag is not None else {}
        try:
            ticket = await self.approvals.submit(
                slot.call,
                run_id=self.emit.run_id,
                session_id=self.emit.session_id,
                caller=self.emit.caller,
                provenance=provenance or None,
            )
        except ApprovalsFull as exc:
            return Decision(False, str(exc))
        except StateError as exc:
            logger.warning("could not store an approval request: %s", exc)
            return Decision(False, f"the approval could not be recorded ({exc})")
        slot.span.event("approval_requested", {"mcp_agent.approval.id": ticket.id})
        self.emit(
            ApprovalRequested,
            approval_id=ticket.id,
            call_id=slot.call.id,
            name=slot.call.name,
            arguments=dict(slot.call.arguments),
            provenance=provenance,
        )
        decision = Decision(False, "the run ended while waiting for approval")
        try:
            try:
                decision = await self.approvals.wait(ticket.id)
            except StateError as exc:
                logger.warning("lost the approval %s: %s", ticket.id, exc)
                decision = Decision(False, f"the approval could not be read back ({exc})")
            return decision
        finally:
            slot.span.event(
                "approval_resolved",
                {"mcp_agent.approval.id": ticket.id, "mcp_agent.approval.approved": decision.approved},
            )
            self.emit(
                ApprovalResolved,
                approval_id=ticket.id,
                call_id=slot.call.id,
                name=slot.call.name,
                approved=decision.approved,
                reason=decision.reason,
            )

    async def _call(self, call: ToolCall, timeout: float | None) -> ToolResult:
        if self.pages is not None and self.pages.is_tool(call.name):
            return await self.pages.read(call.arguments)
        bound = safety_bound(timeout) if timeout else None
        try:
            with anyio.move_on_after(bound) as scope, call_deadline(scope):  # a person's answers do not count
                return await self.tools.call_tool(call.name, call.arguments, timeout=timeout)
        except Exception as exc:  # the ToolSource contract says it never raises; defend anyway
            logger.exception("tool source raised for %s", call.name)
            return ToolResult(
                f"error: calling {call.name} failed: {type(exc).__name__}: {exc}", is_error=True
            )
        return ToolResult(f"error: tool {call.name} did not answer within {bound:g} s", is_error=True)

    # ----------------------------------------------------------------------------------------
    # 4. finish

    def finish(self, plan: Plan, why: str) -> list[Message]:
        """One tool message per call of ``plan``, in call order; unanswered calls get ``why``."""
        for slot in plan.slots:
            if slot.done:
                continue
            if slot.executed:  # cut off while running: the server may have done some of it
                slot.answer(f"not completed: {why}", "run")
                continue
            slot.answer(f"not executed: {why}", "skipped")
            if not slot.started:  # (a call cut off while waiting for approval has its events)
                self._rejected(plan.round, slot)
        for slot in plan.slots:
            error = "" if slot.ok else first_line(slot.text)
            self.records.append(
                ToolCallRecord(
                    slot.call.name, slot.ok, slot.ms, error, slot.verdict, slot.pages, slot.total_chars
                )
            )
        return [
            Message.tool(
                slot.call,
                slot.text,
                is_error=slot.is_error,
                images=slot.images,
                provenance=self._source(plan, slot),
            )
            for slot in plan.slots
        ]

    def _source(self, plan: Plan, slot: Slot) -> Provenance:
        """Where the text of ``slot``'s answer came from: its tool (a shared answer: the first
        call's tool, the same one), or the loop itself."""
        ran = slot if slot.verdict != "shared" or slot.primary is None else plan.slots[slot.primary]
        if ran.result is None:
            return Provenance("", slot.call.name, slot.call.id, True, "the loop's own answer")
        if self._reads_pages(slot.call.name):
            return Provenance(
                "", slot.call.name, slot.call.id, True, "a page of an earlier result, judged then"
            )
        return self.policy.provenance(slot.call, ran.spec)

    # ----------------------------------------------------------------------------------------
    # events

    def _started(self, round: int, slot: Slot) -> None:
        slot.started = True
        slot.span = self.trace.tool_call(slot.call, slot.spec, round=round)
        flag = slot.flag
        if flag is not None and flag.action == "warn":
            logger.warning(
                "policy.mode warn: %s (call %s, run %s) has side effects (%s) and runs %s",
                slot.call.name,
                slot.call.id,
                self.emit.run_id,
                flag.why,
                flag.exposure.describe(),
            )
        self.emit(
            ToolCallStarted,
            round=round,
            call_id=slot.call.id,
            name=slot.call.name,
            arguments=dict(slot.call.arguments),
            flagged=flag.to_dict() if flag is not None else {},
        )

    def _ended(self, round: int, slot: Slot) -> None:
        self.emit(
            ToolCallEnded,
            round=round,
            call_id=slot.call.id,
            name=slot.call.name,
            verdict=slot.verdict,
            ok=slot.ok,
            ms=slot.ms,
            truncated=slot.truncated,
            error="" if slot.ok else (first_line(slot.text) if slot.done else "interrupted"),
            pages=slot.pages,
            total_chars=slot.total_chars,
            handle=slot.handle,
            preview=slot.text[:PREVIEW_CHARS],
        )
        slot.span.ended(
            verdict=slot.verdict,
            ok=slot.ok,
            is_error=slot.is_error if slot.done else True,
            text=slot.text if slot.done else "interrupted",
            ms=slot.ms,
        )
