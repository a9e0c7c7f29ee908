"""AnthropicProvider: the native Anthropic Messages API over an httpx.AsyncClient, streamed or not.

One ``complete`` call is one ``POST {base}/messages`` (``base`` is ``https://api.anthropic.com/v1``
or a proxy's prefix) with the headers ``x-api-key`` and ``anthropic-version``. The wire mapping
is pure and lives in ``_wire.py``; this module does I/O, streaming and errors:

- Streaming reads the server-sent events through the shared tolerant parser (``http/answers.py``),
  reports text, thinking and tool-input pieces through ``on_delta``, and requires
  ``message_stop``: a stream that ends without it is a broken answer.
- Errors are classified by ``http/errors.py`` (529 overloaded and 429 are retried with backoff that
  honours ``retry-after``; ``prompt is too long`` is a ``ContextLengthError``; spend limits and
  other 4xx are terminal). A mid-stream ``event: error`` is classified the same way. A stream
  that already handed pieces to ``on_delta`` is not retried, so no piece is reported twice.
- An answer that is not the API's at all (a web page: the endpoint is another web server) fails
  at once, naming what came and from where, never quoting it (``http/errors.py``).
- ``stop_reason: model_context_window_exceeded`` raises ``ContextLengthError``.
- Images from tools go inside their ``tool_result`` when ``vision`` is on (``history.py``).
- ``max_tokens`` is required by the API: the request's cap, else ``llm.maxOutputTokens``, else
  ``DEFAULT_MAX_TOKENS`` (4096).
- Every answer is read through ``http/answers.py`` (``llm.maxResponseBytes``), and streamed
  argument text over ``llm.maxToolArgumentChars`` is not parsed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

import httpx

from ...config import LLMConfig
from ...exceptions import ContextLengthError, ProviderResponseError
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
from ..turns import DeltaReporter, finish_turn
from . import _wire as wire

__all__ = ["AnthropicProvider"]

logger = logging.getLogger(__name__)


class AnthropicProvider:
    """A Provider for the Anthropic Messages API.

    Everything comes from the ``llm`` section: the endpoint's base (``https://api.anthropic.com/v1``
    or a proxy's prefix), the model, ``apiKey`` (sent as ``x-api-key``; left out when unset, e.g.
    behind a proxy that adds it), ``stream``, ``maxOutputTokens`` (``max_tokens`` when a request
    sets none; else ``DEFAULT_MAX_TOKENS``, the API requires a value), ``temperature``,
    ``headers`` (``anthropic-beta``...), ``toolCallStyle`` (``native`` turns off the fallback for
    tool calls written as text), ``maxResponseBytes``, ``maxToolArgumentChars`` and ``vision``
    (the images tools return are sent within ``history.fit_images``'s bounds). A refused
    connection to a loopback endpoint (a local proxy) is final, with how to start it; elsewhere a
    refusal is a network hiccup, retried.

    Args:
        llm: the ``llm`` section of agent.json.
        client: the pooled HTTP client (its timeouts apply; the factory builds one from config).
        endpoint: the resolved endpoint; by default resolved from ``llm``.
        retry: the retry policy; by default ``llm.maxRetries`` with the standard backoff.
        thinking_budget: enable extended thinking with this many tokens (None = off).
    """

    def __init__(
        self,
        llm: LLMConfig,
        *,
        client: httpx.AsyncClient,
        endpoint: Endpoint | None = None,
        retry: RetryPolicy | None = None,
        thinking_budget: int | None = None,
    ) -> None:
        endpoint = endpoint or resolve_endpoint(llm)
        self.llm = llm
        self.endpoint = endpoint
        self._client = client
        self.vision = accepts_images(llm, endpoint.provider)
        self.url = endpoint.base_url.rstrip("/") + "/messages"
        self.max_response_bytes = llm.max_response_bytes
        self.max_tool_argument_chars = llm.max_tool_argument_chars
        self.model = llm.model
        self.stream = llm.stream
        self.max_output_tokens = llm.max_output_tokens
        self.temperature = llm.temperature
        self.retry = retry or RetryPolicy(max_retries=llm.max_retries)
        self.thinking_budget = thinking_budget
        self.tool_call_style = llm.tool_call_style
        self._refused = refused_message(endpoint, llm.model, llm.config_file) if endpoint.local else None
        self._headers = {"anthropic-version": wire.ANTHROPIC_VERSION, **llm.headers}
        if llm.api_key:
            self._headers["x-api-key"] = llm.api_key

    # ------------------------------------------------------------------------------------ call

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (defaults from the constructor filled in)."""
        request = with_defaults(
            request, max_output_tokens=self.max_output_tokens, temperature=self.temperature
        )
        request = replace(request, messages=fit_images(request.messages, enabled=self.vision))
        return wire.build_request(
            request, model=self.model, stream=self.stream, thinking_budget=self.thinking_budget
        )

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        """Send one request (retrying as ``retry`` allows) and return the model's turn.

        Raises:
            ContextLengthError: the conversation does not fit the model's context window.
            ProviderError: any other failure, after the retries (``terminal`` when retrying
                cannot help).
        """
        body = self.body(request)
        report = DeltaReporter(on_delta)

        async def attempt(_: int) -> Turn:
            request.notes.called(api="anthropic", url=self.url, model=self.model, stream=self.stream)
            if self.stream:
                return await self._streamed(body, report)
            turn = await self._whole(body)
            _replay(turn, report)
            return turn

        turn = await self.retry.run(attempt, what=f"Anthropic {self.model}", notes=request.notes)
        turn = finish_turn(
            turn, request, style=self.tool_call_style, max_argument_chars=self.max_tool_argument_chars
        )
        if turn.finish_reason == "context_length":
            raise ContextLengthError(
                "the conversation filled the model's context window (model_context_window_exceeded)",
                request_id=turn.request_id,
            )
        return replace(turn, model=self.model, max_output_tokens=body["max_tokens"])

    async def _whole(self, body: dict[str, Any]) -> Turn:
        with map_transport_errors(refused_message=self._refused):
            async with post_stream(self._client, self.url, json=body, headers=self._headers) as response:
                request_id = request_id_from(response.headers)
                await raise_for_status(response, request_id, self.max_response_bytes, api="anthropic")
                data = _json(response, await read_body(response, self.max_response_bytes), request_id)
        if data.get("type") == "error":
            raise classify_error(None, data, response.headers, request_id=request_id)
        return wire.parse_response(data, request_id=request_id)

    async def _streamed(self, body: dict[str, Any], report: DeltaReporter) -> Turn:
        headers = {**self._headers, "accept": "text/event-stream"}
        with report.no_retry_once_reported(), map_transport_errors(refused_message=self._refused):
            async with post_stream(self._client, self.url, json=body, headers=headers) as response:
                request_id = request_id_from(response.headers)
                await raise_for_status(response, request_id, self.max_response_bytes, api="anthropic")
                if "json" in response.headers.get("content-type", ""):
                    # a proxy that ignored "stream": a whole answer (or an error) as JSON
                    data = _json(response, await read_body(response, self.max_response_bytes), request_id)
                    if data.get("type") == "error":
                        raise classify_error(None, data, response.headers, request_id=request_id)
                    turn = wire.parse_response(data, request_id=request_id)
                    _replay(turn, report)
                    return turn
                state = wire.StreamState(max_argument_chars=self.max_tool_argument_chars)
                async for event in aiter_sse(capped_bytes(response, self.max_response_bytes)):
                    if event.event == "ping" or not event.data.strip() or event.is_done:
                        continue
                    payload = wire.decode_event_data(event.data)
                    if payload is None:
                        logger.debug("Anthropic stream: skipped a non-JSON event: %.200s", event.data)
                        continue
                    name = None if event.event == "message" else event.event
                    for delta in state.feed(name, payload):
                        report(delta)
                    if state.error is not None:
                        raise classify_error(None, state.error, request_id=request_id)
                    if state.done:
                        break
                if not state.done:
                    raise ProviderResponseError(
                        "the Anthropic stream ended before message_stop",
                        request_id=request_id,
                        retryable=True,
                    )
                return state.turn(request_id)


def _json(response: httpx.Response, content: bytes, request_id: str | None) -> dict[str, Any]:
    data = read_json(response, content, request_id, api="anthropic")
    if not isinstance(data, dict):
        raise ProviderResponseError("the answer is not a JSON object", request_id=request_id, retryable=True)
    return data


def _replay(turn: Turn, report: DeltaCallback) -> None:
    """A whole answer's pieces, reported once it is known to be good (arguments as one piece)."""
    if turn.reasoning:
        report(Delta("reasoning", turn.reasoning))
    if turn.content:
        report(Delta("text", turn.content))
    for index, call in enumerate(turn.tool_calls):
        report(Delta("tool_call", json.dumps(call.arguments), index=index, name=call.name))
