"""The lean HTTP/1.1 transport for model calls to a plain-``http://`` server.

A local model server (Ollama, llama.cpp, vLLM on this machine or the LAN) is spoken to over plain
HTTP/1.1, and there httpcore's pool and connection layers cost as much CPU per model call as the
rest of the call's HTTP work. ``LeanTransport`` is ``_http/lean.py``'s transport in the ``httpx``
flavour, mounted for ``http://`` on the provider's client (``ModelClient``, an
``httpx.AsyncClient`` that knows it): everything above it (timeouts, streamed SSE bodies,
retries, the error mapping of ``errors.py``) stays as it is, and the failures are the same
``httpx`` exceptions.

The providers open every model call with ``post_stream``: ``client.stream("POST", ...)``, except
that a request the lean transport takes is built by the client (its headers, cookies and
timeouts) and handed to the transport directly (``LeanTransport.send``), past the client's auth,
redirect and cookie-jar passes, which a model client does not use (no auth, no redirect
followed) and which cost about a fifth of a model call's HTTP work.

It is mounted only where nothing would route a request elsewhere: an ``http://`` endpoint, and
no proxy in the environment (``HTTP_PROXY``, ``ALL_PROXY``) for a client that reads it. ``https://``
endpoints, proxies and whatever else keep httpx's default transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import ModuleType
from typing import Any, ClassVar

import httpx

from ..._http.lean import LeanBody, LeanTransportBase, env_proxy

__all__ = ["LeanTransport", "ModelClient", "lean_transport", "post_stream"]


class _Body(LeanBody, httpx.AsyncByteStream):
    """A response body read from its connection (``LeanBody``) as an ``httpx`` stream."""


class LeanTransport(LeanTransportBase[httpx.Request, httpx.Response], httpx.AsyncBaseTransport):
    """``_http/lean.py``'s transport, making ``httpx`` responses and failures."""

    flavour: ClassVar[ModuleType] = httpx
    body: ClassVar[type[LeanBody]] = _Body


def lean_transport(
    url: str, *, trust_env: bool, timeout: httpx.Timeout, limits: httpx.Limits
) -> LeanTransport | None:
    """The lean transport for a client of the endpoint ``url`` when its requests may take it (a
    plain-``http://`` URL, no proxy from the environment), else None."""
    if not url.startswith("http://") or (trust_env and env_proxy()):
        return None
    return LeanTransport(
        timeout,
        max_connections=limits.max_connections or 100,
        max_idle=limits.max_keepalive_connections or 20,
        keepalive_expiry=limits.keepalive_expiry,
    )


class ModelClient(httpx.AsyncClient):
    """The provider's ``httpx.AsyncClient`` (``factory.build_client``), with ``lean`` mounted for
    ``http://`` when there is one. It has no auth and follows no redirect (``post_stream`` relies
    on both)."""

    def __init__(self, *, lean: LeanTransport | None, **options: Any) -> None:
        super().__init__(mounts={"http://": lean} if lean is not None else None, **options)
        self.lean = lean


def post_stream(
    client: httpx.AsyncClient, url: str | httpx.URL, *, json: Any, headers: Mapping[str, str]
) -> AbstractAsyncContextManager[httpx.Response]:
    """``client.stream("POST", url, json=json, headers=headers)``; on a ``ModelClient``'s lean
    transport, without the client's own layers (see the module docstring)."""
    lean = client.lean if isinstance(client, ModelClient) else None
    scheme = url.scheme if isinstance(url, httpx.URL) else url.partition(":")[0]
    if lean is None or scheme != "http":
        return client.stream("POST", url, json=json, headers=headers)
    return _lean_post(client, lean, url, json, headers)


@asynccontextmanager
async def _lean_post(
    client: httpx.AsyncClient,
    lean: LeanTransport,
    url: str | httpx.URL,
    json: Any,
    headers: Mapping[str, str],
) -> AsyncIterator[httpx.Response]:
    if client.is_closed:  # as the client's own send refuses
        raise RuntimeError("Cannot send a request, as the client has been closed.")
    response = await lean.send(client, client.build_request("POST", url, json=json, headers=headers))
    try:
        yield response
    finally:
        await response.aclose()
