"""The recording spans of a run (``telemetry.py`` holds the no-op bases and the public face).

Loaded only once something is traced: ``RunTrace.start`` imports it when a TracerProvider is
installed. Every method that makes, changes or ends a span is ``_quiet``: an error there (a
broken exporter or span processor) is logged and the run goes on.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, StatusCode, set_span_in_context

from . import _telemetry_attrs as attrs
from ._redact import redact_text
from .messages import Message, ToolCall, ToolSpec, Turn, Usage
from .telemetry import (
    AGENT_NAME,
    NO_TRACE,
    NULL_TOOL_SPAN,
    ModelNotes,
    ModelSpan,
    RunTrace,
    ToolNotes,
    ToolSpan,
    TraceSettings,
    _tool_notes,
)

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

logger = logging.getLogger("mcp_agent.telemetry")

P = ParamSpec("P")
T = TypeVar("T")


_warned: set[str] = set()


def _quiet(fallback: Callable[[], T]) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Tracing never breaks a run: an error while making or ending a span (a broken exporter or
    span processor) is logged (a warning the first time for each method, then at debug level),
    and ``fallback()`` (a no-op) is returned instead."""

    def decorate(method: Callable[P, T]) -> Callable[P, T]:
        name = method.__qualname__

        @functools.wraps(method)
        def quiet(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return method(*args, **kwargs)
            except Exception:
                level = logging.DEBUG if name in _warned else logging.WARNING
                _warned.add(name)
                logger.log(level, "tracing: %s failed; the run goes on", name, exc_info=True)
                return fallback()

        return quiet

    return decorate


def _nothing() -> None:
    return None


def _no_trace() -> RunTrace:
    return NO_TRACE


def _null_tool_span() -> ToolSpan:
    return NULL_TOOL_SPAN


@_quiet(_nothing)
def retry_event(span: Span, error: BaseException, wait: float, number: int) -> None:
    attributes: dict[str, str | int | float] = {
        "error.type": attrs.error_type(error),
        "mcp_agent.retry.number": number,
        "mcp_agent.retry.wait_s": wait,
    }
    span.add_event("retry", attributes)


class _RecordingModelSpan(ModelSpan):
    def __init__(self, span: Span, settings: TraceSettings) -> None:
        super().__init__()
        self.span = self.notes.span = span
        self.settings = settings
        self._attached: object = None

    def __enter__(self) -> ModelNotes:
        self._attached = otel_context.attach(set_span_in_context(self.span))
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        attached, self._attached = self._attached, None
        if attached is not None:
            otel_context.detach(attached)  # type: ignore[arg-type]

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
        span, notes, settings = self.span, self.notes, self.settings
        found: dict[str, Any] = {}
        if notes.stream is not None:
            found["gen_ai.request.stream"] = notes.stream
        # what the provider said, where it differs from what the span was started with (fallbacks)
        if notes.model != settings.request_model and notes.model is not None:
            found["gen_ai.request.model"] = notes.model
        if notes.url is not None:
            found.update(_served_by(notes.api, notes.url, settings.api, settings.endpoint))
        if notes.retries:
            found["mcp_agent.model.retries"] = notes.retries
        if turn is not None:
            if turn.model:
                found["gen_ai.response.model"] = turn.model
            found["gen_ai.response.finish_reasons"] = [turn.finish_reason or "stop"]
            found["gen_ai.usage.input_tokens"] = turn.usage.prompt_tokens
            found["gen_ai.usage.output_tokens"] = turn.usage.completion_tokens
            found["mcp_agent.model.tool_calls"] = len(turn.tool_calls)
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
        span.set_attributes(found)


@functools.lru_cache(maxsize=64)
def _served_by(api: str | None, url: str, configured_api: str | None, endpoint: str | None) -> dict[str, Any]:
    """The attributes of the server that answered (``url``), where they differ from those of the
    configured one that the ``chat`` span started with: a fallback's server and provider name."""
    found: dict[str, Any] = {}
    server = attrs.server_of(url)
    if server != attrs.server_of(endpoint):
        found.update(server)
    name = attrs.provider_name(api, url)
    if name != attrs.provider_name(configured_api, endpoint):
        found["gen_ai.provider.name"] = name
    return found


class _RecordingToolSpan(ToolSpan):
    def __init__(self, span: Span, settings: TraceSettings) -> None:
        self.span = span
        self.settings = settings
        self.notes = ToolNotes()
        self._tokens: tuple[Any, object] | None = None

    def current(self) -> _RecordingToolSpan:
        """Inside: the call's notes go to this span, and the span is current."""
        return self

    def __enter__(self) -> Span:
        self._tokens = (_tool_notes.set(self.notes), otel_context.attach(set_span_in_context(self.span)))
        return self.span

    def __exit__(self, *exc: object) -> None:
        tokens, self._tokens = self._tokens, None
        if tokens is not None:
            otel_context.detach(tokens[1])  # type: ignore[arg-type]
            _tool_notes.reset(tokens[0])

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
        notes = self.notes
        found: dict[str, Any] = {
            "mcp_agent.tool.verdict": verdict,
            "mcp_agent.tool.ok": ok,
            "mcp_agent.tool.is_error": is_error,
            "mcp_agent.tool.duration_ms": round(ms, 3),
        }
        if notes.transport is not None:  # the call went to an MCP server (not an in-process tool)
            found["mcp.method.name"] = "tools/call"
            found["network.transport"] = notes.transport
            if notes.protocol_version is not None:
                found["mcp.protocol.version"] = notes.protocol_version
            if notes.url is not None:
                found.update(attrs.server_of(notes.url))
        if is_error:
            found["error.type"] = "tool_error" if verdict == "run" else verdict
            self.span.set_status(
                StatusCode.ERROR, redact_text(text.splitlines()[0] if text else verdict)[:500]
            )
        if self.settings.capture_content and verdict in ("run", "shared"):
            found["gen_ai.tool.call.result"] = attrs.redacted_text(text)
        self.span.set_attributes(found)


@functools.lru_cache(maxsize=16)
def _bases(settings: TraceSettings) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """What every ``invoke_agent`` and every ``chat`` span starts with, worked out once per settings.

    The run span is an in-process agent's: the model server's address is on the ``chat`` spans."""
    model = {"gen_ai.request.model": settings.request_model} if settings.request_model else {}
    provider = attrs.provider_name(settings.api, settings.endpoint)
    run: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider,
        "gen_ai.agent.name": AGENT_NAME,
        **model,
    }
    if settings.agent_description:
        run["gen_ai.agent.description"] = settings.agent_description
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        **model,
        **attrs.server_of(settings.endpoint),
    }
    return MappingProxyType(run), MappingProxyType(chat)


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
        self.tracer = tracer
        self.settings = settings
        self.common: dict[str, Any] = {"gen_ai.conversation.id": session_id} if session_id else {}
        """On every span of the run (the run id only on the run's span: the trace ties the rest)."""
        run_base, chat_base = _bases(settings)
        self.chat_common = {**chat_base, **self.common}
        """What every ``chat`` span of the run starts with (worked out once a run)."""
        self.span: Span | None = None
        self.parent: Context | None = None
        """The run span as the parent of a call's span (None: the current context, no run span).
        Explicit, so the run span need not be current anywhere: a call's span is, while it runs."""
        if not run_span:
            return
        found: dict[str, Any] = {**run_base, "mcp_agent.run.id": run_id, **self.common}
        if caller is not None:
            found["mcp_agent.caller"] = caller
        if settings.capture_content:
            found["gen_ai.input.messages"] = attrs.text_messages("user", query)
        self.span = tracer.start_span(f"invoke_agent {AGENT_NAME}", kind=SpanKind.INTERNAL, attributes=found)
        self.parent = set_span_in_context(self.span)

    @property
    def recording(self) -> bool:
        return True

    @_quiet(ModelSpan)
    def model_call(
        self,
        messages: Sequence[Message],
        *,
        round: int,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ModelSpan:
        settings = self.settings
        model = settings.request_model
        found: dict[str, Any] = {**self.chat_common, "mcp_agent.round": round}
        if max_output_tokens is not None:
            found["gen_ai.request.max_tokens"] = max_output_tokens
        if temperature is not None:
            found["gen_ai.request.temperature"] = temperature
        if settings.capture_content:
            found["gen_ai.input.messages"] = attrs.input_messages(messages)
            instructions = attrs.system_instructions(messages)
            if instructions is not None:
                found["gen_ai.system_instructions"] = instructions
        span = self.tracer.start_span(
            f"chat {model}" if model else "chat", context=self.parent, kind=SpanKind.CLIENT, attributes=found
        )
        notes_span = _RecordingModelSpan(span, settings)
        notes_span.notes.model = model
        return notes_span

    @_quiet(_null_tool_span)
    def tool_call(self, call: ToolCall, spec: ToolSpec | None, *, round: int) -> ToolSpan:
        found: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "mcp_agent.round": round,
            **self.common,
        }
        if spec is not None:
            if spec.description:
                found["gen_ai.tool.description"] = spec.description[:1000]
            if spec.server:
                found["mcp_agent.tool.server"] = spec.server
            if spec.mcp_name:
                found["mcp_agent.tool.mcp_name"] = spec.mcp_name
        if self.settings.capture_content:
            found["gen_ai.tool.call.arguments"] = attrs.redacted_json(dict(call.arguments))
        span = self.tracer.start_span(
            f"execute_tool {call.name}", context=self.parent, kind=SpanKind.INTERNAL, attributes=found
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
def recording(
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
