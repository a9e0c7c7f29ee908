"""The lean HTTP/1.1 transport for model calls to a plain-``http://`` server.

A local model server (Ollama, llama.cpp, vLLM on this machine or the LAN) is spoken to over plain
HTTP/1.1, and there httpcore's pool and connection layers cost as much CPU per model call as the
rest of the call's HTTP work. ``LeanTransport`` is ``_http/lean.py``'s transport in the ``httpx``
flavour, mounted for ``http://`` on the provider's ``httpx.AsyncClient`` (``lean_mounts``): the
client and everything above it (timeouts, streamed SSE bodies, retries, the error mapping of
``errors.py``) stay as they are, and the failures are the same ``httpx`` exceptions.

It is mounted only where nothing would route a request elsewhere: an ``http://`` endpoint, and
no proxy in the environment (``HTTP_PROXY``, ``ALL_PROXY``) for a client that reads it. ``https://``
endpoints, proxies and whatever else keep httpx's default transport.
"""

from __future__ import annotations

from types import ModuleType
from typing import ClassVar

import httpx

from ..._http.lean import LeanBody, LeanTransportBase, env_proxy

__all__ = ["LeanTransport", "lean_mounts"]


class _Body(LeanBody, httpx.AsyncByteStream):
    """A response body read from its connection (``LeanBody``) as an ``httpx`` stream."""


class LeanTransport(LeanTransportBase[httpx.Request, httpx.Response], httpx.AsyncBaseTransport):
    """``_http/lean.py``'s transport, making ``httpx`` responses and failures."""

    flavour: ClassVar[ModuleType] = httpx
    body: ClassVar[type[LeanBody]] = _Body


def lean_mounts(
    url: str, *, trust_env: bool, timeout: httpx.Timeout, limits: httpx.Limits
) -> dict[str, httpx.AsyncBaseTransport]:
    """``{"http://": LeanTransport}`` for a client of the endpoint ``url`` when its requests may
    take it (a plain-``http://`` URL, no proxy from the environment), else nothing."""
    if not url.startswith("http://") or (trust_env and env_proxy()):
        return {}
    transport = LeanTransport(
        timeout,
        max_connections=limits.max_connections or 100,
        max_idle=limits.max_keepalive_connections or 20,
        keepalive_expiry=limits.keepalive_expiry,
    )
    return {"http://": transport}
