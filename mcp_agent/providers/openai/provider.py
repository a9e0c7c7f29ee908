"""The OpenAI-compatible provider: Chat Completions over one injected ``httpx.AsyncClient``.

One ``complete`` call is one model turn. It streams when ``llm.stream`` is on (and, with tools,
when the server streams tools well), reports ``Delta`` values through ``on_delta`` (guarded: a
callback that raises is logged once and ignored), retries what is retryable (``http/errors.py``),
and returns a ``Turn``; the body is built and the answer read, whole or as a stream's events, by
the wire module (``_wire.py``). This module does the HTTP, the retries and the unstreamed second try, and keeps what it learns.

Streaming rules (``llm-wire.md`` §9.3): a stream that ends or breaks before its first delta is
asked again once WITHOUT streaming (LM Studio's empty streams, Ollama's dropped tool calls); an
error event before any delta is retried like any error; once deltas were handed out, a break or
an error is a ``ProviderResponseError`` that is not retried here (the caller has shown the text).
A stream that ends without a finish reason or ``[DONE]`` counts as broken.

When a request WITH tools needed that fallback because its stream ended with nothing (not
because the connection broke) and the plain request answered, the server is taken not to stream
tool calls (llama-cpp-python with ``tool_choice: auto``: an empty 200 stream,
or only ``: ping`` comments until it closes the stream at ~21 s): requests with tools are sent
without streaming from then on, for the provider's life (``learned.stream_tools``; a server
identified as one that drops them, ``DROPS_STREAMED_TOOLS``, is not asked to stream tools at
all). Keep-alive pings themselves never decide anything: a loading Ollama or a queueing proxy
sends the same bytes while it works, so a stream of pings is waited for (up to the read timeout)
unless the server is known to drop streamed tool calls, and then it is never opened. An answer that is no
API's at all (an HTML page: the endpoint is some other web server) fails at once, without the
page (``http/errors.py``). A refused connection means "not running" (not retried, with how to
start one; the run ends ``llm_error``, retryable: once it runs, asking again helps) until the
server has answered once, and "went away" after that (retried, then ``llm_error``); a read timeout names ``llm.requestTimeoutSeconds`` and is not retried on a server
on this machine (``http/errors.py``). Every answer, streamed
or not, is read through ``http/answers.py`` (``llm.maxResponseBytes``), and argument text over
``llm.maxToolArgumentChars`` is not parsed.

``toolCallStyle``: ``native`` takes only structured calls; ``auto`` sends tools natively and also
reads calls written as text, and switches to ``text`` for models in ``TEXT_TOOL_MODELS`` or when
the server answers that the model does not support tools (Ollama: "does not support tools";
vLLM without ``--enable-auto-tool-choice``), remembered for the provider's life; ``text``
describes the tools in the system prompt and sends no ``tools`` (see ``_wire.py``). With ``auto``,
a turn whose output llama.cpp's server could not parse as its template's call format (HTTP 500 "The
model produced output that does not match the expected peg-native format": it throws the whole
generation away, and at temperature 0 asking again gets the same) is asked once more with the tools
as text, for that turn only: the server then parses nothing and the gateway reads the answer. Groq's
``tool_use_failed`` errors are read for the calls in ``failed_generation`` unless the style is
``native``.

Images from tools go to the model when it reads them (``llm.vision``, resolved by
``history.accepts_images``), within ``history.fit_images``'s bounds; otherwise it reads their
placeholders. Every turn says which model answered (``Turn.model``: ``llm.model``).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, replace

import httpx

from ..._plural import counted
from ...config import LLMConfig
from ...exceptions import ContextLengthError, ProviderError, ProviderHTTPError, ProviderResponseError
from ...messages import Turn
from ..base import DeltaCallback, ModelRequest
from ..history import accepts_images, fit_images
from ..http.answers import aiter_sse, capped_bytes, read_body
from ..http.errors import RetryPolicy, classify_error, map_transport_errors, request_id_from, timed_out_text
from ..http.lean import post_stream
from ..servers.endpoints import Endpoint, refused_message, resolve_endpoint
from ..servers.identify import window_from_error
from ..servers.info import Learned, ServerInfo, output_cap
from ..turns import DeltaReporter, UsageEstimator
from ._wire import (
    ChunkAccumulator,
    EarlyEnd,
    ToolCallStyle,
    build_chat_body,
    drain,
    finish_turn,
    fold_stream,
    foreign_error,
    recover_calls,
    report_turn,
    whole_answer,
)

__all__ = ["DROPS_STREAMED_TOOLS", "TEXT_TOOL_MODELS", "OpenAICompatProvider", "prefers_text_tools"]

logger = logging.getLogger(__name__)

TEXT_TOOL_MODELS = ("gemma:", "gemma2", "gemma3", "phi3", "phi-3", "llama2", "codellama")
"""Model-name prefixes (after any ``org/``) known to lack native tool calling on common servers
(Ollama answers 400 "does not support tools"); ``toolCallStyle: auto`` uses text for them."""

DROPS_STREAMED_TOOLS = frozenset({"llama-cpp-python"})
"""Server kinds (``ServerInfo.kind``) that answer a streamed request with tools with nothing
(llama-cpp-python: "Automatic streaming tool choice is not supported"): tools go unstreamed."""

_NO_NATIVE_TOOLS = re.compile(
    r"does not support tools|enable-auto-tool-choice|tools? (?:is|are) not supported"
    r"|does not support (?:function|tool) call",
    re.IGNORECASE,
)

_UNPARSED_OUTPUT = re.compile(r"produced output that does not match the expected [\w-]+ format")
"""llama.cpp's server when the model's output does not parse as the call format it derived from
the chat template (any ``{`` in a marker-less JSON format starts a call): the generation is gone."""


def unparsed_output(exc: ProviderError, request: ModelRequest, style: ToolCallStyle) -> bool:
    """Whether ``exc`` is llama.cpp's "does not match the expected format" on a turn that may be
    asked again with the tools as text (``auto``, tools offered)."""
    return bool(request.tools) and style == "auto" and bool(_UNPARSED_OUTPUT.search(exc.message))


def prefers_text_tools(model: str) -> bool:
    """True when ``model`` is in ``TEXT_TOOL_MODELS``."""
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(TEXT_TOOL_MODELS)


@dataclass
class _CallState:
    stream: bool
    fell_back: bool = False


class OpenAICompatProvider:
    """A Provider for any OpenAI-compatible ``/chat/completions`` server.

    Args:
        llm: the ``llm`` section of agent.json.
        client: the pooled HTTP client (its timeouts apply; the factory builds one from config).
        endpoint: the resolved endpoint; by default resolved from ``llm``.
        retry: the retry policy; by default ``llm.maxRetries`` with the standard backoff.
    """

    def __init__(
        self,
        llm: LLMConfig,
        *,
        client: httpx.AsyncClient,
        endpoint: Endpoint | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.llm = llm
        self.client = client
        self.endpoint = endpoint or resolve_endpoint(llm)
        self.retry = retry or RetryPolicy(max_retries=llm.max_retries)
        self._text_tools = prefers_text_tools(llm.model)
        self.vision = accepts_images(llm, self.endpoint.provider)
        self._refused = refused_message(self.endpoint, llm.model, llm.config_file)
        self._answered = False  # the server has answered once: a refusal now means it went away
        self._headers = {"Accept": "application/json, text/event-stream"}
        if llm.api_key:
            self._headers["Authorization"] = f"Bearer {llm.api_key}"
        self._headers.update(llm.headers)
        self._chat_target = ("", httpx.URL())
        self.server_info = ServerInfo.unknown()
        """What the server is (``servers/info.py``): set once it has been identified."""
        self.learned = Learned()
        """What this provider learned about the server by talking to it (``servers/info.py``)."""
        self.usage_estimator = UsageEstimator(client, llm)
        """Usage the server did not report, estimated as closely as it allows (``turns.py``)."""

    @property
    def tool_call_style(self) -> ToolCallStyle:
        """The style in force: ``llm.toolCallStyle``, with ``auto`` turned ``text`` where needed."""
        if self.llm.tool_call_style == "auto" and self._text_tools:
            return "text"
        return self.llm.tool_call_style

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        """One model turn. See ``Provider.complete`` for the contract."""
        out = DeltaReporter(on_delta)
        style = self.tool_call_style
        try:
            return await self._complete(request, out, style)
        except ProviderError as exc:
            if unparsed_output(exc, request, style) and not out.count:
                logger.warning(
                    "the server could not read model %s's answer as tool calls (%s); asking again "
                    "with the tools as text, for this turn",
                    self.llm.model,
                    exc.message,
                )
                return await self._complete(request, out, "text")
            if not (
                isinstance(exc, ProviderHTTPError)
                and request.tools
                and style == "auto"
                and _NO_NATIVE_TOOLS.search(exc.message)
            ):
                raise
            logger.warning(
                "model %s takes no native tools (%s); sending tools as text from now on",
                self.llm.model,
                exc.message,
            )
            self._text_tools = True
            return await self._complete(request, out, "text")

    @property
    def streams_tools(self) -> bool:
        """Whether a request with tools is streamed (when ``llm.stream`` is on)."""
        if not self.endpoint.capabilities.stream_tools or self.learned.stream_tools is False:
            return False
        return self.learned.stream_tools is True or self.server_info.kind not in DROPS_STREAMED_TOOLS

    async def _complete(self, request: ModelRequest, out: DeltaReporter, style: ToolCallStyle) -> Turn:
        tools_sent = bool(request.tools) and style != "text"
        state = _CallState(stream=self.llm.stream and (not tools_sent or self.streams_tools))

        async def attempt(_: int) -> Turn:
            try:
                return await attempt_once()
            except ProviderError as exc:
                if unparsed_output(exc, request, style):  # the same again would fail the same way
                    exc.retryable, exc.terminal = False, False
                raise

        async def attempt_once() -> Turn:
            url, model = self.endpoint.chat_url, self.llm.model
            if state.stream:
                request.notes.called(api="openai", url=url, model=model, stream=True)
                try:
                    return await self._streamed(request, out, style)
                except EarlyEnd as exc:
                    logger.warning("the stream %s; asking again without streaming", exc)
                    state.stream, state.fell_back = False, not exc.broke
            request.notes.called(api="openai", url=url, model=model, stream=False)
            turn = await self._plain(request, style)
            if state.fell_back and tools_sent and self.learned.stream_tools is None:
                logger.warning(
                    "%s answered a streamed request with tools with nothing, and the same request "
                    "unstreamed: requests with tools are no longer streamed to it",
                    self.endpoint.base_url,
                )
                self.learned.learn(stream_tools=False)
            return turn

        try:
            turn = await self.retry.run(
                attempt, what=f"model call to {self.endpoint.base_url}", notes=request.notes
            )
        except ProviderResponseError as exc:
            if out.count and exc.usage is None:  # it broke off mid-answer: the server did the work
                exc.usage = await self.usage_estimator.estimate(
                    request, Turn(content=out.text), self.server_info
                )
            raise
        turn = await self.usage_estimator.settle(request, turn, self.server_info)
        if not out.count:  # answered whole: report it once, as the streamed path would have
            report_turn(turn, out)
        return replace(turn, model=self.llm.model, max_output_tokens=self.output_cap(request))

    def output_cap(self, request: ModelRequest) -> int:
        """The ``max_tokens`` sent with ``request``: its own cap, ``llm.maxOutputTokens``, else a
        default from the context window when the server told it (``servers/info.py``)."""
        return output_cap(
            request.max_output_tokens or self.llm.max_output_tokens,
            context_window=self.server_info.context_window,
            local=self.endpoint.local,
        )

    def _finish(
        self, acc: ChunkAccumulator, request: ModelRequest, style: ToolCallStyle, request_id: str | None
    ) -> Turn:
        return finish_turn(
            acc,
            request,
            style=style,
            request_id=request_id,
            max_argument_chars=self.llm.max_tool_argument_chars,
        )

    def _body(self, request: ModelRequest, *, stream: bool, style: ToolCallStyle) -> dict[str, object]:
        return build_chat_body(
            replace(request, messages=fit_images(request.messages, enabled=self.vision)),
            model=self.llm.model,
            caps=self.endpoint.capabilities,
            stream=stream,
            text_tools=style == "text",
            temperature=self.llm.temperature,
            max_output_tokens=self.output_cap(request),
        )

    @contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """``map_transport_errors`` for this server: a refusal is "not running" until the server
        has answered once (not retried: ``llm_error``, how to start it), and "went away" after that
        (retried, then ``llm_error``: it crashed or was stopped); a read timeout on this machine is not retried.
        A connection that broke after it was made (the server disconnected without an answer)
        counts as an answer: something was listening, so a refusal on the retry means it went away."""
        if not self._answered:
            mapping = map_transport_errors(
                refused_message=self._refused, refused_final=self.endpoint.local, local=self.endpoint.local
            )
        else:
            went_away = (
                f"the model server at {self.endpoint.base_url} went away: it answered before, and now the "
                "connection is refused (it crashed or was stopped)"
            )
            mapping = map_transport_errors(
                refused_message=went_away, refused_final=False, local=self.endpoint.local
            )
        with mapping:
            try:
                yield
            except httpx.TransportError as exc:
                if not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.UnsupportedProtocol):
                    self._answered = True
                raise

    def _chat_url(self) -> httpx.URL:
        """``endpoint.chat_url`` parsed once (httpx parses a text URL again on every request,
        tens of microseconds); parsed anew when the endpoint is replaced."""
        text = self.endpoint.chat_url
        if self._chat_target[0] != text:
            self._chat_target = (text, httpx.URL(text))
        return self._chat_target[1]

    # ------------------------------------------------------------------------------ streamed

    async def _streamed(self, request: ModelRequest, out: DeltaReporter, style: ToolCallStyle) -> Turn:
        body = self._body(request, stream=True, style=style)
        acc = ChunkAccumulator()
        with self._transport_errors():
            async with post_stream(
                self.client, self._chat_url(), json=body, headers=self._headers
            ) as response:
                self._answered = True
                request_id = request_id_from(response.headers)
                if response.status_code >= 400:
                    content = await read_body(response, self.llm.max_response_bytes)
                    return self._error_answer(response, content, request, style)
                if "event-stream" not in response.headers.get("content-type", ""):
                    content = await read_body(response, self.llm.max_response_bytes)
                    return self._whole_answer(response, content, request, style)
                chunks = capped_bytes(response, self.llm.max_response_bytes)
                async with aclosing(aiter_sse(chunks)) as events:
                    try:
                        recovered = await fold_stream(
                            events,
                            acc,
                            out,
                            request,
                            style,
                            request_id,
                            max_argument_chars=self.llm.max_tool_argument_chars,
                        )
                    except httpx.TransportError as exc:
                        if isinstance(exc, httpx.TimeoutException) and not out.count:
                            raise  # a slow server, not a broken stream: retried as a timeout
                        if not out.count and not acc.has_output:
                            raise EarlyEnd(f"broke off before any output ({exc})", broke=True) from exc
                        raise ProviderResponseError(
                            f"the stream broke off after {counted(acc.chunks, 'chunk')}: {timed_out_text(exc)}",
                            request_id=request_id,
                        ) from exc
                    if recovered is not None:
                        return recovered
                    if acc.done:
                        await drain(events)
        if not out.count and not acc.has_output:
            raise EarlyEnd("ended before any output" if not acc.finished else "had no output")
        for delta in acc.flush():  # text held back while it looked like the start of a tag
            out(delta)
        if not acc.finished:
            raise ProviderResponseError(
                f"the stream ended without a finish reason or [DONE] after {counted(acc.chunks, 'chunk')}",
                request_id=request_id,
            )
        return self._finish(acc, request, style, request_id)

    # ------------------------------------------------------------------------------ plain

    async def _plain(self, request: ModelRequest, style: ToolCallStyle) -> Turn:
        body = self._body(request, stream=False, style=style)
        with self._transport_errors():
            async with post_stream(
                self.client, self._chat_url(), json=body, headers=self._headers
            ) as response:
                self._answered = True
                content = await read_body(response, self.llm.max_response_bytes)
        if response.status_code >= 400:
            return self._error_answer(response, content, request, style)
        return self._whole_answer(response, content, request, style)

    def _whole_answer(
        self, response: httpx.Response, content: bytes, request: ModelRequest, style: ToolCallStyle
    ) -> Turn:
        """A complete answer body: ``_wire.whole_answer`` with this server's URL and limits."""
        return whole_answer(
            response,
            content,
            request,
            style,
            chat_url=self.endpoint.chat_url,
            max_argument_chars=self.llm.max_tool_argument_chars,
        )

    def _error_answer(
        self, response: httpx.Response, content: bytes, request: ModelRequest, style: ToolCallStyle
    ) -> Turn:
        """An error status: a Groq ``tool_use_failed`` that can be read, or the classified error."""
        foreign = foreign_error(response, content, chat_url=self.endpoint.chat_url)
        if foreign is not None:
            raise foreign
        if response.status_code == 400:
            recovered = recover_calls(
                content, request, style, max_argument_chars=self.llm.max_tool_argument_chars
            )
            if recovered is not None:
                return recovered
        error = classify_error(response.status_code, content, response.headers)
        if isinstance(error, ContextLengthError):
            self._window_from(content)
        raise error

    def _window_from(self, content: bytes) -> None:
        """Take the context window a context-length error states (llama-cpp-python publishes it
        nowhere else): the output cap fits it from the next request on, and it is kept with the
        server's identification, so the next process sizes history to it from the start."""
        window = window_from_error(content.decode("utf-8", "replace"))
        if window is None or window == self.server_info.context_window:
            return
        source = "a context-length error"
        self.server_info = replace(self.server_info, context_window=window, context_source=source)
        with contextlib.suppress(Exception):  # keeping it is a bonus, as for every lesson
            self.learned.keep(context_window=window, context_source=source)
