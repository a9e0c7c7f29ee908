"""Prometheus metrics of the gateway, through ``prometheus_client``, for ``GET /metrics``.

``Metrics`` is an EventSink (``emit`` counts, never blocks) with a registry of its own per
gateway app (never the process-wide default registry, so several apps and the tests do not
collide). Every label has a bounded set of values: the termination reasons; tool and server
names the tool servers offer (a name the model made up is ``other``); model names from the
config (``llm.model`` and ``llm.fallbacks``; any other is ``other``, an unknown one
``unknown``); fixed outcome words. No session ids, caller names or free text.

Fed by run events:

- ``mcp_agent_queries_total{termination_reason}``: finished runs (every reason shown, at 0 too);
- ``mcp_agent_queries_early_stopped_total``: runs answered by an early-stop synthesis;
- ``mcp_agent_query_duration_seconds{termination_reason}``: histogram of run wall time;
- ``mcp_agent_model_calls_total{model,outcome}``: model calls (``ok``/``error``);
- ``mcp_agent_model_call_duration_seconds{model,streamed}``: histogram (``true``, ``false``,
  ``unknown`` when the provider does not say);
- ``mcp_agent_model_retries_total{model}``: requests the provider sent again (429, 5xx, resets);
- ``mcp_agent_tokens_total{model,type}``: ``prompt`` and ``completion`` tokens;
- ``mcp_agent_tool_calls_total{server,tool,outcome}``: ``ok``, ``error``, or the guard's verdict
  when the call did not run (``denied``, ``invalid_arguments``, ``unknown_tool``, ...);
- ``mcp_agent_tool_errors_total{server,tool}``: calls that ran and failed;
- ``mcp_agent_tool_call_duration_seconds{server,tool}``: histogram of calls that ran;
- ``mcp_agent_approvals_total{outcome}``: ``approved``, ``denied``, ``timed_out``, ``abandoned``.

Kept by the gateway: ``mcp_agent_queries_in_flight`` (``in_flight``) and
``mcp_agent_queries_rejected_total{reason}`` (``reject``: ``busy``, ``starting``,
``shutting_down``, ``invalid``). Read at each scrape (``watch``): whatever the app registers,
such as the servers up, the tools offered and the open MCP sessions (``app.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..config import AgentConfig
from ..events import ApprovalResolved, Event, ModelCallEnded, RunEnded, ToolCallEnded
from ..loop.result import TerminationReason
from ..messages import ToolSpec

QUERY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
REJECT_REASONS = ("busy", "starting", "shutting_down", "invalid")
APPROVAL_OUTCOMES = ("approved", "denied", "timed_out", "abandoned")
OTHER = "other"
UNKNOWN = "unknown"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Sample = float | Mapping[tuple[str, ...], float]
"""What a watched metric reads: one value, or values by label values."""


def tool_outcome(event: ToolCallEnded) -> str:
    """``ok``/``error`` for a call that ran, else the guard's verdict."""
    if event.verdict in ("run", "shared"):
        return "ok" if event.ok else "error"
    return event.verdict


def approval_outcome(event: ApprovalResolved) -> str:
    """``approved``; ``timed_out`` (nobody answered in time); ``abandoned`` (the run ended while
    waiting, or no approver was there); else ``denied``."""
    if event.approved:
        return "approved"
    reason = event.reason.lower()
    if reason.startswith("approval timed out"):
        return "timed_out"
    if reason.startswith("the run ended") or "no approver" in reason:
        return "abandoned"
    return "denied"


