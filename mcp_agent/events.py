"""Run events, in start/end pairs, and the EventSink protocol that receives them.

A run emits, in order::

    RunStarted
      RoundStarted
        ModelCallStarted  (ModelDelta ...)  ModelCallEnded
        ToolCallStarted  (ApprovalRequested  ApprovalResolved)  ToolCallEnded   (per call)
      RoundEnded
      ...
    RunEnded            (always, on every path, with the termination reason)

Events are small frozen values: ids, names and numbers, never live objects. Every event carries
the run id and the session id so that a listener can follow one run among many.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Protocol, TypeAlias

from ._plural import counted
from .messages import JSONObject


@dataclass(frozen=True, kw_only=True)
class _Event:
    type: ClassVar[str] = "event"

    run_id: str
    session_id: str | None = None
    caller: str | None = None
    """Who asked for the run (the gateway's caller name); None for library use."""
    ts: float = field(default_factory=time.time)

    def to_dict(self) -> JSONObject:
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True, kw_only=True)
class RunStarted(_Event):
    type: ClassVar[str] = "run_started"
    query: str
    limits: JSONObject = field(default_factory=dict)
    tools: int = 0


@dataclass(frozen=True, kw_only=True)
class RunEnded(_Event):
    type: ClassVar[str] = "run_ended"
    termination_reason: str
    early_stopped: bool = False
    detail: str = ""
    rounds: int = 0
    tool_calls: int = 0
    usage: JSONObject = field(default_factory=dict)
    elapsed_ms: float = 0.0


@dataclass(frozen=True, kw_only=True)
class RoundStarted(_Event):
    type: ClassVar[str] = "round_started"
    round: int
    max_rounds: int = 0


@dataclass(frozen=True, kw_only=True)
class RoundEnded(_Event):
    type: ClassVar[str] = "round_ended"
    round: int
    tool_calls: int = 0


@dataclass(frozen=True, kw_only=True)
class ModelCallStarted(_Event):
    type: ClassVar[str] = "model_call_started"
    round: int
    messages: int = 0
    tools: int = 0


@dataclass(frozen=True, kw_only=True)
class ModelDelta(_Event):
    type: ClassVar[str] = "model_delta"
    round: int
    kind: str
    text: str = ""
    name: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelCallEnded(_Event):
    type: ClassVar[str] = "model_call_ended"
    round: int
    ok: bool = True
    error: str = ""
    usage: JSONObject = field(default_factory=dict)
    ms: float = 0.0
    ttft_ms: float | None = None
    tool_calls: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    """The model that answered (``Turn.model``; with ``llm.fallbacks``, which one); None when
    the call failed or the provider does not say."""
    streamed: bool | None = None
    """Whether the request was streamed (None when the provider does not say)."""
    retries: int = 0
    """How often the provider retried the request (connection errors, 429, 5xx)."""


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted(_Event):
    type: ClassVar[str] = "tool_call_started"
    round: int
    call_id: str
    name: str
    arguments: JSONObject = field(default_factory=dict)
    flagged: JSONObject = field(default_factory=dict)
    """Set when ``policy.mode`` flags the call: it has side effects and comes after untrusted
    text. ``{"action": "warn"|"hold", "side_effects": why, "after": {server, tool, call_id,
    trusted, why, excerpt}}`` (``loop/provenance.py``)."""


@dataclass(frozen=True, kw_only=True)
class ToolCallEnded(_Event):
    """The end of one tool call.

    ``verdict`` says what the guards decided: ``run``, ``shared`` (an identical call in the same
    turn ran), ``unknown_tool``, ``invalid_arguments``, ``denied``, ``disabled``, ``skipped``
    (a budget, a loop stop or cancellation). ``ok`` is the outcome of what ran.

    A long result is either ``truncated`` (cut, with a note: ``limits.pageResults`` off) or
    paged: ``pages`` > 0 pages of a ``total_chars`` result, readable by ``handle``.
    """

    type: ClassVar[str] = "tool_call_ended"
    round: int
    call_id: str
    name: str
    verdict: str = "run"
    ok: bool = True
    ms: float = 0.0
    truncated: bool = False
    error: str = ""
    pages: int = 0
    total_chars: int = 0
    handle: str = ""
    preview: str = ""
    """The start of the text the model reads for this call (at most ``PREVIEW_CHARS``)."""


