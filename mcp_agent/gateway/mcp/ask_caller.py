"""Approvals put to the caller itself, through MCP elicitation, in both protocol eras.

When the client calling ``agent_query`` declared the ``elicitation`` capability (form mode) and
its caller may approve (``may_answer``: it holds the ``approve`` scope, or the operator opted in
with ``approvals.selfApproval``), a tool call of its run that needs approval is asked of that
client: which tool, with which arguments, and a form with ``approve`` (boolean) and an optional
``reason``. Its answer resolves the approval; the dashboard and REST can still resolve it too,
and exactly one resolver wins (the others find it already resolved). Other callers keep waiting
for the dashboard or REST: a caller that may only ``query`` never decides its own
gated calls (many clients answer elicitations automatically, which would remove the human check).

- **2025-era sessions** (a back channel): ``BackChannelAsker`` sends ``elicitation/create`` on the
  session while the request runs; an answer that comes after the approval was resolved elsewhere
  changes nothing, and the question is withdrawn (its request cancelled) when that happens first.
- **2026-era requests** (no back channel): the call returns the SDK's ``InputRequiredResult`` with
  the question, and the client retries the call with its answer and the opaque ``request_state``.
  So the run cannot live inside one request: ``ParkedRuns`` keeps it (detached in the service's
  task group) between the rounds, keyed by an unguessable token bound to the caller. A client
  that does not come back within ``RETRY_WINDOW_SECONDS`` (or closes a round's response) is gone:
  its run is cancelled.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types

from ...events import ApprovalRequested, ApprovalResolved, Event
from ...loop.approvals import ApprovalQueue
from ...loop.provenance import describe_source
from ...loop.result import RunResult
from ...messages import JSONObject
from ..callers import Caller
from ..eventbus import BufferedSink, Relay
from ..service import NO_ANSWER, Admission

logger = logging.getLogger(__name__)

APPROVAL_EVENTS = (ApprovalRequested, ApprovalResolved)
SHOWN_ARGUMENT_CHARS = 2000
RETRY_WINDOW_SECONDS = 120.0
"""How long a 2026 client may take to come back with its answer before its run is cancelled."""
PARKED_MAX = 1024

APPROVAL_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Allow this call",
            "description": "true runs the tool call; false refuses it (the agent is told not to retry).",
        },
        "reason": {
            "type": "string",
            "title": "Reason (optional)",
            "description": "Why; the agent reads it.",
        },
    },
    "required": ["approve"],
}


# ------------------------------------------------------------------------------------------ pure


def wants_forms(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether a client with these capabilities can answer a form elicitation."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None  # ``{}`` (2025-06-18) means forms


def may_answer(caller: Caller, *, self_approval: bool) -> bool:
    """Whether ``caller`` may decide the approvals of its own runs (it holds ``approve``, or the
    operator let every caller do so with ``approvals.selfApproval``)."""
    return caller.can("approve") or self_approval


def question(event: ApprovalRequested) -> str:
    """What the caller is asked, with the call's arguments shown compactly (long ones cut)."""
    arguments = json.dumps(event.arguments, ensure_ascii=False, separators=(", ", ": "), default=str)
    if len(arguments) > SHOWN_ARGUMENT_CHARS:
        arguments = arguments[:SHOWN_ARGUMENT_CHARS] + f"… ({len(arguments)} characters)"
    if event.provenance:  # held by policy.mode enforce: say what the agent had read before
        held = f" It asks {describe_source(event.provenance)}."
        return f"The agent wants to call {event.name} with {arguments}.{held} Allow it?"
    return f"The agent wants to call {event.name} with {arguments}. Allow it?"


def elicit_request(event: ApprovalRequested) -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=question(event), requested_schema=APPROVAL_SCHEMA)
    )


def decision(result: types.ElicitResult) -> tuple[bool, str]:
    """(approved, reason) from the caller's answer; anything but an accepted ``approve: true`` refuses."""
    content = result.content or {}
    reason = content.get("reason")
    given = reason.strip() if isinstance(reason, str) else ""
    if result.action == "accept" and content.get("approve") is True:
        return True, given or "approved by the caller"
    if result.action == "accept":
        return False, given or "the caller did not approve this call"
    return (
        False,
        "the caller declined this call"
        if result.action == "decline"
        else "the caller dismissed the question",
    )


def approval_sink() -> BufferedSink:
    """A run's approval events, for an asker (nothing else is queued)."""
    return BufferedSink(256, accept=APPROVAL_EVENTS)


async def resolve(
    approvals: ApprovalQueue,
    approval_id: str,
    answer: types.ElicitResult,
    caller: Caller,
    *,
    self_approval: bool,
) -> None:
    """Resolve an approval with the caller's answer, if the caller may decide it (checked here
    again, whoever asked); an answer it may not give is ignored and the call keeps waiting."""
    if not may_answer(caller, self_approval=self_approval):
        logger.warning(
            "caller %r answered approval %s but lacks the 'approve' scope; the answer is ignored",
            caller.name,
            approval_id,
        )
        return
    approved, reason = decision(answer)
    if not await approvals.resolve(approval_id, approved, reason, by=caller.name):
        logger.info(
            "approval %s was already resolved elsewhere; the caller's answer changes nothing", approval_id
        )


# ------------------------------------------------------------------------------------ 2025: back channel


