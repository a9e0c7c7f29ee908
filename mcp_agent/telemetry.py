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
extra) and ``telemetry.enabled`` is true; otherwise ``RunTrace.start`` returns ``NO_TRACE``, whose
methods do nothing, and OpenTelemetry is not even imported here.

**Notes.** What only a provider or a tool connection knows (the server called, streamed or not,
each retry, the MCP transport) it says with ``note_model_call``, ``note_retry`` and
``note_tool_transport``, into the notes of the call in progress (a context variable). The loop
reads a model call's notes for its event too (``ModelCallEnded.streamed``/``retries``, which the
metrics count), so model-call notes are kept whether or not anything is traced.

Content (prompts, answers, tool arguments and results) goes on the spans only with
``telemetry.captureContent``, every string redacted (``_redact.redact_text``).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from . import _telemetry_attrs as attrs
from ._redact import redact_text
from .messages import Message, ToolCall, ToolSpec, Turn, Usage

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

    from .config import AgentConfig, TelemetryConfig

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

AGENT_NAME = "mcp_agent"
DEFAULT_SERVICE_NAME = "mcp-agent"


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


def _quiet(fallback: Callable[[], T]) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Tracing never breaks a run: an error while making or ending a span (a broken exporter or
    span processor) is logged, and ``fallback()`` (a no-op) is returned instead."""

    def decorate(method: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(method)
        def quiet(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return method(*args, **kwargs)
            except Exception:
                logger.warning("tracing: %s failed; the run goes on", method.__qualname__, exc_info=True)
                return fallback()

        return quiet

    return decorate


def _nothing() -> None:
    return None


# --------------------------------------------------------------------------------------------
# notes: what providers and tool connections tell about the call in progress


@dataclass
class ModelNotes:
    """What the provider said about one model call (the last attempt's server, with fallbacks)."""

    api: str | None = None
    url: str | None = None
    model: str | None = None
    stream: bool | None = None
    retries: int = 0
    span: Span | None = None


@dataclass
class ToolNotes:
    """What the tool connection said about one tool call."""

    transport: str | None = None
    url: str | None = None
    protocol_version: str | None = None
    session_id: str | None = None


_model_notes: ContextVar[ModelNotes | None] = ContextVar("mcp_agent_model_notes", default=None)
_tool_notes: ContextVar[ToolNotes | None] = ContextVar("mcp_agent_tool_notes", default=None)


def note_model_call(*, api: str, url: str, model: str | None = None, stream: bool | None = None) -> None:
    """Called by a provider as it sends a request: the wire API, the URL, the model, streamed or not."""
    notes = _model_notes.get()
    if notes is not None:
        notes.api, notes.url, notes.stream = api, url, stream
        notes.model = model or notes.model


def note_retry(error: BaseException, wait: float) -> None:
    """Called by the retry policy before it waits to try a model call again."""
    notes = _model_notes.get()
    if notes is None:
        return
    notes.retries += 1
    if notes.span is not None:
        _retry_event(notes.span, error, wait, notes.retries)


@_quiet(_nothing)
def _retry_event(span: Span, error: BaseException, wait: float, number: int) -> None:
    attributes: dict[str, str | int | float] = {
        "error.type": attrs.error_type(error),
        "mcp_agent.retry.number": number,
        "mcp_agent.retry.wait_s": wait,
    }
    span.add_event("retry", attributes)


def note_tool_transport(
    *,
    transport: str,
    url: str | None = None,
    protocol_version: str | None = None,
    session_id: str | None = None,
) -> None:
    """Called by a tool connection as it makes a call: ``pipe`` (stdio) or ``tcp`` (HTTP), and for
    HTTP the server's URL; the MCP protocol version and session id when known."""
    notes = _tool_notes.get()
    if notes is not None:
        notes.transport, notes.url = transport, url
        notes.protocol_version, notes.session_id = protocol_version, session_id


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
    from . import __version__

    found = provider.get_tracer("mcp_agent", __version__)
    _cached = (provider, found)
    return found


# --------------------------------------------------------------------------------------------
# the spans of one run: the no-op bases (NO_TRACE), then the recording ones


class ModelSpan:
    """One model call: its notes, and (when traced) its ``chat`` span. This base only keeps notes."""

    def __init__(self) -> None:
        self.notes = ModelNotes()
        self._token: Token[ModelNotes | None] | None = None

    def current(self) -> ModelSpan:
        """``with span.current():`` the provider's notes go to this call (and when traced, its
        span is the current one). A context manager object, not a generator: it runs per call."""
        return self

    def __enter__(self) -> ModelNotes:
        self._token = _model_notes.set(self.notes)
        return self.notes

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _model_notes.reset(self._token)
            self._token = None

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

    @staticmethod
    def start(
        *,
        run_id: str,
        session_id: str | None = None,
        caller: str | None = None,
        query: str = "",
        settings: TraceSettings | None = None,
        run_span: bool = True,
    ) -> RunTrace:
        """The trace of a run starting now: ``NO_TRACE`` unless traced. Without ``run_span`` only
        tool spans are made, under the current span (the gateway's ``exposeTools`` calls)."""
        settings = settings or DEFAULT_SETTINGS
        if not settings.enabled:
            return NO_TRACE
        found = tracer()
        if found is None:
            return NO_TRACE
        return _recording(found, settings, run_id, session_id, caller, query, run_span)

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


def _no_trace() -> RunTrace:
    return NO_TRACE


def _null_tool_span() -> ToolSpan:
    return NULL_TOOL_SPAN


class _RecordingModelSpan(ModelSpan):
    def __init__(self, span: Span, settings: TraceSettings) -> None:
        super().__init__()
        self.span = self.notes.span = span
        self.settings = settings
        self._used: AbstractContextManager[object] | None = None

    def __enter__(self) -> ModelNotes:
        from opentelemetry.trace import use_span

        self._used = use_span(self.span, record_exception=False, set_status_on_exception=False)
        self._used.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        used, self._used = self._used, None
        if used is not None:
            used.__exit__(None, None, None)

    @_quiet(_nothing)
    def ended(
        self,
        turn: Turn | None,
        *,
        error: str = "",
        exc: BaseException | None = None,
        ttft_ms: float | None = None,
    ) -> None:
        try:
            self._describe(turn, error, exc, ttft_ms)
        finally:
            self.span.end()

    def _describe(
        self, turn: Turn | None, error: str, exc: BaseException | None, ttft_ms: float | None
    ) -> None:
        from opentelemetry.trace import StatusCode

        span, notes, settings = self.span, self.notes, self.settings
        found: dict[str, Any] = {"gen_ai.request.stream": notes.stream}
        # what the provider said, where it differs from what the span was started with (fallbacks)
        if notes.model != settings.request_model:
            found["gen_ai.request.model"] = notes.model
        if notes.url is not None:
            server = attrs.server_of(notes.url)
            if server != attrs.server_of(settings.endpoint):
                found.update(server)
            name = attrs.provider_name(notes.api, notes.url)
            if name != attrs.provider_name(settings.api, settings.endpoint):
                found["gen_ai.provider.name"] = name
        if notes.retries:
            found["mcp_agent.model.retries"] = notes.retries
        if turn is not None:
            found.update(
                {
                    "gen_ai.response.model": turn.model,
                    "gen_ai.response.finish_reasons": [turn.finish_reason or "stop"],
                    "gen_ai.usage.input_tokens": turn.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": turn.usage.completion_tokens,
                    "mcp_agent.model.tool_calls": len(turn.tool_calls),
                }
            )
            if turn.request_id:
                found["mcp_agent.model.request_id"] = turn.request_id
            if ttft_ms is not None and notes.stream:
                found["gen_ai.response.time_to_first_chunk"] = ttft_ms / 1000
            if self.settings.capture_content:
                found["gen_ai.output.messages"] = attrs.output_messages(turn)
        else:
            kind = attrs.error_type(exc, _cut_off_type(error))
            found["error.type"] = kind
            span.set_status(StatusCode.ERROR, redact_text(error)[:500])
        span.set_attributes(attrs.drop_none(found))


class _RecordingToolSpan(ToolSpan):
    def __init__(self, span: Span, settings: TraceSettings) -> None:
        self.span = span
        self.settings = settings
        self.notes = ToolNotes()

    @contextmanager
    def current(self) -> Iterator[object]:
        from opentelemetry.trace import use_span

        token = _tool_notes.set(self.notes)
        try:
            with use_span(self.span, record_exception=False, set_status_on_exception=False):
                yield self.span
        finally:
            _tool_notes.reset(token)

    @_quiet(_nothing)
    def event(self, name: str, attributes: Mapping[str, str | bool | int | float]) -> None:
        self.span.add_event(name, dict(attributes))

    @_quiet(_nothing)
    def ended(self, *, verdict: str, ok: bool, is_error: bool, text: str, ms: float) -> None:
        try:
            self._describe(verdict, ok, is_error, text, ms)
        finally:
            self.span.end()

    def _describe(self, verdict: str, ok: bool, is_error: bool, text: str, ms: float) -> None:
        from opentelemetry.trace import StatusCode

        notes = self.notes
        found: dict[str, Any] = {
            "mcp_agent.tool.verdict": verdict,
            "mcp_agent.tool.ok": ok,
            "mcp_agent.tool.is_error": is_error,
            "mcp_agent.tool.duration_ms": round(ms, 3),
            "network.transport": notes.transport,
            "mcp.protocol.version": notes.protocol_version,
            "mcp.session.id": notes.session_id,
        }
        found.update(attrs.server_of(notes.url))
        if is_error:
            found["error.type"] = "tool_error" if verdict == "run" else verdict
            self.span.set_status(
                StatusCode.ERROR, redact_text(text.splitlines()[0] if text else verdict)[:500]
            )
        if self.settings.capture_content and verdict in ("run", "shared"):
            found["gen_ai.tool.call.result"] = attrs.redacted_text(text)
        self.span.set_attributes(attrs.drop_none(found))


class _Recording(RunTrace):
    """The recording trace of one run."""

    def __init__(
        self,
        tracer: Tracer,
        settings: TraceSettings,
        run_id: str,
        session_id: str | None,
        caller: str | None,
        query: str,
        run_span: bool,
    ) -> None:
        from opentelemetry.trace import SpanKind

        self.tracer = tracer
        self.settings = settings
        self.common = attrs.drop_none({"gen_ai.conversation.id": session_id})
        """On every span of the run (the run id only on the run's span: the trace ties the rest)."""
        self.span: Span | None = None
        if not run_span:
            return
        found: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": attrs.provider_name(settings.api, settings.endpoint),
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.agent.description": settings.agent_description,
            "gen_ai.request.model": settings.request_model,
            "mcp_agent.caller": caller,
            "mcp_agent.run.id": run_id,
            **self.common,
            **attrs.server_of(settings.endpoint),
        }
        if settings.capture_content:
            found["gen_ai.input.messages"] = attrs.text_messages("user", query)
        self.span = tracer.start_span(
            f"invoke_agent {AGENT_NAME}", kind=SpanKind.INTERNAL, attributes=attrs.drop_none(found)
        )

    @property
    def recording(self) -> bool:
        return True

    def _parent(self) -> Context | None:
        """The run span as the parent of a call's span (None, the current context: no run span).

        Explicit, so the run span need not be current anywhere: a call's span is, while it runs."""
        if self.span is None:
            return None
        from opentelemetry.trace import set_span_in_context

        return set_span_in_context(self.span)

    @_quiet(ModelSpan)
    def model_call(
        self,
        messages: Sequence[Message],
        *,
        round: int,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ModelSpan:
        from opentelemetry.trace import SpanKind

        settings = self.settings
        model = settings.request_model
        found: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": attrs.provider_name(settings.api, settings.endpoint),
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": max_output_tokens,
            "gen_ai.request.temperature": temperature,
            "mcp_agent.round": round,
            **self.common,
            **attrs.server_of(settings.endpoint),
        }
        if settings.capture_content:
            found["gen_ai.input.messages"] = attrs.input_messages(messages)
            found["gen_ai.system_instructions"] = attrs.system_instructions(messages)
        span = self.tracer.start_span(
            f"chat {model}" if model else "chat",
            context=self._parent(),
            kind=SpanKind.CLIENT,
            attributes=attrs.drop_none(found),
        )
        notes_span = _RecordingModelSpan(span, settings)
        notes_span.notes.model = model
        return notes_span

    @_quiet(_null_tool_span)
    def tool_call(self, call: ToolCall, spec: ToolSpec | None, *, round: int) -> ToolSpan:
        from opentelemetry.trace import SpanKind

        found: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "mcp_agent.round": round,
            **self.common,
        }
        if spec is not None:
            found.update(
                {
                    "gen_ai.tool.description": spec.description[:1000] or None,
                    "mcp.method.name": "tools/call",
                    "mcp_agent.tool.server": spec.server or None,
                    "mcp_agent.tool.mcp_name": spec.mcp_name or None,
                }
            )
        if self.settings.capture_content:
            found["gen_ai.tool.call.arguments"] = attrs.redacted_json(dict(call.arguments))
        span = self.tracer.start_span(
            f"execute_tool {call.name}",
            context=self._parent(),
            kind=SpanKind.INTERNAL,
            attributes=attrs.drop_none(found),
        )
        return _RecordingToolSpan(span, self.settings)

    @_quiet(_nothing)
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
        span = self.span
        if span is None:
            return
        try:
            self._describe(reason, ok, detail, rounds, tool_calls, usage, early_stopped, answer, error)
        finally:
            span.end()

    def _describe(
        self,
        reason: str,
        ok: bool,
        detail: str,
        rounds: int,
        tool_calls: int,
        usage: Usage | None,
        early_stopped: bool,
        answer: str,
        error: BaseException | None,
    ) -> None:
        from opentelemetry.trace import StatusCode

        span = self.span
        assert span is not None
        usage = usage or Usage()
        found: dict[str, Any] = {
            "mcp_agent.termination_reason": reason,
            "mcp_agent.early_stopped": early_stopped,
            "mcp_agent.rounds": rounds,
            "mcp_agent.tool_calls": tool_calls,
            "gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens,
        }
        if self.settings.capture_content and answer:
            found["gen_ai.output.messages"] = attrs.text_messages("assistant", answer)
        if not ok:
            found["error.type"] = reason
            span.set_status(StatusCode.ERROR, redact_text(detail)[:500])
        if error is not None and not _is_cancellation(error):
            span.record_exception(error)
        span.set_attributes(found)