class _Watched(Collector):
    """Metrics read at each scrape from callables (``Metrics.watch``)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, str, Sequence[str], Callable[[], Sample]]] = []

    def collect(self) -> Iterator[Any]:
        for kind, name, help_text, labels, read in self.entries:
            family_type = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            family = family_type(name, help_text, labels=labels or None)
            value = read()
            if isinstance(value, Mapping):
                for key, number in sorted(value.items()):
                    family.add_metric(list(key), number)
            else:
                family.add_metric([], value)
            yield family


class Metrics:
    """The gateway's metrics, fed by events; see the module docstring.

    Args:
        models: the model names the config knows (labels; any other is ``other``).
        tools: the tools offered now, to label a call with its server (any other is ``other``).
    """

    def __init__(
        self, *, models: Iterable[str] = (), tools: Callable[[], Iterable[ToolSpec]] | None = None
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.models = frozenset(models)
        self._tools = tools
        self._servers: dict[str, str] = {}
        self.in_flight = 0
        registry = self.registry
        self._queries = Counter(
            "mcp_agent_queries",
            "Finished queries by termination reason.",
            ["termination_reason"],
            registry=registry,
        )
        self._early = Counter(
            "mcp_agent_queries_early_stopped",
            "Queries answered by an early-stop synthesis.",
            registry=registry,
        )
        self._query_seconds = Histogram(
            "mcp_agent_query_duration_seconds",
            "Wall time of finished queries, by termination reason.",
            ["termination_reason"],
            buckets=QUERY_BUCKETS,
            registry=registry,
        )
        Gauge("mcp_agent_queries_in_flight", "Queries running now.", registry=registry).set_function(
            lambda: self.in_flight
        )
        self._rejected = Counter(
            "mcp_agent_queries_rejected",
            "Queries refused before running, by reason.",
            ["reason"],
            registry=registry,
        )
        self._model_calls = Counter(
            "mcp_agent_model_calls",
            "Model calls by model and outcome.",
            ["model", "outcome"],
            registry=registry,
        )
        self._model_seconds = Histogram(
            "mcp_agent_model_call_duration_seconds",
            "Time of model calls, by model and whether they were streamed.",
            ["model", "streamed"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self._retries = Counter(
            "mcp_agent_model_retries",
            "Model requests sent again (429, 5xx, dropped connections).",
            ["model"],
            registry=registry,
        )
        self._tokens = Counter(
            "mcp_agent_tokens",
            "Tokens used, by model and type (prompt, completion).",
            ["model", "type"],
            registry=registry,
        )
        self._tool_calls = Counter(
            "mcp_agent_tool_calls",
            "Tool calls by server, tool and outcome.",
            ["server", "tool", "outcome"],
            registry=registry,
        )
        self._tool_errors = Counter(
            "mcp_agent_tool_errors",
            "Tool calls that ran and failed, by server and tool.",
            ["server", "tool"],
            registry=registry,
        )
        self._tool_seconds = Histogram(
            "mcp_agent_tool_call_duration_seconds",
            "Time of tool calls that ran, by server and tool.",
            ["server", "tool"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self._approvals = Counter(
            "mcp_agent_approvals", "Approvals asked for, by outcome.", ["outcome"], registry=registry
        )
        for ending in TerminationReason:
            self._queries.labels(ending.value)
        for reason in REJECT_REASONS:
            self._rejected.labels(reason)
        for outcome in APPROVAL_OUTCOMES:
            self._approvals.labels(outcome)
        self._watched = _Watched()
        registry.register(self._watched)
        self.queries = _View(self, "mcp_agent_queries_total", ("termination_reason",))
        """Finished queries by reason, to read (``metrics.queries["success"]``)."""
        self.rejected = _View(self, "mcp_agent_queries_rejected_total", ("reason",))
        self.tool_calls = _View(self, "mcp_agent_tool_calls_total", ("tool", "outcome"))
        """Tool calls by ``(tool, outcome)``, summed over servers."""

    @classmethod
    def for_config(
        cls, config: AgentConfig, tools: Callable[[], Iterable[ToolSpec]] | None = None
    ) -> Metrics:
        """Metrics labelled with the models ``config`` names (``llm.model`` and its fallbacks)."""
        llm = config.llm
        models = [
            llm.model,
            *(fallback.model for fallback in llm.fallbacks),
        ]
        return cls(models=[model for model in models if model], tools=tools)

    # ---------------------------------------------------------------- labels

    def _model(self, model: str | None) -> str:
        if not model:
            return UNKNOWN
        return model if model in self.models else OTHER

    def _tool(self, name: str) -> tuple[str, str]:
        """``(server, tool)`` for a tool name; ``(other, other)`` for a name no server offers."""
        server = self._servers.get(name)
        if server is None and self._tools is not None:
            try:
                self._servers = {spec.name: spec.server or UNKNOWN for spec in self._tools()}
            except Exception:  # metrics never break a run
                self._servers = {}
            server = self._servers.get(name)
        return (server, name) if server is not None else (OTHER, OTHER)

    # ---------------------------------------------------------------- events

    def emit(self, event: Event) -> None:
        if isinstance(event, RunEnded):
            self._queries.labels(event.termination_reason).inc()
            if event.early_stopped:
                self._early.inc()
            self._query_seconds.labels(event.termination_reason).observe(event.elapsed_ms / 1000)
        elif isinstance(event, ToolCallEnded):
            server, tool = self._tool(event.name)
            self._tool_calls.labels(server, tool, tool_outcome(event)).inc()
            if event.verdict == "run":
                self._tool_seconds.labels(server, tool).observe(event.ms / 1000)
                if not event.ok:
                    self._tool_errors.labels(server, tool).inc()
        elif isinstance(event, ModelCallEnded):
            model = self._model(event.model)
            self._model_calls.labels(model, "ok" if event.ok else "error").inc()
            streamed = UNKNOWN if event.streamed is None else str(event.streamed).lower()
            self._model_seconds.labels(model, streamed).observe(event.ms / 1000)
            if event.retries:
                self._retries.labels(model).inc(event.retries)
            for kind in ("prompt", "completion"):
                tokens = event.usage.get(f"{kind}_tokens")
                if isinstance(tokens, int) and tokens > 0:
                    self._tokens.labels(model, kind).inc(tokens)
        elif isinstance(event, ApprovalResolved):
            self._approvals.labels(approval_outcome(event)).inc()

    def reject(self, reason: str) -> None:
        """Count a query refused before it ran."""
        self._rejected.labels(reason if reason in REJECT_REASONS else OTHER).inc()

    # ---------------------------------------------------------------- read at scrape time

    def watch(
        self,
        name: str,
        help_text: str,
        read: Callable[[], Sample],
        *,
        labels: Sequence[str] = (),
        kind: str = "gauge",
    ) -> None:
        """Add a metric read from ``read()`` at each scrape: one number, or numbers by label values.

        A ``counter`` named ``x`` is exposed as ``x_total``.
        """
        self._watched.entries.append((kind, name, help_text, tuple(labels), read))

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (for tests and health)."""
        total = 0.0
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def render(self) -> str:
        """The Prometheus text exposition (version 0.0.4), without ``_created`` series."""
        return generate_latest(_WithoutCreated(self.registry)).decode("utf-8")


class _WithoutCreated(Collector):
    """The registry's metrics less the ``*_created`` samples prometheus_client adds to counters and
    histograms: in the 0.0.4 text format they would be scraped as gauges of their own, doubling the
    series for a timestamp nobody asked for (turning them off process-wide would reach into the
    embedding application's own metrics)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        for family in self.registry.collect():  # fresh objects at each collect: safe to change
            family.samples = [sample for sample in family.samples if not sample.name.endswith("_created")]
            yield family


class _View:
    """Read access to one counter by label values: ``view[value]`` or ``view[(v1, v2)]``."""

    def __init__(self, metrics: Metrics, name: str, labels: tuple[str, ...]) -> None:
        self.metrics = metrics
        self.name = name
        self.labels = labels

    def __getitem__(self, key: str | tuple[str, ...]) -> int:
        values = (key,) if isinstance(key, str) else key
        return int(self.metrics.value(self.name, **dict(zip(self.labels, values, strict=True))))
