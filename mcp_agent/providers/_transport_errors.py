"""httpx transport failures (no answer at all) translated into ``ProviderError``, once, at the boundary.

A refused connection carries the endpoint's "how to start it" hint and is final for a local
server (nothing listens there) but retried for a remote one (it may be restarting); the caller
says which (a server that answered before and now refuses went away: the provider passes a
message of its own and asks for retries). Connect errors, timeouts, proxy errors and broken
connections are retryable; a bad URL is terminal.

A read timeout names the limit that ran out (``llm.requestTimeoutSeconds``). On a server on this
machine (``local``) it is not retried: such a server (llama.cpp, llama-cpp-python, Ollama with
one slot) is most likely still working on the request, and a second one would only queue behind
it, piling work onto a busy server; elsewhere it is retried.
Error *answers* (a status, an error body) are ``_classify.py``'s business.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from ..exceptions import ProviderConnectionError, ProviderError, ProviderResponseError

__all__ = ["BAD_URL", "map_transport_errors", "read_limit", "transport_error"]

BAD_URL = "bad model server URL"
"""How the error of a URL httpx cannot use begins (a config error, not a connection failure)."""


def _is_refused(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        current = current.__cause__ or current.__context__
    return "connection refused" in str(exc).lower()


def read_limit(exc: httpx.HTTPError) -> float | None:
    """The read timeout (seconds) of the request that failed with ``exc``, when httpx says."""
    try:
        timeouts = exc.request.extensions.get("timeout")
    except RuntimeError:  # an exception without its request
        return None
    value = timeouts.get("read") if isinstance(timeouts, dict) else None
    return float(value) if isinstance(value, int | float) else None


def timed_out_text(exc: httpx.HTTPError) -> str:
    """ "nothing for 300 s (llm.requestTimeoutSeconds)" for a read timeout, else httpx's words."""
    limit = read_limit(exc) if isinstance(exc, httpx.ReadTimeout) else None
    if limit is not None:
        return f"nothing for {limit:g} s (llm.requestTimeoutSeconds)"
    return str(exc) or type(exc).__name__


def transport_error(
    exc: httpx.HTTPError,
    *,
    refused_message: str | None = None,
    refused_final: bool = True,
    local: bool = False,
) -> ProviderError:
    """Translate an httpx transport failure into a ProviderError.

    Args:
        exc: what httpx raised.
        refused_message: the text to use when the connection was refused (the endpoint's "how
            to start it" hint).
        refused_final: a refusal is not retried (terminal): nothing listens there. Pass False
            for a remote host, where a refusal may be a restart.
        local: the server is on this machine: a read timeout is not retried (see above).
    """
    if isinstance(exc, httpx.ConnectError) and refused_message and _is_refused(exc):
        return ProviderConnectionError(refused_message, terminal=refused_final, retryable=not refused_final)
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return ProviderConnectionError(f"cannot connect to the model server: {exc}", retryable=True)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ProviderConnectionError(f"{BAD_URL}: {exc}", terminal=True)
    if isinstance(exc, httpx.ProxyError):
        return ProviderConnectionError(f"proxy error: {exc}", retryable=True)
    if isinstance(exc, httpx.ReadTimeout):
        message = f"the model server did not answer in time: {timed_out_text(exc)}"
        if not local:
            return ProviderResponseError(message, retryable=True)
        return ProviderResponseError(
            f"{message}; not retried, since a server on this machine is most likely still working on "
            "it and another request would queue behind it: raise llm.requestTimeoutSeconds or lower "
            "llm.maxOutputTokens",
        )
    if isinstance(exc, httpx.TimeoutException):
        kind = type(exc).__name__
        return ProviderResponseError(f"the model server did not answer in time ({kind})", retryable=True)
    if isinstance(exc, httpx.TransportError):
        detail = str(exc) or type(exc).__name__
        return ProviderResponseError(f"the connection to the model server failed: {detail}", retryable=True)
    return ProviderError(f"HTTP client error: {exc}", retryable=True)


@contextmanager
def map_transport_errors(
    *, refused_message: str | None = None, refused_final: bool = True, local: bool = False
) -> Iterator[None]:
    """Translate httpx transport failures raised inside the block (see ``transport_error``)."""
    try:
        yield
    except httpx.TransportError as exc:
        raise transport_error(
            exc, refused_message=refused_message, refused_final=refused_final, local=local
        ) from exc
