"""What the Agent writes into the state: the limits from agent.json, run records (with their
timelines), and a failing store kept from costing a run its answer.

A store that fails (``StateError``) is logged and never ends a run: a run record that cannot be
written is lost (the run still answers), a transcript that cannot be saved is said in the
result's ``detail`` (``note_unsaved``).

What is kept shows no known secret (``_redact``: the API keys, tokens, secret headers and env,
URL passwords of the config and the environment), whatever the backend: a run record is masked
in ``quietly``, the one way records are written, and a transcript in ``kept_transcript``, the
one way the Agent saves one. The values stay what they were (a masked transcript is a valid
transcript, sent to the model on the session's next run with ``***`` where a secret was); only
the secrets' text becomes ``***``. (Approvals mask their arguments in ``ApprovalQueue.submit``,
pages their text in ``RunPages.page``.)

A run's record carries its timeline (``RunRecord.timeline``, the dashboard's waterfall):
``TimelineSink`` is an ``EventSink`` the Agent adds to a run's sinks; it turns the run's events
into spans, one per model call and one per tool call, each with its start offset from the run's
start and its duration, in the order they started::

    {"kind": "model", "round": 1, "start_ms": 2.1, "ms": 812.0, "ok": true, "usage": {...},
     "model": "qwen3:8b", "finish_reason": "tool_calls", "tool_calls": ["echo__echo"], "error": ""}
    {"kind": "tool", "round": 1, "call_id": "c1", "name": "echo__echo", "start_ms": 815.3,
     "ms": 40.2, "arguments": "{\\"text\\": \\"hi\\"}", "verdict": "run", "ok": true, "error": "",
     "preview": "hi", "approval": {"wait_ms": 1200.0, "approved": true}}

Everything there is bounded: at most ``MAX_SPANS`` spans (later ones are counted, not kept), the
arguments as JSON text of at most ``MAX_ARGUMENT_CHARS``, the result as the event's preview
(``PREVIEW_CHARS``). A tool span's ``ms`` is the wall time from its start to its end event
(approval wait included; ``approval.wait_ms`` says how much of it was waiting).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from .._redact import mask_secrets_in
from ..config import AgentConfig
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    ModelCallEnded,
    ModelCallStarted,
    ToolCallEnded,
    ToolCallStarted,
)
from ..exceptions import StateError
from ..messages import JSONObject, Message
from ..state import state_limits
from ..state.memory import MemoryState
from ..state.records import RunRecord
from .result import RunResult, ToolCallRecord

logger = logging.getLogger(__name__)


def memory_state(config: AgentConfig) -> MemoryState:
    """The state of an Agent built without one: in this process's memory."""
    return MemoryState(state_limits(config))


def begun(
    run_id: str, query: object, *, session_id: str | None, caller: str | None, replica: str
) -> RunRecord:
    """The record of a run about to start."""
    text = query if isinstance(query, str) else f"(not text: {type(query).__name__})"
    return RunRecord(
        run_id, session_id=session_id, caller=caller, query=text, started=time.time(), replica=replica
    )


def finished(record: RunRecord, result: RunResult, timeline: tuple[JSONObject, ...] = ()) -> RunRecord:
    """The record of a run that ended with ``result`` (and its spans, ``TimelineSink`` below)."""
    return replace(
        record,
        session_id=result.session_id or record.session_id,
        ended=time.time(),
        termination_reason=result.termination_reason.value,
        answer=result.answer,
        detail=result.detail,
        early_stopped=result.early_stopped,
        truncated=result.truncated,
        usage=result.usage,
        tool_calls=tuple(_kept_call(call) for call in result.tool_calls),
        rounds=result.rounds,
        elapsed_ms=result.elapsed_ms,
        model=result.model,
        timeline=timeline,
    )


def _kept_call(call: ToolCallRecord) -> JSONObject:
    """A tool call as the record keeps it: ``to_dict`` and, for a call that did not run, its
    ``verdict`` (``skipped``: never executed because the run ended first; ``denied``, ...), so the
    dashboard's run list counts only the calls that were made."""
    data = call.to_dict()
    if call.verdict != "run":
        data["verdict"] = call.verdict
    return data


def broken_off(
    record: RunRecord, exc: BaseException, *, cancelled: bool, timeline: tuple[JSONObject, ...] = ()
) -> RunRecord:
    """The record of a run that raised (the caller's cancellation, or a programming error)."""
    now = time.time()
    return replace(
        record,
        ended=now,
        termination_reason="cancelled" if cancelled else "terminal_error",
        detail="the caller went away" if cancelled else f"internal error: {type(exc).__name__}",
        elapsed_ms=(now - record.started) * 1000,
        timeline=timeline,
    )


