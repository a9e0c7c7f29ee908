"""The HTTP client every provider talks through: pooled, with the config's timeouts.

A loopback endpoint ignores proxy environment variables (``HTTP_PROXY`` without a ``NO_PROXY``
for localhost would otherwise send local model calls to the proxy).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

import httpx

from ...config import LLMConfig
from ...exceptions import ProviderResponseError
from ..base import ModelRequest
from ..history import accepts_images
from ..servers.endpoints import Endpoint, ProviderName, refused_message, resolve_endpoint
from .errors import (
    RetryPolicy,
    classify_error,
    content_type,
    foreign_answer,
    looks_like_html,
    request_id_from,
)

USER_AGENT = "mcp-agent/0.1"


def _seconds(value: float) -> float | None:
    return value if value > 0 else None


def build_client(llm: LLMConfig) -> httpx.AsyncClient:
    """A pooled HTTP client with the config's timeouts (the caller closes it)."""
    read = _seconds(llm.request_timeout_seconds)
    timeout = httpx.Timeout(connect=_seconds(llm.connect_timeout_seconds), read=read, write=read, pool=read)
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=16, keepalive_expiry=30.0)
    return httpx.AsyncClient(
        timeout=timeout,
        limits=limits,
        headers={"User-Agent": USER_AGENT},
        trust_env=not resolve_endpoint(llm).local,
        follow_redirects=False,
    )


# The cap on the size of one model response (``llm.maxResponseBytes``), for every provider.
#
# Every byte of a response is counted as it arrives, after decompression: the chunks of a stream,
# a whole JSON answer, an error body. A ``Content-Length`` beyond the cap is refused before
# anything is read. Beyond the cap the reading stops and the response is abandoned: leaving the
# ``client.stream`` block closes it, and httpx closes a connection whose body was not read to the
# end instead of reusing it. The call then fails with a ``ProviderResponseError`` that names the
# limit and the key and is not retried (the same request would bring the same flood); the loop
# ends the run ``llm_error`` ("the model server failed"), since the request, the key and the
# quota are not at fault (``terminal_error`` is for those).
#
# Read a response with ``read_body`` (whole) or ``capped_bytes`` (streamed), never with
# ``response.aread()`` or ``client.post``, which read whatever comes.
__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "capped_bytes", "read_body", "response_too_large"]

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""``llm.maxResponseBytes`` unless the config says otherwise."""


def response_too_large(limit: int, request_id: str | None = None) -> ProviderResponseError:
    """The error of a response over ``limit`` bytes (not retryable)."""
    return ProviderResponseError(
        f"the model server's answer is larger than {limit} bytes (llm.maxResponseBytes); it was abandoned",
        request_id=request_id,
        retryable=False,
    )


async def capped_bytes(response: httpx.Response, limit: int) -> AsyncIterator[bytes]:
    """The body of ``response`` chunk by chunk, failing once more than ``limit`` bytes came (0 = no limit).

    Raises:
        ProviderResponseError: the body (or its ``Content-Length``) is over the limit.
    """
    request_id = request_id_from(response.headers)
    declared = response.headers.get("content-length", "")
    if limit and declared.isdigit() and int(declared) > limit:
        raise response_too_large(limit, request_id)
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if limit and total > limit:
            raise response_too_large(limit, request_id)
        yield chunk


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """The whole body of ``response``, refused beyond ``limit`` bytes (0 = no limit).

    Raises:
        ProviderResponseError: the body is over the limit.
    """
    return b"".join([chunk async for chunk in capped_bytes(response, limit)])


# HTTP plumbing the Anthropic and Gemini providers share: their client, request defaults, answers.
#
# Both providers may be built without a client and then own the one they make (``ClientOwner``:
# ``aclose`` and ``async with`` close it only then); both take the same settings from agent.json (``config_options``); both fill a request's temperature and token
# cap from their own settings (``with_defaults``); both raise the classified error for an error
# status (``raise_for_status``, reading at most ``llm.maxResponseBytes`` of its body), a terminal
# error for an answer that is no API's at all (an HTML page, a text body: ``_foreign.py``), and a
# retryable ``ProviderResponseError`` for a JSON answer that does not parse (``read_json``). The OpenAI-compatible provider works on a client it is given and reads its
# answers its own way (``openai/provider.py``).
__all__ = ["ClientOwner", "config_options", "raise_for_status", "read_json", "with_defaults"]


class ClientOwner:
    """A provider that talks through ``client``, or through one it makes (and then closes).

    Args:
        client: the HTTP client to use; when None one is made and closed by ``aclose``.
    """

    def __init__(self, client: httpx.AsyncClient | None) -> None:
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(300, connect=10))

    async def aclose(self) -> None:
        """Close the HTTP client if this provider made it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def config_options(llm: LLMConfig, endpoint: Endpoint) -> dict[str, Any]:
    """The constructor arguments both native providers take from the ``llm`` section."""
    return {
        "base_url": endpoint.base_url,
        "model": llm.model,
        "api_key": llm.api_key,
        "stream": llm.stream,
        "max_output_tokens": llm.max_output_tokens,
        "temperature": llm.temperature,
        "retry": RetryPolicy(max_retries=llm.max_retries),
        "headers": llm.headers,
        "tool_call_style": llm.tool_call_style,
        "refused": refused_message(endpoint, llm.model) if endpoint.local else None,
        "max_response_bytes": llm.max_response_bytes,
        "max_tool_argument_chars": llm.max_tool_argument_chars,
        "vision": accepts_images(llm, endpoint.provider),
    }


def with_defaults(
    request: ModelRequest, *, max_output_tokens: int | None, temperature: float | None
) -> ModelRequest:
    """``request`` with the provider's token cap and temperature where it sets none."""
    if request.max_output_tokens is None and max_output_tokens:
        request = replace(request, max_output_tokens=max_output_tokens)
    if request.temperature is None and temperature is not None:
        request = replace(request, temperature=temperature)
    return request


def _foreign(response: httpx.Response, content: bytes, request_id: str | None, api: ProviderName) -> None:
    error = foreign_answer(
        response.status_code, response.headers, content, url=str(response.request.url), api=api
    )
    if error is not None:
        error.request_id = request_id
        raise error


async def raise_for_status(
    response: httpx.Response, request_id: str | None, max_bytes: int, *, api: ProviderName
) -> None:
    """Raise the classified error when ``response`` has an error status (its body, at most
    ``max_bytes`` of it, is read first), and the ``_foreign`` error for a web page whatever
    the status (an answer streamed or not: checked before any of it is parsed)."""
    if response.status_code >= 400:
        content = await read_body(response, max_bytes)
        _foreign(response, content, request_id, api)
        raise classify_error(response.status_code, content, response.headers, request_id=request_id)
    if looks_like_html(content_type(response.headers)):
        _foreign(response, b"", request_id, api)


def read_json(response: httpx.Response, content: bytes, request_id: str | None, *, api: ProviderName) -> Any:
    """The JSON of an answer's body: the ``_foreign`` error when it is not from ``api`` at all
    (text, a page), a retryable ``ProviderResponseError`` when it is JSON cut short."""
    try:
        return json.loads(content)
    except ValueError:
        _foreign(response, content, request_id, api)
        raise ProviderResponseError(
            f"the answer is not JSON: {content[:200]!r}", request_id=request_id, retryable=True
        ) from None
