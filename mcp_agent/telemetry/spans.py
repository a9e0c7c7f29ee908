"""The recording spans of a run and their attributes (``telemetry/base.py`` holds the no-op bases).

Loaded only once something is traced: ``setup.start_trace`` imports it when a TracerProvider is
installed. Every method that makes, changes or ends a span is ``_quiet``: an error there (a
broken exporter or span processor) is logged and the run goes on.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, StatusCode, set_span_in_context

from .._plural import counted
from .._redact import redact_text
from ..messages import Message, ToolCall, ToolSpec, Turn, Usage
from .base import (
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

logger = logging.getLogger("mcp_agent.telemetry.base")

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


class _RecordingNotes(ModelNotes):
    """A traced call's notes: each retry is also an event on its ``chat`` span."""

    def __init__(self, span: Span) -> None:
        super().__init__()
        self.span = span

    def retried(self, error: BaseException, wait: float) -> None:
        super().retried(error, wait)
        self._retry_event(error, wait)

    @_quiet(_nothing)
    def _retry_event(self, error: BaseException, wait: float) -> None:
        attributes: dict[str, str | int | float] = {
            "error.type": error_type(error),
            "mcp_agent.retry.number": self.retries,
            "mcp_agent.retry.wait_s": wait,
        }
        self.span.add_event("retry", attributes)


class _RecordingModelSpan(ModelSpan):
    def __init__(self, span: Span, settings: TraceSettings) -> None:
        super().__init__()
        self.span = span
        self.notes = _RecordingNotes(span)
        self.settings = settings
        self._attached: object = None

    def current(self) -> _RecordingModelSpan:
        """Inside: the span is current. A context manager object, not a generator: it runs per call."""
        return self

    def __enter__(self) -> Span:
        self._attached = otel_context.attach(set_span_in_context(self.span))
        return self.span

    def __exit__(self, *exc: object) -> None:
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
                found["gen_ai.output.messages"] = output_messages(turn)
        else:
            kind = error_type(exc, _cut_off_type(error))
            found["error.type"] = kind
            span.set_status(StatusCode.ERROR, redact_text(error)[:500])
        span.set_attributes(found)


@functools.lru_cache(maxsize=64)
def _served_by(api: str | None, url: str, configured_api: str | None, endpoint: str | None) -> dict[str, Any]:
    """The attributes of the server that answered (``url``), where they differ from those of the
    configured one that the ``chat`` span started with: a fallback's server and provider name."""
    found: dict[str, Any] = {}
    server = server_of(url)
    if server != server_of(endpoint):
        found.update(server)
    name = provider_name(api, url)
    if name != provider_name(configured_api, endpoint):
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
                found.update(server_of(notes.url))
        if is_error:
            found["error.type"] = "tool_error" if verdict == "run" else verdict
            self.span.set_status(
                StatusCode.ERROR, redact_text(text.splitlines()[0] if text else verdict)[:500]
            )
        if self.settings.capture_content and verdict in ("run", "shared"):
            found["gen_ai.tool.call.result"] = redacted_text(text)
        self.span.set_attributes(found)


@functools.lru_cache(maxsize=16)
def _bases(settings: TraceSettings) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """What every ``invoke_agent`` and every ``chat`` span starts with, worked out once per settings.

    The run span is an in-process agent's: the model server's address is on the ``chat`` spans."""
    model = {"gen_ai.request.model": settings.request_model} if settings.request_model else {}
    provider = provider_name(settings.api, settings.endpoint)
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
        **server_of(settings.endpoint),
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
            found["gen_ai.input.messages"] = text_messages("user", query)
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
            found["gen_ai.input.messages"] = input_messages(messages)
            instructions = system_instructions(messages)
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
            found["gen_ai.tool.call.arguments"] = redacted_json(dict(call.arguments))
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
            found["gen_ai.output.messages"] = text_messages("assistant", answer)
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


