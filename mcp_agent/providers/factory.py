"""Building providers from config: ``create_provider`` over a given client, ``open_provider`` owning one.

``open_provider(llm)`` is what the Agent uses: one pooled ``httpx.AsyncClient`` for the
provider's whole life (building a client per call costs ~30 ms), with the timeouts of the config
(``connectTimeoutSeconds``, ``requestTimeoutSeconds``; 0 = none). A loopback endpoint ignores
proxy environment variables (``HTTP_PROXY`` without a ``NO_PROXY`` for localhost would otherwise
send local model calls to the proxy). Which provider speaks is decided by ``endpoints.py``.

With ``llm.fallbacks`` it is a ``FallbackProvider`` over the primary and each entry (filled in
from the primary by ``fallback_configs``), every one with its own client: their timeouts, proxy
rules and connection pools are their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import httpx

from ..config import LLMConfig
from ._client import build_client
from .anthropic import AnthropicProvider
from .base import Provider
from .endpoints import resolve_endpoint
from .fallback import FallbackProvider, fallback_configs
from .gemini import GeminiProvider
from .openai_compat import OpenAICompatProvider

__all__ = ["build_client", "create_provider", "open_provider"]


def create_provider(llm: LLMConfig, client: httpx.AsyncClient) -> Provider:
    """The provider for ``llm``, talking through ``client`` (which the caller owns)."""
    endpoint = resolve_endpoint(llm)
    if endpoint.provider == "anthropic":
        return AnthropicProvider.from_config(llm, client=client, endpoint=endpoint)
    if endpoint.provider == "gemini":
        return GeminiProvider.from_config(llm, client=client, endpoint=endpoint)
    return OpenAICompatProvider(llm, client, endpoint=endpoint)


@asynccontextmanager
async def open_provider(llm: LLMConfig) -> AsyncIterator[Provider]:
    """A provider for ``llm`` with its own HTTP client, closed when the block ends (with
    ``llm.fallbacks``: a ``FallbackProvider``, one client per model)."""
    if not llm.fallbacks:
        async with build_client(llm) as client:
            yield create_provider(llm, client)
        return
    configs = [llm.model_copy(update={"fallbacks": []}), *fallback_configs(llm)]
    async with AsyncExitStack() as stack:
        providers = []
        for config in configs:
            client = await stack.enter_async_context(build_client(config))
            providers.append(create_provider(config, client))
        yield FallbackProvider.of(configs, providers)