@_quiet(_no_trace)
def _recording(
    tracer: Tracer,
    settings: TraceSettings,
    run_id: str,
    session_id: str | None,
    caller: str | None,
    query: str,
    run_span: bool,
) -> RunTrace:
    return _Recording(tracer, settings, run_id, session_id, caller, query, run_span)


def _cut_off_type(error: str) -> str:
    if error.startswith("cancelled"):
        return "cancelled"
    if error.startswith("timed out"):
        return "timeout"
    return "_OTHER"


def _is_cancellation(exc: BaseException) -> bool:
    import anyio

    return isinstance(exc, anyio.get_cancelled_exc_class())


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


# --------------------------------------------------------------------------------------------
# a TracerProvider from the environment


_installed: TracerProvider | None = None


def setup_tracing(settings: TelemetryConfig | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Install a TracerProvider exporting over OTLP/HTTP when the environment asks for one.

    Only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) is set, the ``[otel]``
    extra is installed, ``telemetry.enabled`` is true, ``OTEL_SDK_DISABLED`` is not ``true``,
    ``OTEL_TRACES_EXPORTER`` is unset or ``otlp``, and no TracerProvider is installed yet: the
    embedding application's own provider is never replaced. The exporter, sampler and resource
    read the other ``OTEL_*`` variables themselves (headers, timeout, compression,
    ``OTEL_TRACES_SAMPLER``, ``OTEL_RESOURCE_ATTRIBUTES``). ``service.name`` is
    ``OTEL_SERVICE_NAME``, else ``telemetry.serviceName``, else ``mcp-agent``.

    Returns:
        Whether a provider was installed now.
    """
    global _installed
    env = os.environ if environ is None else environ
    if settings is not None and not settings.enabled:
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporter_name != "otlp":
        logger.debug("OTEL_TRACES_EXPORTER=%s: no tracer provider set up here", exporter_name)
        return False
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol.strip().lower() != "http/protobuf":
        logger.warning(
            "traces: OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported (only http/protobuf); no traces",
            protocol,
        )
        return False
    from opentelemetry import trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False  # the application installed its own: never replace it
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "traces: OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is missing; "
            "install mcp-gateway-agent[otel] to send traces"
        )
        return False
    name = (
        env.get("OTEL_SERVICE_NAME") or (settings.service_name if settings else None) or DEFAULT_SERVICE_NAME
    )
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:  # lost a race with another installer
        provider.shutdown()
        return False
    _installed = provider
    logger.info("traces go to %s over OTLP/HTTP (service.name %s)", redact_text(endpoint), name)
    return True


async def flush_tracing(timeout_seconds: float = 5.0) -> None:
    """Export what is buffered, when ``setup_tracing`` installed the provider (before shutdown)."""
    provider = _installed
    if provider is None:
        return
    import anyio

    with anyio.move_on_after(timeout_seconds + 1, shield=True):  # also while the agent is cancelled
        await anyio.to_thread.run_sync(provider.force_flush, int(timeout_seconds * 1000))
