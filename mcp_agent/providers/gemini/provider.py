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
- Every answer is read through ``http/client.py`` (``llm.maxResponseBytes``); a call whose
  arguments exceed ``llm.maxToolArgumentChars`` keeps none (nor does the replayed part).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlencode

import httpx

from ...config import LLMConfig
from ...exceptions import ProviderHTTPError, ProviderResponseError
from ...messages import DEFAULT_MAX_ARGUMENT_CHARS, Delta, Turn
from ..base import DeltaCallback, ModelRequest
from ..history import fit_images
from ..http.client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    ClientOwner,
    aiter_sse,
    build_client,
    capped_bytes,
    config_options,
    raise_for_status,
    read_body,
    read_json,
    with_defaults,
)
from ..http.errors import RetryPolicy, classify_error, map_transport_errors, request_id_from
from ..servers.endpoints import Endpoint, resolve_endpoint
from ..servers.info import GEMINI_OUTPUT_TOKENS
from ..turns import DeltaReporter, finish_turn
from . import _wire as wire

__all__ = ["GeminiProvider"]

logger = logging.getLogger(__name__)

SchemaMode = Literal["json_schema", "parameters"]

_SCHEMA_REJECTED = re.compile(r"parameters_?json_?schema", re.IGNORECASE)


class GeminiProvider(ClientOwner):
    """A Provider for the Gemini API (AI Studio / Generative Language).

    Args:
        base_url: the API base including its version path (``.../v1beta``).
        model: the model name (``gemini-2.5-flash``; a ``models/`` prefix is accepted).
        api_key: sent as ``x-goog-api-key``.
        client: the HTTP client to use; when None one is made and closed by ``aclose``.
        stream: use ``streamGenerateContent?alt=sse``.
        max_output_tokens: ``maxOutputTokens`` when a request sets none; None means
            ``GEMINI_OUTPUT_TOKENS`` (8192: a cap is always sent, ``servers/info.py``).
        temperature: the temperature when a request sets none.
        retry: the retry policy (``llm.maxRetries``).
        headers: extra headers for every request.
        schema_mode: how tool schemas are sent first (see the module docstring).
        include_thoughts: ask for thought summaries (reported as reasoning).
        query: extra query parameters for every request (from the endpoint URL; ``key`` is
            moved to the header).
        tool_call_style: ``native`` turns off the fallback for tool calls written as text
            (``auto``/``text``: taken from the answer when the turn has no structured calls).
        refused: the message for a refused connection; a refusal is then final (``from_config``
            sets it for a loopback endpoint only: elsewhere a refusal is retried).
        max_response_bytes: ``llm.maxResponseBytes`` (0 = no limit).
        max_tool_argument_chars: ``llm.maxToolArgumentChars`` (0 = no limit).
        vision: send the images tools return (``llm.vision`` resolved; ``from_config`` does
            it), within ``history.fit_images``'s bounds.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        stream: bool = True,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        schema_mode: SchemaMode = "json_schema",
        include_thoughts: bool = False,
        query: str = "",
        tool_call_style: str = "auto",
        refused: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_tool_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS,
        vision: bool = True,
    ) -> None:
        super().__init__(client)
        self.vision = vision
        self.max_response_bytes = max_response_bytes
        self.max_tool_argument_chars = max_tool_argument_chars
        params = parse_qsl(query, keep_blank_values=True)
        key_in_query = next((v for k, v in params if k == "key"), None)
        self._query = urlencode([(k, v) for k, v in params if k not in ("key", "alt")])
        model = model.removeprefix("models/")
        self._base = f"{base_url.rstrip('/')}/models/{quote(model, safe='-._~')}"
        self.model = model
        self.stream = stream
        self.max_output_tokens = max_output_tokens or GEMINI_OUTPUT_TOKENS
        self.temperature = temperature
        self.retry = retry or RetryPolicy()
        self.schema_mode: SchemaMode = schema_mode
        self.include_thoughts = include_thoughts
        self.tool_call_style = tool_call_style
        self._refused = refused
        self._headers = dict(headers or {})
        key = api_key or key_in_query
        if key:
            self._headers["x-goog-api-key"] = key

    @classmethod
    def from_config(
        cls,
        llm: LLMConfig,
        *,
        client: httpx.AsyncClient | None = None,
        endpoint: Endpoint | None = None,
        **options: Any,
    ) -> GeminiProvider:
        """Build from the ``llm`` section of agent.json (a client is made when none is given)."""
        endpoint = endpoint or resolve_endpoint(llm)
        provider = cls(
            client=client or build_client(llm),
            query=endpoint.query,
            **config_options(llm, endpoint),
            **options,
        )
        provider._owns_client = client is None
        return provider

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
                async with self._client.stream(
                    "POST", self.url, json=body, headers=self._headers
                ) as response:
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
