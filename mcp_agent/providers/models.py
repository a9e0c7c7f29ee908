"""Asking a model server which models it serves (for ``doctor`` and the gateway's start-up check).

One GET per API: ``/models`` (OpenAI-compatible), ``/models`` with ``x-api-key`` (Anthropic),
``/models`` with ``x-goog-api-key`` (Gemini, names without the ``models/`` prefix). The answer is
read within ``llm.maxResponseBytes`` like any other. An answer that is no API's (a web page: the
endpoint is another web server) is an error that says so, without the page (``_foreign.py``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from ..config import LLMConfig
from ._foreign import foreign_answer
from ._response_limit import read_body
from .endpoints import Endpoint, refused_message, resolve_endpoint
from .retry import classify_error, map_transport_errors


def _headers(llm: LLMConfig, endpoint: Endpoint) -> dict[str, str]:
    headers = dict(llm.headers)
    if llm.api_key:
        if endpoint.provider == "anthropic":
            headers.update({"x-api-key": llm.api_key, "anthropic-version": "2023-06-01"})
        elif endpoint.provider == "gemini":
            headers["x-goog-api-key"] = llm.api_key
        else:
            headers["Authorization"] = f"Bearer {llm.api_key}"
    return headers


def model_ids(provider: str, body: Any) -> list[str]:
    """The model names in a models-list answer of ``provider``'s API."""
    if not isinstance(body, dict):
        return []
    if provider == "gemini":
        items = body.get("models") or []
        return [str(m.get("name", "")).removeprefix("models/") for m in items if isinstance(m, dict)]
    items = body.get("data") or body.get("models") or []
    return [str(m.get("id") or m.get("name") or "") for m in items if isinstance(m, dict)]


def model_present(wanted: str, available: list[str]) -> bool:
    """Whether ``wanted`` is served; Ollama's ``name`` and ``name:latest`` are the same model."""

    def norm(name: str) -> str:
        return name.removesuffix(":latest").lower()

    return norm(wanted) in {norm(name) for name in available}


async def list_models(llm: LLMConfig, client: httpx.AsyncClient) -> list[str]:
    """The models the configured server offers.

    Raises:
        ProviderError: unreachable (the message says how to start it), an error status, or an
            answer over ``llm.maxResponseBytes``.
    """
    endpoint = resolve_endpoint(llm)
    url = endpoint.url("/models")
    with map_transport_errors(refused_message=refused_message(endpoint, llm.model)):
        async with client.stream("GET", url, headers=_headers(llm, endpoint)) as response:
            content = await read_body(response, llm.max_response_bytes)
    foreign = foreign_answer(response.status_code, response.headers, content, url=url, api=endpoint.provider)
    if foreign is not None:
        raise foreign
    if response.status_code >= 400:
        raise classify_error(response.status_code, content, response.headers)
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    return model_ids(endpoint.provider, body)