# Pure parts of the traces: span attributes by the OpenTelemetry GenAI semantic
# conventions, and the conversation as the conventions' message JSON, with secrets redacted.
#
# Nothing here imports OpenTelemetry: every function returns plain values (attribute dicts whose
# values are str, bool, int, float or lists of str), so all of it is table-tested without the SDK.
#
# - ``provider_name``: ``gen_ai.provider.name`` from the wire API and the endpoint's host (a
#   well-known value for the hosted APIs, else the API's flavour: ``openai`` for Chat Completions);
# - ``server_of``: ``server.address`` and ``server.port`` of a URL;
# - ``input_messages`` / ``output_messages`` / ``system_instructions``: the opt-in content
#   attributes (``telemetry.captureContent``), as JSON text, each text part redacted;
# - ``redacted_json``: any JSON value as JSON text with every string redacted.
HOSTED: tuple[tuple[str, str], ...] = (
    ("api.anthropic.com", "anthropic"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("openai.azure.com", "azure.ai.openai"),
    ("api.openai.com", "openai"),
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.moonshot.ai", "moonshot_ai"),
    ("api.cohere.com", "cohere"),
)
"""Host suffix → the conventions' well-known ``gen_ai.provider.name``."""

API_FLAVOUR = {"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}
"""Our wire APIs → the provider name whose telemetry flavour they follow."""

MAX_TEXT_CHARS = 16_000
"""A content part longer than this is cut (with a note): spans are not transcripts."""


@functools.lru_cache(maxsize=256)
@functools.lru_cache(maxsize=256)
def provider_name(api: str | None, url: str | None) -> str:
    """``gen_ai.provider.name`` for a call to ``url`` over the ``api`` wire format.

    A hosted API gets its well-known value (``api.groq.com`` → ``groq``); any other server
    (Ollama, vLLM, llama.cpp, LM Studio) the flavour of the API it speaks, as the conventions
    advise for servers reached through another provider's API: ``openai`` for Chat Completions.
    """
    host = (urlsplit(url).hostname or "").lower() if url else ""
    for suffix, name in HOSTED:
        if host == suffix or host.endswith("." + suffix):
            return name
    return API_FLAVOUR.get(api or "openai", api or "openai")


def server_of(url: str | None) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of ``url`` (the scheme's default port when it has none)."""
    return dict(_server_of(url))


@functools.lru_cache(maxsize=256)
def _server_of(url: str | None) -> tuple[tuple[str, Any], ...]:
    return tuple(_parse_server(url).items())


def _parse_server(url: str | None) -> dict[str, Any]:
    if not url:
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return {}
    if not parts.hostname:
        return {}
    attributes: dict[str, Any] = {"server.address": parts.hostname}
    if port:
        attributes["server.port"] = port
    return attributes


def error_type(exc: BaseException | None, fallback: str = "_OTHER") -> str:
    """A low-cardinality ``error.type``: the HTTP status when there is one, else the class name."""
    if exc is None:
        return fallback
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        return str(status)
    return type(exc).__name__


def redacted_text(text: str) -> str:
    """``text`` redacted and cut to ``MAX_TEXT_CHARS`` (with a note of what was cut)."""
    text = redact_text(text)
    if len(text) > MAX_TEXT_CHARS:
        return f"{text[:MAX_TEXT_CHARS]}… [{counted(len(text) - MAX_TEXT_CHARS, 'character')} cut]"
    return text


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redacted_text(value)
    if isinstance(value, Mapping):
        return {str(key): _redact_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(item) for item in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def redacted_json(value: Any) -> str:
    """``value`` as compact JSON text, every string in it redacted and cut to ``MAX_TEXT_CHARS``."""
    return _dumps(_redact_value(value))


def _call_part(call: ToolCall) -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": call.id,
        "name": call.name,
        "arguments": _redact_value(dict(call.arguments)),
    }


def message_parts(message: Message) -> list[dict[str, Any]]:
    """The parts of one message in the conventions' shape (text, tool_call, tool_call_response)."""
    if message.role == "tool":
        return [
            {
                "type": "tool_call_response",
                "id": message.tool_call_id or "",
                "result": redacted_text(message.content),
            }
        ]
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "content": redacted_text(message.content)})
    parts.extend(_call_part(call) for call in message.tool_calls)
    return parts


def input_messages(messages: Sequence[Message]) -> str:
    """``gen_ai.input.messages``: the chat history sent, system messages left out (they are
    ``gen_ai.system_instructions``)."""
    shown = [{"role": m.role, "parts": message_parts(m)} for m in messages if m.role != "system"]
    return _dumps(shown)


def system_instructions(messages: Sequence[Message]) -> str | None:
    """``gen_ai.system_instructions``: the system messages' text parts, or None without any."""
    parts = [
        {"type": "text", "content": redacted_text(m.content)}
        for m in messages
        if m.role == "system" and m.content
    ]
    return _dumps(parts) if parts else None


def output_messages(turn: Turn) -> str:
    """``gen_ai.output.messages``: the model's one answer (its text and tool calls)."""
    parts: list[dict[str, Any]] = []
    if turn.content:
        parts.append({"type": "text", "content": redacted_text(turn.content)})
    parts.extend(_call_part(call) for call in turn.tool_calls)
    message = {"role": "assistant", "parts": parts, "finish_reason": turn.finish_reason or "stop"}
    return _dumps([message])


def text_messages(role: str, text: str) -> str:
    """One message of one text part, as the conventions' message JSON (the run's query, its answer)."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": redacted_text(text)}]}
    if role == "assistant":
        message["finish_reason"] = "stop"
    return _dumps([message])
