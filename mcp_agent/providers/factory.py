"""Building providers from config: ``create_provider`` over a given client, ``open_provider`` owning one.

``open_provider(llm)`` is what the Agent uses: one pooled ``httpx.AsyncClient`` for the
provider's whole life (building a client per call costs ~30 ms), with the timeouts of the config
(``connectTimeoutSeconds``, ``requestTimeoutSeconds``; 0 = none). A loopback endpoint ignores
proxy environment variables (``HTTP_PROXY`` without a ``NO_PROXY`` for localhost would otherwise
send local model calls to the proxy). Which provider speaks is decided by ``endpoints.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from ..config import LLMConfig
from .anthropic import AnthropicProvider
from .base import Provider
from .endpoints import resolve_endpoint
from .gemini import GeminiProvider
from .openai_compat import OpenAICompatProvider

__all__ = ["build_client", "create_provider", "open_provider"]

USER_AGENT = "mcp-agent/0.1"


def create_provider(llm: LLMConfig, client: httpx.AsyncClient) -> Provider:
    """The provider for ``llm``, talking through ``client`` (which the caller owns)."""
    endpoint = resolve_endpoint(llm)
    if endpoint.provider == "anthropic":
        return AnthropicProvider.from_config(llm, client=client, endpoint=endpoint)
    if endpoint.provider == "gemini":
        return GeminiProvider.from_config(llm, client=client, endpoint=endpoint)
    return OpenAICompatProvider(llm, client, endpoint=endpoint)


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


@asynccontextmanager
async def open_provider(llm: LLMConfig) -> AsyncIterator[Provider]:
    """A provider for ``llm`` with its own HTTP client, closed when the block ends."""
    async with build_client(llm) as client:
        yield create_provider(llm, client)