class BackChannelAsker:
    """Asks each of a run's approvals over the session's back channel (``elicitation/create``)."""

    def __init__(
        self,
        session: Any,
        approvals: ApprovalQueue,
        related_request_id: types.RequestId | None,
        caller: Caller,
        *,
        self_approval: bool = False,
    ) -> None:
        self.session = session
        self.approvals = approvals
        self.related_request_id = related_request_id
        self.caller = caller
        self.self_approval = self_approval
        self._asking: dict[str, anyio.CancelScope] = {}

    async def run(self, events: BufferedSink) -> None:
        """Ask as the run's ``ApprovalRequested`` events come, until ``events`` is closed."""
        try:
            async with anyio.create_task_group() as tg:
                async for event in events:
                    if isinstance(event, ApprovalRequested):
                        scope = anyio.CancelScope()
                        self._asking[event.approval_id] = scope
                        tg.start_soon(self._ask, event, scope)
                    elif isinstance(event, ApprovalResolved):
                        withdrawn = self._asking.pop(event.approval_id, None)
                        if withdrawn is not None:
                            withdrawn.cancel()  # resolved elsewhere (or timed out): withdraw the question
                for scope in self._asking.values():
                    scope.cancel()
        finally:
            events.aclose_receiver()

    async def _ask(self, event: ApprovalRequested, scope: anyio.CancelScope) -> None:
        with scope:
            try:
                answer = await self.session.elicit_form(
                    question(event), APPROVAL_SCHEMA, related_request_id=self.related_request_id
                )
            except Exception as exc:  # no back channel after all, the client refused, it left
                logger.info(
                    "could not ask the caller about %s (%s); it waits for the dashboard or REST",
                    event.name,
                    exc,
                )
                return
            finally:
                self._asking.pop(event.approval_id, None)
            await resolve(
                self.approvals, event.approval_id, answer, self.caller, self_approval=self.self_approval
            )


# ------------------------------------------------------------------------------------ 2026: parked runs


@dataclass(eq=False)
class ParkedRun:
    """A 2026 run between the rounds of its ``InputRequiredResult`` exchange."""

    token: str
    caller: Caller
    admission: Admission
    events: BufferedSink
    done: anyio.Event = field(default_factory=anyio.Event)
    result: RunResult | None = None
    error: BaseException | None = None
    waiting: dict[str, ApprovalRequested] = field(default_factory=dict)
    """Approvals asked of the caller and not answered yet."""
    asked: set[str] = field(default_factory=set)
    last_seen: float = field(default_factory=time.monotonic)
    relay: Relay = field(default_factory=Relay)
    """The run's events for the progress of whichever round is open now."""


class ParkedRuns:
    """2026 runs kept between rounds, by token (see the module docstring)."""

    def __init__(self, *, retry_window: float = RETRY_WINDOW_SECONDS, self_approval: bool = False) -> None:
        self.retry_window = retry_window
        self.self_approval = self_approval
        self._runs: dict[str, ParkedRun] = {}

    def __len__(self) -> int:
        return len(self._runs)

    def park(self, caller: Caller, admission: Admission) -> ParkedRun:
        if len(self._runs) >= PARKED_MAX:
            raise RuntimeError(f"too many runs wait for their callers' answers ({PARKED_MAX})")
        token = "ask_" + secrets.token_urlsafe(24)
        parked = ParkedRun(token, caller, admission, approval_sink())
        self._runs[token] = parked
        return parked

    def find(self, token: str, caller: Caller) -> ParkedRun | None:
        """The parked run of ``token`` if it belongs to ``caller`` (else None, as if unknown)."""
        parked = self._runs.get(token)
        return parked if parked is not None and parked.caller.name == caller.name else None

    def drop(self, parked: ParkedRun) -> None:
        self._runs.pop(parked.token, None)
        parked.events.aclose_receiver()

    async def next_stop(
        self, parked: ParkedRun, approvals: ApprovalQueue
    ) -> types.InputRequiredResult | RunResult:
        """Wait until the run ends (its result) or asks an approval not yet asked (the question)."""
        parked.last_seen = time.monotonic()
        while True:
            for approval_id, asking in parked.waiting.items():
                if approval_id not in parked.asked:
                    parked.asked.add(approval_id)
                    return types.InputRequiredResult(
                        input_requests={approval_id: elicit_request(asking)}, request_state=parked.token
                    )
            if parked.done.is_set():
                self.drop(parked)
                if parked.error is not None:
                    raise parked.error
                assert parked.result is not None
                return parked.result
            event: Event | None = None  # the next approval event, or None: the run ended
            async with anyio.create_task_group() as tg:

                async def until_done() -> None:
                    await parked.done.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(until_done)
                try:
                    event = await parked.events.__aiter__().__anext__()
                except StopAsyncIteration:
                    await parked.done.wait()
                tg.cancel_scope.cancel()
            if isinstance(event, ApprovalRequested):
                parked.waiting[event.approval_id] = event
            elif isinstance(event, ApprovalResolved):
                parked.waiting.pop(event.approval_id, None)

    async def answer(
        self, parked: ParkedRun, responses: Mapping[str, Any] | None, approvals: ApprovalQueue
    ) -> None:
        """Apply a retry's answers (keys are approval ids); others are ignored."""
        for approval_id, response in (responses or {}).items():
            if approval_id in parked.waiting and isinstance(response, types.ElicitResult):
                parked.waiting.pop(approval_id)
                await resolve(
                    approvals, approval_id, response, parked.caller, self_approval=self.self_approval
                )

    async def watch(self, parked: ParkedRun) -> None:
        """Cancel the run of a caller that does not come back with its answers in ``retry_window``;
        forget a run whose result nobody collected within ``retry_window`` after it ended."""
        while not parked.done.is_set():
            if parked.waiting and parked.asked and time.monotonic() - parked.last_seen > self.retry_window:
                logger.info("the caller of a run did not come back with its answer; cancelling the run")
                parked.admission.cancel.set(NO_ANSWER)
                await parked.done.wait()
                self.drop(parked)
                return
            with anyio.move_on_after(min(1.0, self.retry_window / 4)):
                await parked.done.wait()
        await anyio.sleep(self.retry_window)
        self.drop(parked)