async def quietly(write: Callable[[RunRecord], Awaitable[None]], record: RunRecord) -> None:
    """Write a run record, its known secrets masked; a failing store is logged, never raised."""
    data = record.to_dict()
    masked = mask_secrets_in(data)
    try:
        await write(record if masked == data else RunRecord.from_dict(masked))
    except StateError as exc:
        logger.warning("run %s: could not record it: %s", record.id, exc)


def kept_transcript(transcript: Sequence[Message]) -> tuple[Message, ...]:
    """``transcript`` as the state keeps it: each message with its known secrets masked."""
    kept = []
    for message in transcript:
        data = message.to_dict()
        masked = mask_secrets_in(data)
        kept.append(message if masked == data else Message.from_dict(masked))
    return tuple(kept)


def note_unsaved(result: RunResult, why: str) -> RunResult:
    """``result`` with ``detail`` saying the conversation was not saved, and why."""
    note = f"the conversation could not be saved: {why}"
    logger.warning("session %s: %s", result.session_id, note)
    return replace(result, detail=f"{result.detail}; {note}" if result.detail else note)


# --------------------------------------------------------------------------------------------
# the timeline of one run

MAX_SPANS = 400
MAX_ARGUMENT_CHARS = 2000


def _ms(since: float, ts: float) -> float:
    return round(max(ts - since, 0.0) * 1000, 1)


def argument_text(arguments: JSONObject) -> str:
    """The arguments as JSON text, cut to ``MAX_ARGUMENT_CHARS`` (with an ellipsis when cut)."""
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_ARGUMENT_CHARS else text[: MAX_ARGUMENT_CHARS - 1] + "…"


class TimelineSink:
    """Collects the spans of one run from its events (see the module docstring).

    Args:
        started: the run's start (wall time, as ``RunRecord.started``); offsets count from it.
    """

    def __init__(self, started: float) -> None:
        self.started = started
        self._spans: list[JSONObject] = []
        self._open_model: JSONObject | None = None
        self._open_tools: dict[str, JSONObject] = {}
        self._asked: dict[str, float] = {}
        self.dropped = 0

    def _add(self, span: JSONObject) -> bool:
        if len(self._spans) >= MAX_SPANS:
            self.dropped += 1
            return False
        self._spans.append(span)
        return True

    def emit(self, event: Event) -> None:
        if isinstance(event, ModelCallStarted):
            span: JSONObject = {
                "kind": "model",
                "round": event.round,
                "start_ms": _ms(self.started, event.ts),
                "ms": None,
            }
            self._open_model = span if self._add(span) else None
        elif isinstance(event, ModelCallEnded) and self._open_model is not None:
            self._open_model.update(
                ms=round(event.ms, 1),
                ok=event.ok,
                error=event.error,
                usage=dict(event.usage),
                model=event.model,
                finish_reason=event.finish_reason,
                tool_calls=list(event.tool_calls),
            )
            self._open_model = None
        elif isinstance(event, ToolCallStarted):
            span = {
                "kind": "tool",
                "round": event.round,
                "call_id": event.call_id,
                "name": event.name,
                "start_ms": _ms(self.started, event.ts),
                "ms": None,
                "arguments": argument_text(event.arguments),
            }
            if event.flagged:  # policy.mode flagged it: side effects after untrusted text
                span["flagged"] = event.flagged
            if self._add(span):
                self._open_tools[event.call_id] = span
        elif isinstance(event, ApprovalRequested):
            self._asked[event.call_id] = event.ts
        elif isinstance(event, ApprovalResolved):
            asked = self._asked.pop(event.call_id, event.ts)
            span_or_none = self._open_tools.get(event.call_id)
            if span_or_none is not None:
                span_or_none["approval"] = {"wait_ms": _ms(asked, event.ts), "approved": event.approved}
        elif isinstance(event, ToolCallEnded):
            span_or_none = self._open_tools.pop(event.call_id, None)
            if span_or_none is None:  # a call refused before it started (or past MAX_SPANS)
                span_or_none = {
                    "kind": "tool",
                    "round": event.round,
                    "call_id": event.call_id,
                    "name": event.name,
                    "start_ms": _ms(self.started, event.ts),
                    "arguments": "",
                }
                if not self._add(span_or_none):
                    return
            span_or_none.update(
                ms=round(max(_ms(self.started, event.ts) - float(span_or_none["start_ms"]), 0.0), 1),
                tool_ms=round(event.ms, 1),
                verdict=event.verdict,
                ok=event.ok,
                error=event.error,
                preview=event.preview,
            )

    def spans(self) -> tuple[JSONObject, ...]:
        """The spans so far (a span still open has ``ms`` None)."""
        return tuple(dict(span) for span in self._spans)
