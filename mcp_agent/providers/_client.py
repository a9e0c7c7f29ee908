"""The HTTP client every provider talks through: pooled, with the config's timeouts.

A loopback endpoint ignores proxy environment variables (``HTTP_PROXY`` without a ``NO_PROXY``
for localhost would otherwise send local model calls to the proxy).
"""

from __future__ import annotations

import httpx

from ..config import LLMConfig
from .endpoints import resolve_endpoint

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
