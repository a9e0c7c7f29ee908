"""The timeline of one run, for its record (``RunRecord.timeline``) and the dashboard's waterfall.

``TimelineSink`` is an ``EventSink`` the Agent adds to a run's sinks: it turns the run's
events into spans, one per model call and one per tool call, each with its start offset from
the run's start and its duration, in the order they started::

    {"kind": "model", "round": 1, "start_ms": 2.1, "ms": 812.0, "ok": true, "usage": {...},
     "model": "qwen3:8b", "finish_reason": "tool_calls", "tool_calls": ["echo__echo"], "error": ""}
    {"kind": "tool", "round": 1, "call_id": "c1", "name": "echo__echo", "start_ms": 815.3,
     "ms": 40.2, "arguments": "{\\"text\\": \\"hi\\"}", "verdict": "run", "ok": true, "error": "",
     "preview": "hi", "approval": {"wait_ms": 1200.0, "approved": true}}

Everything is bounded: at most ``MAX_SPANS`` spans (later ones are counted, not kept), the
arguments as JSON text of at most ``MAX_ARGUMENT_CHARS``, the result as the event's preview
(``PREVIEW_CHARS``). A tool span's ``ms`` is the wall time from its start to its end event
(approval wait included; ``approval.wait_ms`` says how much of it was waiting).
"""

from __future__ import annotations

import json

from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    ModelCallEnded,
    ModelCallStarted,
    ToolCallEnded,
    ToolCallStarted,
)
from ..messages import JSONObject

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
