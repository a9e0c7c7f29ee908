"""The cap on the size of one model response (``llm.maxResponseBytes``), for every provider.

Every byte of a response is counted as it arrives, after decompression: the chunks of a stream,
a whole JSON answer, an error body. A ``Content-Length`` beyond the cap is refused before
anything is read. Beyond the cap the reading stops and the response is abandoned: leaving the
``client.stream`` block closes it, and httpx closes a connection whose body was not read to the
end instead of reusing it. The call then fails with a ``ProviderResponseError`` that names the
limit and the key and is not retried (the same request would bring the same flood); the loop
ends the run ``llm_error`` ("the model server failed"), since the request, the key and the
quota are not at fault (``terminal_error`` is for those).

Read a response with ``read_body`` (whole) or ``capped_bytes`` (streamed), never with
``response.aread()`` or ``client.post``, which read whatever comes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from ..exceptions import ProviderResponseError
from ._classify import request_id_from

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "capped_bytes", "read_body", "response_too_large"]

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""``llm.maxResponseBytes`` unless the config says otherwise."""


def response_too_large(limit: int, request_id: str | None = None) -> ProviderResponseError:
    """The error of a response over ``limit`` bytes (not retryable)."""
    return ProviderResponseError(
        f"the model server's answer is larger than {limit} bytes (llm.maxResponseBytes); it was abandoned",
        request_id=request_id,
        retryable=False,
    )


async def capped_bytes(response: httpx.Response, limit: int) -> AsyncIterator[bytes]:
    """The body of ``response`` chunk by chunk, failing once more than ``limit`` bytes came (0 = no limit).

    Raises:
        ProviderResponseError: the body (or its ``Content-Length``) is over the limit.
    """
    request_id = request_id_from(response.headers)
    declared = response.headers.get("content-length", "")
    if limit and declared.isdigit() and int(declared) > limit:
        raise response_too_large(limit, request_id)
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if limit and total > limit:
            raise response_too_large(limit, request_id)
        yield chunk


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """The whole body of ``response``, refused beyond ``limit`` bytes (0 = no limit).

    Raises:
        ProviderResponseError: the body is over the limit.
    """
    return b"".join([chunk async for chunk in capped_bytes(response, limit)])