PREVIEW_CHARS = 500
"""How much of a tool's result ``ToolCallEnded.preview`` (and so the run record) keeps."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRequested(_Event):
    type: ClassVar[str] = "approval_requested"
    approval_id: str
    call_id: str
    name: str
    arguments: JSONObject = field(default_factory=dict)
    provenance: JSONObject = field(default_factory=dict)
    """Set when ``policy.mode`` enforce holds the call: the untrusted result before it
    (server, tool, call_id, trusted, why, excerpt)."""


@dataclass(frozen=True, kw_only=True)
class ApprovalResolved(_Event):
    type: ClassVar[str] = "approval_resolved"
    approval_id: str
    call_id: str
    name: str
    approved: bool
    reason: str = ""


Event: TypeAlias = (
    RunStarted
    | RunEnded
    | RoundStarted
    | RoundEnded
    | ModelCallStarted
    | ModelDelta
    | ModelCallEnded
    | ToolCallStarted
    | ToolCallEnded
    | ApprovalRequested
    | ApprovalResolved
)


_BY_TYPE: dict[str, type[Any]] = {
    cls.type: cls
    for cls in (
        RunStarted,
        RunEnded,
        RoundStarted,
        RoundEnded,
        ModelCallStarted,
        ModelDelta,
        ModelCallEnded,
        ToolCallStarted,
        ToolCallEnded,
        ApprovalRequested,
        ApprovalResolved,
    )
}


def event_from_dict(data: Mapping[str, Any]) -> Event | None:
    """The event ``to_dict`` wrote (another process's, relayed); None for an unknown type.

    Fields this version does not know are ignored, so a newer replica's events still read.
    """
    cls = _BY_TYPE.get(str(data.get("type")))
    if cls is None:
        return None
    names = {f.name for f in fields(cls)}
    event: Event = cls(**{name: value for name, value in data.items() if name in names})
    return event


class EventSink(Protocol):
    """Receives run events.

    ``emit`` is called from inside the run. It must return at once and must not raise: a sink
    that nobody reads must never slow or block the run (drop or buffer instead).
    """

    def emit(self, event: Event) -> None: ...


class NullSink:
    """A sink that drops every event."""

    def emit(self, event: Event) -> None:
        pass


class RecordingSink:
    """A sink that keeps every event in a list (for tests and the CLI)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [event.type for event in self.events]

    def of(self, cls: type[Any]) -> list[Any]:
        return [event for event in self.events if isinstance(event, cls)]


def _after(source: Any) -> str:
    """`` (after untrusted text from TOOL, call ID)`` for a flagged call; "" for none."""
    if not isinstance(source, Mapping) or not source:
        return ""
    return f" (after untrusted text from {source.get('tool', '?')}, call {source.get('call_id', '?')})"


def describe(event: Event, max_rounds: int = 0) -> str | None:
    """A one-line human description of an event, for progress output; None for noise.

    The gateway sends these as MCP progress messages ("round 2/10: calling ports__check_port")
    and the CLI prints them to stderr. ``max_rounds`` (0 = unknown) completes "round N/M".
    """

    def at(number: int) -> str:
        total = max_rounds or getattr(event, "max_rounds", 0)
        return f"round {number}/{total}" if total else f"round {number}"

    if isinstance(event, RoundStarted):
        return f"{at(event.round)}: asking the model"
    if isinstance(event, ModelCallEnded):
        if not event.ok:
            return f"{at(event.round)}: model call failed: {event.error}"
        tokens = int(event.usage.get("total_tokens") or 0)
        calls = f", wants {', '.join(event.tool_calls)}" if event.tool_calls else ""
        return f"{at(event.round)}: model answered in {event.ms:.0f} ms ({counted(tokens, 'token')}){calls}"
    if isinstance(event, ToolCallStarted):
        return f"{at(event.round)}: calling {event.name}{_after(event.flagged.get('after'))}"
    if isinstance(event, ToolCallEnded):
        if event.verdict not in ("run", "shared"):
            why = f": {event.error}" if event.error else ""
            return f"{at(event.round)}: {event.name} not run ({event.verdict}){why}"
        outcome = "ok" if event.ok else f"failed: {event.error}" if event.error else "failed"
        cut = ", truncated" if event.truncated else ""
        return f"{at(event.round)}: {event.name} {outcome} ({event.ms:.0f} ms{cut})"
    if isinstance(event, ApprovalRequested):
        return f"waiting for approval of {event.name} (id {event.approval_id}){_after(event.provenance)}"
    if isinstance(event, ApprovalResolved):
        why = f": {event.reason}" if event.reason else ""
        return f"{event.name} {'approved' if event.approved else 'denied'}{why}"
    if isinstance(event, RunEnded):
        stop = " (early stop)" if event.early_stopped else ""
        tokens = int(event.usage.get("total_tokens") or 0)
        return (
            f"done: {event.termination_reason}{stop} after {counted(event.rounds, 'round')}, "
            f"{counted(event.tool_calls, 'tool call')}, {counted(tokens, 'token')}, {_duration(event.elapsed_ms)}"
        )
    return None


def _duration(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"
