"""Reading a streamed Chat Completions answer: its server-sent events folded into a ``ChunkAccumulator``.

``fold_stream`` feeds each event's chunk to the accumulator and reports its deltas, until
``[DONE]`` or the end of the body: keep-alive pings and empty events are skipped, a chunk that is
not JSON is logged and skipped, an ``event: error`` is read as an error chunk, and a Groq
``tool_use_failed`` error before anything was handed out is read for its calls
(``_answer.recover_calls``). After ``[DONE]``, ``drain`` reads the rest of the body so the
connection can be reused. ``EarlyEnd`` is how the provider learns that a stream ended (or broke
off) before it handed anything out, so that it asks again without streaming (``provider.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import anyio
import httpx

from ...exceptions import ProviderError
from ...messages import Turn
from .._sse import SSEEvent
from .._turns import DeltaReporter
from ..base import ModelRequest
from ._answer import recover_calls
from ._request import ToolCallStyle
from ._response import ChunkAccumulator

logger = logging.getLogger("mcp_agent.providers.openai.provider")

DRAIN_SECONDS = 1.0
"""After ``[DONE]``, how long to wait for the end of the body so the connection can be reused."""


class EarlyEnd(Exception):
    """The stream ended (``broke``: broke off) before anything was handed out."""

    def __init__(self, message: str, *, broke: bool = False) -> None:
        super().__init__(message)
        self.broke = broke


async def drain(events: AsyncIterator[SSEEvent]) -> None:
    """Read what follows ``[DONE]`` (the end of the chunked body) so the connection is reused."""
    with anyio.move_on_after(DRAIN_SECONDS):
        try:
            async for _ in events:
                pass
        except httpx.TransportError:
            pass


async def fold_stream(
    events: AsyncIterator[SSEEvent],
    acc: ChunkAccumulator,
    out: DeltaReporter,
    request: ModelRequest,
    style: ToolCallStyle,
    request_id: str | None,
    *,
    max_argument_chars: int,
) -> Turn | None:
    """Feed the stream's events to ``acc`` until ``[DONE]`` or EOF; a Turn only when recovered."""
    async for event in events:
        data = event.data.strip()
        if event.event == "ping" or not data:
            continue
        if event.is_done:
            acc.done = True
            return None
        try:
            chunk = json.loads(data)
        except ValueError:
            logger.warning("skipping a stream chunk that is not JSON: %.120r", data)
            continue
        if event.event == "error" and not (isinstance(chunk, dict) and chunk.get("error")):
            chunk = {"error": chunk}
        if not isinstance(chunk, dict):
            continue
        try:
            deltas = acc.feed(chunk)
        except ProviderError as exc:
            recovered = (
                None
                if out.count
                else recover_calls(chunk, request, style, max_argument_chars=max_argument_chars)
            )
            if recovered is not None:
                return recovered
            exc.request_id = exc.request_id or request_id
            if out.count:  # text was handed out: asking again would repeat it
                exc.retryable, exc.terminal = False, False
            raise
        for delta in deltas:
            out(delta)
    return None
