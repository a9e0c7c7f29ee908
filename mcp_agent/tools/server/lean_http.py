"""The lean HTTP/1.1 transport for the raw tool calls to one plain-``http://`` server.

``raw_call.py`` sends each ``tools/call`` as one POST. Through ``httpx2.AsyncClient.send`` such a
POST crosses the client's auth, redirect and cookie layers and httpcore's pool; ``LeanTransport``
is ``_http/lean.py``'s transport in the ``httpx2`` flavour (the MCP SDK's), and ``RawCaller``
calls it directly, running the client's own event hooks around it (the trace headers, the body
cap, the SSE drain) as ``send`` would. So everything above it (JSON or SSE answers, error
statuses, the ``maxMessageBytes`` cap, decoding) stays as it is.

``RawCaller`` uses it only where the client's layers have nothing to do but auth (``usable``):
an ``http://`` URL, no proxy in the environment, no cookie kept. The client's auth (the OAuth
client of ``auth/upstream.py``) runs its flow around the transport as the client's ``send`` runs
it. Everything else (TLS, proxies, cookies, redirects: the answer of a redirect is handed back as
such) keeps going through the client.
"""

from __future__ import annotations

from types import ModuleType
from typing import ClassVar

import httpx2

from ..._http.lean import LeanBody, LeanTransportBase, env_proxy

__all__ = ["LeanTransport", "usable"]


def usable(http: httpx2.AsyncClient, url: str, *, proxied: bool | None = None) -> bool:
    """Whether a POST to ``url`` on ``http`` can go through a ``LeanTransport`` unchanged: a plain
    ``http://`` URL, and nothing for the client's proxy or cookie layers to do (pure but for the
    environment's proxy variables; ``proxied``: what ``env_proxy`` said, read once)."""
    if len(http.cookies) or not url.startswith("http://"):
        return False
    if http.trust_env:
        return not (env_proxy() if proxied is None else proxied)
    return True


class _Body(LeanBody, httpx2.AsyncByteStream):
    """A response body read from its connection (``LeanBody``) as an ``httpx2`` stream."""


class LeanTransport(LeanTransportBase[httpx2.Request, httpx2.Response], httpx2.AsyncBaseTransport):
    """``_http/lean.py``'s transport, making ``httpx2`` responses and failures."""

    flavour: ClassVar[ModuleType] = httpx2
    body: ClassVar[type[LeanBody]] = _Body
