"""Reading a whole Chat Completions answer, once its bytes are in (no I/O): a ``Turn`` or an error.

``whole_answer`` reads a complete body: JSON (or SSE text, from a server that streamed anyway);
an error object in a 200 answer (LM Studio) is classified like an error status.
``foreign_error`` is the error for an answer that is no Chat Completions API's at all (an HTML
page: ``_foreign.py``). ``recover_calls`` reads the tool calls in a Groq ``tool_use_failed``
error's ``failed_generation`` (the model's raw text) unless the style is ``native``.
``report_turn`` hands a turn that arrived whole out as deltas, as a stream would have.
The provider (``provider.py``) does the HTTP and decides what to do with each outcome.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import httpx

from ...exceptions import ProviderError, ProviderResponseError
from ...messages import Delta, Turn
from .. import _turns
from .._classify import classify_error, error_info, request_id_from
from .._foreign import foreign_answer
from .._sse import parse_sse
from .._turns import DeltaReporter
from ..base import ModelRequest
from ._request import ToolCallStyle
from ._response import ChunkAccumulator, finish_turn

logger = logging.getLogger("mcp_agent.providers.openai.provider")


def report_turn(turn: Turn, out: DeltaReporter) -> None:
    """Report a turn that arrived whole (reasoning, text, each call's name) through ``out``."""
    if turn.reasoning:
        out(Delta("reasoning", turn.reasoning))
    if turn.content:
        out(Delta("text", turn.content))
    for index, call in enumerate(turn.tool_calls):
        out(Delta("tool_call", index=index, name=call.name))


def whole_answer(
    response: httpx.Response,
    content: bytes,
    request: ModelRequest,
    style: ToolCallStyle,
    *,
    chat_url: str,
    max_argument_chars: int,
) -> Turn:
    """A complete answer body (``content``): JSON (or, from a server that streamed anyway, SSE text)."""
    request_id = request_id_from(response.headers)
    acc = ChunkAccumulator()
    if "event-stream" in response.headers.get("content-type", ""):
        for event in parse_sse(content.decode("utf-8", "replace")):
            if event.is_done:
                acc.done = True
                break
            try:
                chunk = event.json()
            except ValueError:
                continue
            if isinstance(chunk, Mapping):
                acc.feed(chunk)
        return finish_turn(
            acc, request, style=style, request_id=request_id, max_argument_chars=max_argument_chars
        )
    try:
        data = json.loads(content)
    except ValueError:
        foreign = foreign_error(response, content, chat_url=chat_url)
        if foreign is not None:
            raise foreign from None
        raise ProviderResponseError(
            f"the answer is not JSON: {content[:200].decode('utf-8', 'replace')!r}",
            status=response.status_code,
            request_id=request_id,
            retryable=True,
        ) from None
    if not isinstance(data, Mapping):
        raise ProviderResponseError("the answer is not a JSON object", request_id=request_id, retryable=True)
    if "choices" not in data and error_info(data) is not None:  # LM Studio: HTTP 200, error body
        recovered = recover_calls(data, request, style, max_argument_chars=max_argument_chars)
        if recovered is not None:
            return recovered
        raise classify_error(None, data, response.headers, request_id=request_id)
    try:
        acc.feed_completion(data)
    except ProviderError as exc:
        exc.request_id = exc.request_id or request_id
        raise
    return finish_turn(
        acc, request, style=style, request_id=request_id, max_argument_chars=max_argument_chars
    )


def foreign_error(response: httpx.Response, content: bytes, *, chat_url: str) -> ProviderError | None:
    """The error for an answer that is not from a Chat Completions API (an HTML page...)."""
    error = foreign_answer(response.status_code, response.headers, content, url=chat_url, api="openai")
    if error is not None:
        error.request_id = request_id_from(response.headers)
    return error


def recover_calls(
    body: object, request: ModelRequest, style: ToolCallStyle, *, max_argument_chars: int
) -> Turn | None:
    """Calls from Groq's ``failed_generation`` (the model's raw text), when they can be read."""
    info = error_info(body)
    if info is None or info.code != "tool_use_failed" or not request.tools or style == "native":
        return None
    generation = info.raw.get("failed_generation")
    if not isinstance(generation, str) or not generation.strip():
        return None
    turn = _turns.finish_turn(
        Turn(content=generation), request, style=style, max_argument_chars=max_argument_chars
    )
    if not turn.tool_calls:
        return None
    logger.info("read %d tool call(s) from the server's failed_generation", len(turn.tool_calls))
    return turn
