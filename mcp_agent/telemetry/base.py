"""OpenTelemetry traces of a run, by the GenAI semantic conventions; a cheap no-op when not traced.

Each run is one span tree::

    invoke_agent mcp_agent          INTERNAL  the run: termination reason, rounds, usage, conversation id
    ├── chat {model}                CLIENT    each model call: request, response, usage, finish reason, server
    └── execute_tool {name}         INTERNAL  each tool call: name, call id, server, MCP attributes, isError
        └── MCP send tools/call …   CLIENT    the MCP SDK's own span; its context reaches the tool server
                                              in ``_meta`` (and in ``traceparent`` headers over HTTP)

The run span is the child of whatever is current when the run starts: over MCP the SDK's server
span of the ``agent_query`` call (whose parent is the caller's ``_meta.traceparent``, or its HTTP
``traceparent`` header: ``continued_from``), over REST the caller's ``traceparent`` header.

**Off costs next to nothing.** Spans are made only when a TracerProvider is installed (by the
embedding application, or by ``setup_tracing`` from the ``OTEL_*`` variables with the ``[otel]``
extra) and ``telemetry.enabled`` is true; otherwise ``setup.start_trace`` returns ``NO_TRACE``, whose
methods do nothing, and OpenTelemetry is not even imported here.

**Notes.** What only a provider or a tool connection knows (the server called, streamed or not,
each retry, the MCP transport) it writes into the notes of the call in progress. A model call's
notes are handed to the provider explicitly, on the request (``ModelRequest.notes``: the loop
puts ``ModelSpan.notes`` there; the provider calls ``notes.called``, its retry policy
``notes.retried``); a call made outside a run writes into ``NO_NOTES``, which keeps nothing.
The loop reads a model call's notes for its event too (``ModelCallEnded.streamed``/``retries``,
which the metrics count), so model-call notes are kept whether or not anything is traced. A tool
connection says its transport with ``note_tool_transport``, into the notes of the tool call in
progress (a context variable the tool span sets).

Content (prompts, answers, tool arguments and results) goes on the spans only with
``telemetry.captureContent``, every string redacted (``_redact.redact_text``).

This module is the seam the loop, providers, tools and gateway see: the no-op bases. The
recording spans live in ``telemetry/spans.py`` with their attributes (imported only once
something is traced); choosing between them when a run starts (``start_trace``) and the provider
set up from ``OTEL_*`` live in ``telemetry/setup.py``; the logs in ``telemetry/logs.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..messages import Message, ToolCall, ToolSpec, Turn, Usage

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from ..config import AgentConfig

AGENT_NAME = "mcp_agent"


@dataclass(frozen=True)
class TraceSettings:
    """What a run's spans say about the agent, and whether they carry content.

    Attributes:
        enabled: record spans at all (``telemetry.enabled``).
        capture_content: put prompts, answers, tool arguments and results on spans, redacted.
        agent_description: ``gen_ai.agent.description`` (``gateway.description``).
        request_model: the configured model (``llm.model``): ``chat {model}``'s name.
        api: the configured wire API (``openai``, ``anthropic``, ``gemini``).
        endpoint: the configured model server's URL.
    """

    enabled: bool = True
    capture_content: bool = False
    agent_description: str | None = None
    request_model: str | None = None
    api: str | None = None
    endpoint: str | None = None

    @classmethod
    def from_config(cls, config: AgentConfig) -> TraceSettings:
        llm = config.llm
        return cls(
            enabled=config.telemetry.enabled,
            capture_content=config.telemetry.capture_content,
            agent_description=config.gateway.description or None,
            request_model=llm.model,
            api=llm.provider if llm.provider != "auto" else None,
            endpoint=llm.endpoint,
        )


DEFAULT_SETTINGS = TraceSettings()


# --------------------------------------------------------------------------------------------
# notes: what providers and tool connections tell about the call in progress


@dataclass(eq=False)
class ModelNotes:
    """What the provider said about one model call (the last attempt's server, with fallbacks).

    One object per call, compared by identity."""

    api: str | None = None
    url: str | None = None
    model: str | None = None
    stream: bool | None = None
    retries: int = 0

    def called(self, *, api: str, url: str, model: str | None = None, stream: bool | None = None) -> None:
        """Said by a provider as it sends a request: the wire API, the URL, the model, streamed or not."""
        self.api, self.url, self.stream = api, url, stream
        self.model = model or self.model

    def retried(self, error: BaseException, wait: float) -> None:
        """Said by the retry policy before it waits to try the call again."""
        self.retries += 1


class _Unheard(ModelNotes):
    """The notes of a model call made outside a run (``doctor``'s checks, a provider used alone):
    nobody reads them, so nothing is kept (one shared instance stays empty)."""

    def called(self, *, api: str, url: str, model: str | None = None, stream: bool | None = None) -> None:
        pass

    def retried(self, error: BaseException, wait: float) -> None:
        pass


NO_NOTES: ModelNotes = _Unheard()
"""The notes of a request that carries none (``ModelRequest``'s default)."""


@dataclass
class ToolNotes:
    """What the tool connection said about one tool call."""

    transport: str | None = None
    url: str | None = None
    protocol_version: str | None = None


_tool_notes: ContextVar[ToolNotes | None] = ContextVar("mcp_agent_tool_notes", default=None)


def note_tool_transport(
    *, transport: str, url: str | None = None, protocol_version: str | None = None
) -> None:
    """Called by a tool connection as it makes a call: ``pipe`` (stdio) or ``tcp`` (HTTP), for HTTP
    the server's URL, and the MCP protocol version when known (the SDK does not tell the MCP
    session id, so ``mcp.session.id`` is not recorded)."""
    notes = _tool_notes.get()
    if notes is not None:
        notes.transport, notes.url, notes.protocol_version = transport, url, protocol_version


# --------------------------------------------------------------------------------------------
# the tracer


_cached: tuple[object, Tracer] | None = None


def tracer() -> Tracer | None:
    """mcp_agent's tracer, or None while no TracerProvider is installed (then nothing is traced)."""
    global _cached
    if "opentelemetry.trace" not in sys.modules:  # nobody imported it: nobody installed a provider
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    from .._version import __version__

    found = provider.get_tracer("mcp_agent", __version__)
    _cached = (provider, found)
    return found


# --------------------------------------------------------------------------------------------
# the spans of one run: the no-op bases (NO_TRACE), then the recording ones


class ModelSpan:
    """One model call: its notes, and (when traced) its ``chat`` span. This base only keeps notes.

    The loop hands ``notes`` to the provider on the request (``ModelRequest.notes``)."""

    def __init__(self) -> None:
        self.notes = ModelNotes()

    def current(self) -> AbstractContextManager[object]:
        """``with span.current():`` when traced, the call's span is the current one (the HTTP
        requests made inside are its children)."""
        return nullcontext()

    def ended(
        self,
        turn: Turn | None,
        *,
        error: str = "",
        exc: BaseException | None = None,
        ttft_ms: float | None = None,
    ) -> None:
        """The call is over: ``turn`` when it answered, else ``error`` (and the exception)."""


class ToolSpan:
    """One tool call's ``execute_tool`` span; this base records nothing."""

    def current(self) -> AbstractContextManager[object]:
        """Inside: the span is current (an MCP call made inside carries its context)."""
        return nullcontext()

    def event(self, name: str, attributes: Mapping[str, str | bool | int | float]) -> None:
        """Something happened during the call (an approval asked, answered)."""

    def ended(self, *, verdict: str, ok: bool, is_error: bool, text: str, ms: float) -> None:
        """The call is over: the guards' ``verdict``, its outcome and the text the model reads."""


NULL_TOOL_SPAN = ToolSpan()


class RunTrace:
    """The spans of one run. This base records nothing: it is ``NO_TRACE``, for untraced runs."""

    @property
    def recording(self) -> bool:
        return False

    def model_call(
        self,
        messages: Sequence[Message],
        *,
        round: int,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ModelSpan:
        """A model call starting now, with these messages."""
        return ModelSpan()

    def tool_call(self, call: ToolCall, spec: ToolSpec | None, *, round: int) -> ToolSpan:
        """A tool call starting now (``spec`` is None for an unknown tool)."""
        return NULL_TOOL_SPAN

    def ended(
        self,
        *,
        reason: str,
        ok: bool,
        detail: str = "",
        rounds: int = 0,
        tool_calls: int = 0,
        usage: Usage | None = None,
        early_stopped: bool = False,
        answer: str = "",
        error: BaseException | None = None,
    ) -> None:
        """The run is over (called once, where ``RunEnded`` is emitted)."""


NO_TRACE = RunTrace()


# --------------------------------------------------------------------------------------------
# context propagation


def _has_traceparent(carrier: Mapping[str, Any]) -> bool:
    try:
        return bool(carrier.get("traceparent"))
    except Exception:  # a carrier of an odd shape carries nothing we can read
        return False


@contextmanager
def continued_from(carrier: Mapping[str, Any] | None) -> Iterator[None]:
    """Inside: the W3C trace context in ``carrier`` (HTTP headers, MCP ``_meta``) is the parent of
    new spans, unless a span is current already (an ASGI instrumentation's server span continued
    the caller's trace), the carrier has none, or nothing is traced."""
    if not carrier or not _has_traceparent(carrier) or tracer() is None:
        yield
        return
    from opentelemetry import context, propagate, trace

    if trace.get_current_span().get_span_context().is_valid:
        yield
        return
    try:
        found = propagate.extract(carrier)
    except Exception:  # a malformed header is ignored, never an error of the request
        found = None
    if found is None or not trace.get_current_span(found).get_span_context().is_valid:
        yield
        return
    token = context.attach(found)
    try:
        yield
    finally:
        context.detach(token)


def inject_trace_headers(headers: MutableMapping[str, str]) -> None:
    """Put the current trace context into outgoing HTTP headers (``traceparent``, ``tracestate``)."""
    if tracer() is None:
        return
    from opentelemetry import propagate

    propagate.inject(headers)
