"""HTTP plumbing the Anthropic and Gemini providers share: their client, request defaults, answers.

Both providers may be built without a client and then own the one they make (``ClientOwner``:
``aclose`` and ``async with`` close it only then); both take the same settings from agent.json (``config_options``); both fill a request's temperature and token
cap from their own settings (``with_defaults``); both raise the classified error for an error
status (``raise_for_status``, reading at most ``llm.maxResponseBytes`` of its body), a terminal
error for an answer that is no API's at all (an HTML page, a text body: ``_foreign.py``), and a
retryable ``ProviderResponseError`` for a JSON answer that does not parse (``read_json``). The OpenAI-compatible provider works on a client it is given and reads its
answers its own way (``openai/provider.py``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

import httpx

from ..config import LLMConfig
from ..exceptions import ProviderResponseError
from ._classify import classify_error
from ._foreign import content_type, foreign_answer, looks_like_html
from ._images import accepts_images
from ._response_limit import read_body
from .base import ModelRequest
from .endpoints import Endpoint, ProviderName, refused_message
from .retry import RetryPolicy

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
