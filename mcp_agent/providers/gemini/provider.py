"""GeminiProvider: Gemini ``generateContent`` / ``streamGenerateContent`` over an httpx.AsyncClient.

One ``complete`` call is one ``POST {base}/models/{model}:generateContent`` (or
``:streamGenerateContent?alt=sse`` when streaming; ``base`` is
``https://generativelanguage.googleapis.com/v1beta`` or a proxy's prefix). The wire mapping is
pure and lives in ``_wire.py``; this module does I/O, streaming and errors:

- The API key goes in the ``x-goog-api-key`` header, never in the URL, so it cannot leak into
  error messages or logs (a ``key=`` left in the endpoint's query is moved to the header).
- Tool schemas: ``parametersJsonSchema`` (full JSON Schema) by default. When the server answers
  400 naming ``parameters_json_schema`` (an older API version, or a proxy that does not know
  it), the provider switches to the sanitised ``parameters`` subset for the rest of its life and
  sends the request again at once (that resend is not counted as a retry). ``schema_mode``
  chooses the start: ``"json_schema"`` (default) or ``"parameters"``.
- Errors ``{"error": {code, message, status, details}}`` (also wrapped in an array, also inside
  a stream) are classified by ``http/errors.py``: 429 and 5xx are retried, honouring
  ``RetryInfo.retryDelay``; a 429 whose quota id contains ``PerDay`` is terminal; the token
  count message is a ``ContextLengthError``. ``MALFORMED_FUNCTION_CALL`` with nothing else is
  retried; a blocked prompt is terminal.
- An answer that is not the API's at all (a web page: the endpoint is another web server) fails
  at once, naming what came and from where, never quoting it (``http/errors.py``).
- Images from tools follow the function responses as ``inlineData`` when ``vision`` is on.
- ``maxOutputTokens`` is always sent: the request's cap, else ``llm.maxOutputTokens``, else
  ``GEMINI_OUTPUT_TOKENS`` (8192; thinking tokens count against it).
- A streamed answer ends at EOF (there is no ``[DONE]``); a stream without any
  ``finishReason`` is broken. A stream that already handed pieces to ``on_delta`` is not
  retried, so no piece is reported twice.
- Every answer is read through ``http/answers.py`` (``llm.maxResponseBytes``); a call whose
  arguments exceed ``llm.maxToolArgumentChars`` keeps none (nor does the replayed part).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlencode

import httpx

from ...config import LLMConfig
from ...exceptions import ProviderHTTPError, ProviderResponseError
from ...messages import Delta, Turn
from ..base import DeltaCallback, ModelRequest
from ..history import accepts_images, fit_images
from ..http.answers import (
    aiter_sse,
    capped_bytes,
    raise_for_status,
    read_body,
    read_json,
    with_defaults,
)
from ..http.errors import RetryPolicy, classify_error, map_transport_errors, request_id_from
from ..http.lean import post_stream
from ..servers.endpoints import Endpoint, refused_message, resolve_endpoint
from ..servers.info import GEMINI_OUTPUT_TOKENS
from ..turns import DeltaReporter, finish_turn
from . import _wire as wire

__all__ = ["GeminiProvider"]

logger = logging.getLogger(__name__)

SchemaMode = Literal["json_schema", "parameters"]

_SCHEMA_REJECTED = re.compile(r"parameters_?json_?schema", re.IGNORECASE)


class GeminiProvider:
    """A Provider for the Gemini API (AI Studio / Generative Language).

    Everything comes from the ``llm`` section: the endpoint's base (``.../v1beta``, its query
    parameters kept for every request; a ``key`` there is moved to the header), the model
    (``gemini-2.5-flash``; a ``models/`` prefix is accepted), ``apiKey`` (sent as
    ``x-goog-api-key``), ``stream`` (``streamGenerateContent?alt=sse``), ``maxOutputTokens``
    (``maxOutputTokens`` when a request sets none; else ``GEMINI_OUTPUT_TOKENS``, 8192: a cap is
    always sent, ``servers/info.py``), ``temperature``, ``headers``, ``toolCallStyle`` (``native``
    turns off the fallback for tool calls written as text), ``maxResponseBytes``,
    ``maxToolArgumentChars`` and ``vision`` (the images tools return are sent within
    ``history.fit_images``'s bounds). A refused connection to a loopback endpoint is final, with
    how to start it; elsewhere a refusal is retried.

    Args:
        llm: the ``llm`` section of agent.json.
        client: the pooled HTTP client (its timeouts apply; the factory builds one from config).
        endpoint: the resolved endpoint; by default resolved from ``llm``.
        retry: the retry policy; by default ``llm.maxRetries`` with the standard backoff.
        schema_mode: how tool schemas are sent first (see the module docstring).
        include_thoughts: ask for thought summaries (reported as reasoning).
    """

    def __init__(
        self,
        llm: LLMConfig,
        *,
        client: httpx.AsyncClient,
        endpoint: Endpoint | None = None,
        retry: RetryPolicy | None = None,
        schema_mode: SchemaMode = "json_schema",
        include_thoughts: bool = False,
    ) -> None:
        endpoint = endpoint or resolve_endpoint(llm)
        self.llm = llm
        self.endpoint = endpoint
        self._client = client
        self.vision = accepts_images(llm, endpoint.provider)
        self.max_response_bytes = llm.max_response_bytes
        self.max_tool_argument_chars = llm.max_tool_argument_chars
        params = parse_qsl(endpoint.query, keep_blank_values=True)
        key_in_query = next((v for k, v in params if k == "key"), None)
        self._query = urlencode([(k, v) for k, v in params if k not in ("key", "alt")])
        model = llm.model.removeprefix("models/")
        self._base = f"{endpoint.base_url.rstrip('/')}/models/{quote(model, safe='-._~')}"
        self.model = model
        self.stream = llm.stream
        self.max_output_tokens = llm.max_output_tokens or GEMINI_OUTPUT_TOKENS
        self.temperature = llm.temperature
        self.retry = retry or RetryPolicy(max_retries=llm.max_retries)
        self.schema_mode: SchemaMode = schema_mode
        self.include_thoughts = include_thoughts
        self.tool_call_style = llm.tool_call_style
        self._refused = refused_message(endpoint, llm.model, llm.config_file) if endpoint.local else None
        self._headers = dict(llm.headers)
        key = llm.api_key or key_in_query
        if key:
            self._headers["x-goog-api-key"] = key

    # ------------------------------------------------------------------------------------ call

    @property
    def url(self) -> str:
        """The URL of one call (no key in it, ever)."""
        if self.stream:
            query = "alt=sse" + (f"&{self._query}" if self._query else "")
            return f"{self._base}:streamGenerateContent?{query}"
        return f"{self._base}:generateContent" + (f"?{self._query}" if self._query else "")

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (defaults from the constructor filled in)."""
        request = with_defaults(
            request, max_output_tokens=self.max_output_tokens, temperature=self.temperature
        )
        request = replace(request, messages=fit_images(request.messages, enabled=self.vision))
        return wire.build_request(
            request, json_schema=self.schema_mode == "json_schema", include_thoughts=self.include_thoughts
        )

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        """Send one request (retrying as ``retry`` allows) and return the model's turn.

        Raises:
            ContextLengthError: the conversation does not fit the model's context window.
            ProviderError: any other failure, after the retries (``terminal`` when retrying
                cannot help).
        """
        report = DeltaReporter(on_delta)

        async def attempt(_: int) -> Turn:
            request.notes.called(api="gemini", url=self._base, model=self.model, stream=self.stream)
            body = self.body(request)
            try:
                return await self._call(body, report)
            except ProviderHTTPError as exc:
                if not self._schema_rejected(exc, request):
                    raise
                logger.warning(
                    "Gemini rejected parametersJsonSchema (%s); sending tool schemas as 'parameters' from now on",
                    exc.message,
                )
                self.schema_mode = "parameters"
                return await self._call(self.body(request), report)

        turn = await self.retry.run(attempt, what=f"Gemini {self.model}", notes=request.notes)
        turn = finish_turn(
            turn, request, style=self.tool_call_style, max_argument_chars=self.max_tool_argument_chars
        )
        cap = request.max_output_tokens or self.max_output_tokens
        return replace(turn, model=self.model, max_output_tokens=cap)

    def _schema_rejected(self, exc: ProviderHTTPError, request: ModelRequest) -> bool:
        return (
            exc.status == 400
            and self.schema_mode == "json_schema"
            and bool(request.tools)
            and _SCHEMA_REJECTED.search(exc.message) is not None
        )

    async def _call(self, body: dict[str, Any], report: DeltaReporter) -> Turn:
        state = wire.ResponseState(max_argument_chars=self.max_tool_argument_chars)
        request_id: str | None = None
        whole: list[Delta] = []
        with report.no_retry_once_reported():
            with map_transport_errors(refused_message=self._refused):
                async with post_stream(self._client, self.url, json=body, headers=self._headers) as response:
                    request_id = request_id_from(response.headers)
                    await raise_for_status(response, request_id, self.max_response_bytes, api="gemini")
                    if self.stream and "json" not in response.headers.get("content-type", ""):
                        await self._read_events(response, state, report)
                        if state.finish_reason is None and state.error is None and state.block_reason is None:
                            raise ProviderResponseError(
                                "the Gemini stream ended before a finishReason",
                                request_id=request_id,
                                retryable=True,
                            )
                    else:
                        content = await read_body(response, self.max_response_bytes)
                        whole = state.feed(read_json(response, content, request_id, api="gemini"))
            turn = self._finish(state, request_id)
        for delta in whole:  # a whole answer is reported once it is known to be good
            report(delta)
        return turn

    async def _read_events(
        self, response: httpx.Response, state: wire.ResponseState, report: DeltaCallback
    ) -> None:
        async for event in aiter_sse(capped_bytes(response, self.max_response_bytes)):
            if not event.data.strip() or event.is_done:
                continue
            try:
                chunk = json.loads(event.data)
            except ValueError:
                logger.debug("Gemini stream: skipped a non-JSON event: %.200s", event.data)
                continue
            for delta in state.feed(chunk):
                report(delta)
            if state.error is not None:
                return

    def _finish(self, state: wire.ResponseState, request_id: str | None) -> Turn:
        if state.error is not None:
            raise classify_error(None, {"error": dict(state.error)}, request_id=request_id)
        turn = state.turn()
        request_id = request_id or turn.request_id
        if state.block_reason is not None and not turn.content and not turn.tool_calls:
            raise ProviderResponseError(
                f"Gemini blocked the prompt ({state.block_reason})", request_id=request_id, terminal=True
            )
        if state.finish_reason == "MALFORMED_FUNCTION_CALL" and not turn.content and not turn.tool_calls:
            raise ProviderResponseError(
                "Gemini produced a malformed function call (MALFORMED_FUNCTION_CALL)",
                request_id=request_id,
                retryable=True,
            )
        return replace(turn, request_id=request_id)
