"""Building providers from config: the one place that makes HTTP clients and concrete providers.

Every concrete provider has one constructor shape, ``Provider(llm, *, client, endpoint=None,
retry=None, ...)``: the ``llm`` section, the HTTP client it talks through (which it never closes),
and optionally the resolved endpoint and a retry policy; what only one API takes comes after
(Anthropic's ``thinking_budget``, Gemini's ``schema_mode``). ``build_client`` makes the client,
``create_provider`` picks the provider for an endpoint, ``open_provider`` owns both.

``open_provider(llm)`` is what the Agent uses: one pooled ``httpx.AsyncClient`` for the
provider's whole life (building a client per call costs ~30 ms), with the timeouts of the config
(``connectTimeoutSeconds``, ``requestTimeoutSeconds``; 0 = none). A loopback endpoint ignores
proxy environment variables (``HTTP_PROXY`` without a ``NO_PROXY`` for localhost would otherwise
send local model calls to the proxy), and all loopback clients share one TLS context (loading
the CA bundle once per process, not once per client). A plain-``http://`` endpoint with no proxy
in the way goes over the lean HTTP/1.1 transport of ``http/lean.py``. Which provider speaks is
decided by ``servers/endpoints.py``.

With ``llm.fallbacks`` it is a ``FallbackProvider`` over the primary and each entry (filled in
from the primary by ``fallback_configs``), every one with its own client: their timeouts, proxy
rules and connection pools are their own.

Before it is handed out, each OpenAI-compatible provider learns what its server is
(``identify.known_server``: the cache in the state folder while fresh, else the server is
asked, ``servers/identify.py``): ``provider.server_info`` is set, and its capabilities follow the kind
identified (``llm.capabilities`` still wins). Identification takes a few milliseconds against a
local server and never fails: a server that does not answer keeps the guess from its port.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Literal, cast

import anyio
import httpx

from ..config import LLMConfig
from ..state.folder import private_state_dir
from .anthropic import AnthropicProvider
from .base import Provider
from .fallback import Candidate, FallbackProvider, fallback_configs
from .gemini import GeminiProvider
from .http.lean import ModelClient, lean_transport
from .openai import OpenAICompatProvider
from .servers.endpoints import SERVER_KINDS, ServerKind, capabilities_for, resolve_endpoint
from .servers.identify import CACHE_FILE, known_server, remember
from .servers.info import ServerInfo

__all__ = ["apply_server_info", "build_client", "create_provider", "open_provider"]

USER_AGENT = "mcp-agent/0.1"


def _seconds(value: float) -> float | None:
    return value if value > 0 else None


@functools.cache
def _loopback_tls() -> ssl.SSLContext:
    """The TLS settings of every loopback client: httpx's own default when it ignores the
    environment (certifi's CA bundle), built once per process. Loading the bundle takes 30-60 ms,
    which every agent opened against a local model paid again (a benchmark opens thousands)."""
    return httpx.create_ssl_context(trust_env=False)


def build_client(llm: LLMConfig) -> httpx.AsyncClient:
    """A pooled HTTP client with the config's timeouts (the caller closes it)."""
    read = _seconds(llm.request_timeout_seconds)
    timeout = httpx.Timeout(connect=_seconds(llm.connect_timeout_seconds), read=read, write=read, pool=read)
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=16, keepalive_expiry=30.0)
    endpoint = resolve_endpoint(llm)
    trust_env = not endpoint.local
    return ModelClient(
        timeout=timeout,
        limits=limits,
        headers={"User-Agent": USER_AGENT},
        trust_env=trust_env,
        verify=_loopback_tls() if endpoint.local else True,
        follow_redirects=False,
        lean=lean_transport(endpoint.base_url, trust_env=trust_env, timeout=timeout, limits=limits),
    )


def create_provider(llm: LLMConfig, client: httpx.AsyncClient) -> Provider:
    """The provider for ``llm``, talking through ``client`` (which the caller owns)."""
    endpoint = resolve_endpoint(llm)
    if endpoint.provider == "anthropic":
        return AnthropicProvider(llm, client=client, endpoint=endpoint)
    if endpoint.provider == "gemini":
        return GeminiProvider(llm, client=client, endpoint=endpoint)
    return OpenAICompatProvider(llm, client=client, endpoint=endpoint)


def apply_server_info(provider: OpenAICompatProvider, info: ServerInfo) -> None:
    """Tell ``provider`` what its server is: ``server_info``, and the identified kind's
    capabilities when the kind differs from the guess, less streaming with tools when the server
    was seen not to (``llm.capabilities`` wins over both)."""
    provider.server_info = info
    endpoint = provider.endpoint
    if info.kind in SERVER_KINDS and info.kind != endpoint.kind:
        kind = cast(ServerKind, info.kind)
        endpoint = replace(
            endpoint, kind=kind, capabilities=capabilities_for(kind, provider.llm.capabilities)
        )
    if info.stream_tools is False and provider.llm.capabilities.stream_tools is None:
        endpoint = replace(endpoint, capabilities=replace(endpoint.capabilities, stream_tools=False))
    provider.endpoint = endpoint


async def _identify(
    pairs: Sequence[tuple[LLMConfig, Provider, httpx.AsyncClient]], state_dir: Path | None
) -> None:
    """Identify the server of every OpenAI-compatible provider, all at once."""

    async def one(llm: LLMConfig, provider: OpenAICompatProvider, client: httpx.AsyncClient) -> None:
        apply_server_info(provider, await known_server(llm, client, state_dir=state_dir))
        if state_dir is not None:  # what the provider learns from now on outlives the process
            provider.learned.keep = partial(remember, state_dir / CACHE_FILE, llm)

    async with anyio.create_task_group() as group:
        for llm, provider, client in pairs:
            if isinstance(provider, OpenAICompatProvider):
                group.start_soon(one, llm, provider, client)


@asynccontextmanager
async def open_provider(
    llm: LLMConfig, *, identify: bool = True, state_dir: Path | Literal["default"] | None = "default"
) -> AsyncIterator[Provider]:
    """A provider for ``llm`` with its own HTTP client, closed when the block ends (with
    ``llm.fallbacks``: a ``FallbackProvider``, one client per model).

    Args:
        llm: the ``llm`` section.
        identify: learn what each OpenAI-compatible server is before handing the provider out.
        state_dir: where identifications are cached; by default the state folder, None: nowhere.
    """
    cache = private_state_dir() if state_dir == "default" else state_dir
    configs = [llm.model_copy(update={"fallbacks": []}), *fallback_configs(llm)] if llm.fallbacks else [llm]
    async with AsyncExitStack() as stack:
        pairs = []
        for config in configs:
            client = await stack.enter_async_context(build_client(config))
            pairs.append((config, create_provider(config, client), client))
        if identify:
            await _identify(pairs, cache)
        providers = [provider for _, provider, _ in pairs]
        yield (
            providers[0]
            if not llm.fallbacks
            else FallbackProvider(
                [Candidate.of(config, provider) for config, provider in zip(configs, providers, strict=True)]
            )
        )
