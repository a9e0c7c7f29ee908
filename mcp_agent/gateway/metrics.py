"""Prometheus metrics of the gateway, fed by run events, rendered as text for ``GET /metrics``.

``Metrics`` is an EventSink (``emit`` counts, never blocks). What it exports:

- ``mcp_agent_queries_total{termination_reason}``: finished runs; every reason appears, even at 0.
- ``mcp_agent_queries_early_stopped_total``: runs whose answer came from an early-stop synthesis.
- ``mcp_agent_query_duration_seconds``: histogram of run wall time.
- ``mcp_agent_queries_in_flight``: runs going on now (kept by the gateway, not by events).
- ``mcp_agent_queries_rejected_total{reason}``: queries refused before running (busy, starting,
  shutting_down, invalid).
- ``mcp_agent_tool_calls_total{tool,outcome}``: tool calls; outcome is ``ok``, ``error`` or the
  guard's verdict when the call was not run (``denied``, ``invalid_arguments``, ...).
- ``mcp_agent_tool_call_duration_seconds``: histogram of tool call time (calls that ran).
- ``mcp_agent_model_calls_total{model,outcome}`` and ``mcp_agent_model_call_duration_seconds``;
  ``model`` is the model that answered (with ``llm.fallbacks``, which one), left out when
  unknown (a failed call, or a provider that does not say).
- ``mcp_agent_events_dropped_total``: events slow listeners lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..events import Event, ModelCallEnded, RunEnded, ToolCallEnded
from ..loop.result import TerminationReason

QUERY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
REJECT_REASONS = ("busy", "starting", "shutting_down", "invalid")


def escape_label(value: str) -> str:
    """A label value escaped for the Prometheus text format."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_labels(labels: Mapping[str, str]) -> str:
    """``{a="1",b="2"}`` (or "" without labels)."""
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{escape_label(value)}"' for key, value in labels.items()) + "}"


def format_number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


@dataclass
class Histogram:
    """A cumulative histogram with fixed buckets (seconds)."""

    buckets: Sequence[float]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        self.total += value
        self.count += 1
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[index] += 1

    def lines(self, name: str, labels: Mapping[str, str] | None = None) -> list[str]:
        labels = dict(labels or {})
        out = []
        for bound, count in zip(self.buckets, self.counts, strict=True):
            out.append(f"{name}_bucket{format_labels({**labels, 'le': format_number(bound)})} {count}")
        out.append(f"{name}_bucket{format_labels({**labels, 'le': '+Inf'})} {self.count}")
        out.append(f"{name}_sum{format_labels(labels)} {format_number(round(self.total, 6))}")
        out.append(f"{name}_count{format_labels(labels)} {self.count}")
        return out


def tool_outcome(event: ToolCallEnded) -> str:
    """``ok``/``error`` for a call that ran, else the guard's verdict."""
    if event.verdict in ("run", "shared"):
        return "ok" if event.ok else "error"
    return event.verdict


class Metrics:
    """Counters of runs, tool calls and model calls, fed by events. An EventSink."""

    def __init__(self) -> None:
        self.queries: Counter[str] = Counter({reason.value: 0 for reason in TerminationReason})
        self.early_stopped = 0
        self.query_seconds = Histogram(QUERY_BUCKETS)
        self.in_flight = 0
        self.rejected: Counter[str] = Counter({reason: 0 for reason in REJECT_REASONS})
        self.tool_calls: Counter[tuple[str, str]] = Counter()
        self.tool_seconds = Histogram(CALL_BUCKETS)
        self.model_calls: Counter[tuple[str, str]] = Counter({("", "ok"): 0, ("", "error"): 0})
        self.model_seconds = Histogram(CALL_BUCKETS)

    def emit(self, event: Event) -> None:
        if isinstance(event, RunEnded):
            self.queries[event.termination_reason] += 1
            if event.early_stopped:
                self.early_stopped += 1
            self.query_seconds.observe(event.elapsed_ms / 1000)
        elif isinstance(event, ToolCallEnded):
            self.tool_calls[(event.name, tool_outcome(event))] += 1
            if event.verdict == "run":
                self.tool_seconds.observe(event.ms / 1000)
        elif isinstance(event, ModelCallEnded):
            self.model_calls[(event.model or "", "ok" if event.ok else "error")] += 1
            self.model_seconds.observe(event.ms / 1000)

    def reject(self, reason: str) -> None:
        """Count a query refused before it ran."""
        self.rejected[reason] += 1

    def render(self, *, extra: Iterable[str] = ()) -> str:
        """The Prometheus text exposition (version 0.0.4)."""
        lines: list[str] = []

        def header(name: str, kind: str, help_text: str) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

        header("mcp_agent_queries_total", "counter", "Finished queries by termination reason.")
        for reason, count in sorted(self.queries.items()):
            lines.append(f"mcp_agent_queries_total{format_labels({'termination_reason': reason})} {count}")
        header(
            "mcp_agent_queries_early_stopped_total", "counter", "Queries answered by an early-stop synthesis."
        )
        lines.append(f"mcp_agent_queries_early_stopped_total {self.early_stopped}")
        header("mcp_agent_query_duration_seconds", "histogram", "Wall time of finished queries.")
        lines.extend(self.query_seconds.lines("mcp_agent_query_duration_seconds"))
        header("mcp_agent_queries_in_flight", "gauge", "Queries running now.")
        lines.append(f"mcp_agent_queries_in_flight {self.in_flight}")
        header("mcp_agent_queries_rejected_total", "counter", "Queries refused before running, by reason.")
        for reason, count in sorted(self.rejected.items()):
            lines.append(f"mcp_agent_queries_rejected_total{format_labels({'reason': reason})} {count}")
        header("mcp_agent_tool_calls_total", "counter", "Tool calls by tool and outcome.")
        for (tool, outcome), count in sorted(self.tool_calls.items()):
            lines.append(
                f"mcp_agent_tool_calls_total{format_labels({'tool': tool, 'outcome': outcome})} {count}"
            )
        header("mcp_agent_tool_call_duration_seconds", "histogram", "Time of tool calls that ran.")
        lines.extend(self.tool_seconds.lines("mcp_agent_tool_call_duration_seconds"))
        header("mcp_agent_model_calls_total", "counter", "Model calls by model and outcome.")
        for (model, outcome), count in sorted(self.model_calls.items()):
            labels = {"model": model, "outcome": outcome} if model else {"outcome": outcome}
            lines.append(f"mcp_agent_model_calls_total{format_labels(labels)} {count}")
        header("mcp_agent_model_call_duration_seconds", "histogram", "Time of model calls.")
        lines.extend(self.model_seconds.lines("mcp_agent_model_call_duration_seconds"))
        lines.extend(extra)
        return "\n".join(lines) + "\n"
