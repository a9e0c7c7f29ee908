"""Retrying a model call: ``RetryPolicy`` (how often, how long to wait) and ``backoff_delay``.

Only a ``ProviderError`` with ``retryable`` set is retried; whether an error is retryable, and the
server's retry hint (``retry_after``), are decided where the error is made (``_classify.py`` for
error answers, ``_transport_errors.py`` for failed connections). The wait is the server's hint
when there is one, else 0.5 s doubling up to 8 s, times a jitter of ``1 - 0.25 * random()``.
``RetryPolicy.sleep`` and ``.rand`` are injectable so that tests never wait.

The classification names are importable from here as well (``classify_error``,
``map_transport_errors``...), since this is the one module every provider reads errors through.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
import anyio.lowlevel

from ..exceptions import ProviderError
from ..telemetry.base import note_retry
from ._classify import (
    ErrorInfo,
    classify_error,
    error_info,
    is_context_length,
    parse_retry_after,
    request_id_from,
)
from ._transport_errors import map_transport_errors, transport_error

__all__ = [
    "ErrorInfo",
    "RetryPolicy",
    "backoff_delay",
    "classify_error",
    "error_info",
    "is_context_length",
    "map_transport_errors",
    "parse_retry_after",
    "request_id_from",
    "transport_error",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def backoff_delay(
    retry: int,
    retry_after: float | None = None,
    *,
    rand: Callable[[], float] = random.random,
    initial: float = 0.5,
    maximum: float = 8.0,
    jitter: float = 0.25,
) -> float:
    """Seconds to wait before retry number ``retry`` (0 for the first retry).

    The server's hint when there is one; else ``min(initial * 2**retry, maximum)`` shrunk by up
    to ``jitter`` (a quarter) at random.
    """
    if retry_after is not None:
        return retry_after
    return min(initial * 2.0**retry, maximum) * (1.0 - jitter * rand())


Sleep = Callable[[float], Awaitable[object]]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between attempts of one model call.

    Attributes:
        max_retries: retries after the first attempt (``llm.maxRetries``; 0 = no retry).
        initial_delay: the first backoff delay, doubled each retry.
        max_delay: the cap of the backoff delay.
        jitter: each backoff delay is shrunk by up to this fraction at random.
        sleep: the async sleep (inject a recorder in tests).
        rand: a source of floats in [0, 1) for the jitter (inject a constant in tests).
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    sleep: Sleep = anyio.sleep
    rand: Callable[[], float] = random.random

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds before retry number ``retry`` (0-based), honouring the server's hint."""
        return backoff_delay(
            retry,
            retry_after,
            rand=self.rand,
            initial=self.initial_delay,
            maximum=self.max_delay,
            jitter=self.jitter,
        )

    async def run(self, attempt: Callable[[int], Awaitable[T]], *, what: str = "model call") -> T:
        """Call ``attempt(n)`` until it succeeds, fails for good, or retries run out.

        Only ``ProviderError`` with ``retryable`` set is retried. Cancellation is honoured
        between attempts (a checkpoint before each one), as well as during the sleep.

        Raises:
            ProviderError: the last error, when it is not retryable or no retry is left.
        """
        retry = 0
        while True:
            await anyio.lowlevel.checkpoint()
            try:
                return await attempt(retry)
            except ProviderError as exc:
                if not exc.retryable or retry >= self.max_retries:
                    raise
                wait = self.delay(retry, exc.retry_after)
                logger.warning(
                    "%s failed (%s); retry %d/%d in %.2f s", what, exc, retry + 1, self.max_retries, wait
                )
                note_retry(exc, wait)
            await self.sleep(wait)
            retry += 1
