"""Reading a model server's answers over HTTP, within ``llm.maxResponseBytes``, for every provider.

Every answer is read through one cap (``capped_bytes``, ``read_body``): a whole body, an error
body, or a stream of server-sent events (``aiter_sse``, a tolerant incremental parser). The
native providers (Anthropic, Gemini) also share their request defaults and the handling of an
answer's status and body (``with_defaults``, ``raise_for_status``, ``read_json``).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

import httpx

from ...exceptions import ProviderResponseError
from ..base import ModelRequest
from .errors import (
    classify_error,
    content_type,
    foreign_answer,
    looks_like_html,
    request_id_from,
)

if TYPE_CHECKING:  # a type name only: servers/ reads through http/, never the other way
    from ..servers.endpoints import ProviderName

# --------------------------------------------------------------------------------------------
# the cap on the size of one model response (``llm.maxResponseBytes``)
#
# Every byte of a response is counted as it arrives, after decompression: the chunks of a stream,
# a whole JSON answer, an error body. A ``Content-Length`` beyond the cap is refused before
# anything is read. Beyond the cap the reading stops and the response is abandoned: leaving the
# ``client.stream`` block closes it, and httpx closes a connection whose body was not read to the
# end instead of reusing it. The call then fails with a ``ProviderResponseError`` that names the
# limit and the key and is not retried (the same request would bring the same flood); the loop
# ends the run ``llm_error`` ("the model server failed"), since the request, the key and the
# quota are not at fault (``terminal_error`` is for those).
#
# Read a response with ``read_body`` (whole) or ``capped_bytes`` (streamed), never with
# ``response.aread()`` or ``client.post``, which read whatever comes.
__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "SSEDecoder",
    "SSEEvent",
    "aiter_sse",
    "aiter_sse_lines",
    "capped_bytes",
    "iter_sse",
    "parse_sse",
    "raise_for_status",
    "read_body",
    "read_json",
    "response_too_large",
    "with_defaults",
]

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


# --------------------------------------------------------------------------------------------
# what the Anthropic and Gemini providers share: their client, request defaults, answers
#
# Both fill a request's temperature and token cap from their own settings (``with_defaults``);
# both raise the classified error for an error status (``raise_for_status``, reading at most
# ``llm.maxResponseBytes`` of its body), a terminal error for an answer that is no API's at all
# (an HTML page, a text body: ``foreign_answer``), and a retryable ``ProviderResponseError`` for a
# JSON answer that does not parse (``read_json``). The OpenAI-compatible provider reads its
# answers its own way (``openai/provider.py``).


def with_defaults(
    request: ModelRequest, *, max_output_tokens: int | None, temperature: float | None
) -> ModelRequest:
    """``request`` with the provider's token cap and temperature where it sets none."""
    if request.max_output_tokens is None and max_output_tokens:
        request = replace(request, max_output_tokens=max_output_tokens)
    if request.temperature is None and temperature is not None:
        request = replace(request, temperature=temperature)
    return request


def _foreign(response: httpx.Response, content: bytes, request_id: str | None, api: ProviderName) -> None:
    error = foreign_answer(
        response.status_code, response.headers, content, url=str(response.request.url), api=api
    )
    if error is not None:
        error.request_id = request_id
        raise error


async def raise_for_status(
    response: httpx.Response, request_id: str | None, max_bytes: int, *, api: ProviderName
) -> None:
    """Raise the classified error when ``response`` has an error status (its body, at most
    ``max_bytes`` of it, is read first), and the ``http/errors.py`` error for a web page whatever
    the status (an answer streamed or not: checked before any of it is parsed)."""
    if response.status_code >= 400:
        content = await read_body(response, max_bytes)
        _foreign(response, content, request_id, api)
        raise classify_error(response.status_code, content, response.headers, request_id=request_id)
    if looks_like_html(content_type(response.headers)):
        _foreign(response, b"", request_id, api)


def read_json(response: httpx.Response, content: bytes, request_id: str | None, *, api: ProviderName) -> Any:
    """The JSON of an answer's body: the ``http/errors.py`` error when it is not from ``api`` at all
    (text, a page), a retryable ``ProviderResponseError`` when it is JSON cut short."""
    try:
        return json.loads(content)
    except ValueError:
        _foreign(response, content, request_id, api)
        raise ProviderResponseError(
            f"the answer is not JSON: {content[:200]!r}", request_id=request_id, retryable=True
        ) from None


# --------------------------------------------------------------------------------------------
# server-sent events: a tolerant parser, pure and incremental, for every provider's stream
#
# It follows the WHATWG event-stream rules and forgives what real model servers send: lines end
# in ``\n``, ``\r\n`` or ``\r`` (also split across network chunks); an event may carry several
# ``data:`` lines (joined with ``\n``); ``:`` lines are comments; unknown fields are ignored; a
# missing space after the colon is fine; a byte-order mark is dropped; an event left open at EOF is
# still delivered (Gemini and Ollama end streams without a final blank line). One extension: a
# bare line that starts with ``{`` or ``[`` is taken as a whole event of its own, so an NDJSON
# stream, or an error object a server writes without ``data:``, is not lost.
#
# Nothing here knows about OpenAI, Anthropic or Gemini: ``[DONE]``, ``ping`` and ``error`` events
# are the consumer's business (``SSEEvent.is_done`` is a convenience). Use ``SSEDecoder`` directly,
# or ``aiter_sse`` on an async iterator of bytes (``httpx.Response.aiter_bytes()``), ``aiter_sse_lines``
# on an async iterator of lines (``aiter_lines()``), or ``parse_sse`` on a whole text.

MAX_EVENT_CHARS = 32 * 1024 * 1024
"""An event (or an unterminated line) larger than this is refused: a broken server, not a reply."""

_NEWLINE = re.compile(r"\r\n|\r|\n")


class SSEEvent(NamedTuple):
    """One dispatched event (a NamedTuple: immutable, and cheap to build per chunk).

    Attributes:
        event: the ``event:`` field, ``"message"`` when none was given.
        data: the ``data:`` lines joined with ``\\n``.
        id: the last ``id:`` seen in the stream, if any.
        retry: the ``retry:`` field (milliseconds), if this event carried one.
    """

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None

    @property
    def is_done(self) -> bool:
        """True for the OpenAI-style end marker ``data: [DONE]``."""
        return self.data.strip() == "[DONE]"

    def json(self) -> Any:
        """The data parsed as JSON (raises ``json.JSONDecodeError`` when it is not)."""
        return json.loads(self.data)


class SSEDecoder:
    """Turns lines and text into events; keeps the state of the event being built.

    Feed it either text in arbitrary pieces (``feed_text``, which finds the line ends itself) or
    whole lines without their line ends (``feed_line``); call ``flush`` at EOF.
    """

    def __init__(self, *, max_event_chars: int = MAX_EVENT_CHARS) -> None:
        self._max = max_event_chars
        self._event: str | None = None
        self._data: list[str] = []
        self._size = 0
        self._last_id: str | None = None
        self._retry: int | None = None
        self._buffer = ""
        self._started = False

    # ---------------------------------------------------------------------------------- lines

    def feed_line(self, line: str) -> list[SSEEvent]:
        """Process one line (without its line end). Returns the events it completes (0 to 2)."""
        if not self._started:
            self._started = True
            if line.startswith("\ufeff"):
                line = line[1:]
        if not line:
            event = self._dispatch()
            return [event] if event is not None else []
        if line.startswith("data:"):  # the common case, first
            value = line[6:] if line.startswith("data: ") else line[5:]
            self._size += len(value) + 1
            if self._size > self._max:
                raise ProviderResponseError(
                    f"stream event larger than {self._max} characters", retryable=False
                )
            self._data.append(value)
            return []
        first = line[0]
        if first == ":":
            return []
        if first in "{[":
            # Tolerance: a bare JSON line (NDJSON, or an error written without "data:").
            pending = self._dispatch()
            bare = SSEEvent(data=line, id=self._last_id)
            return [pending, bare] if pending is not None else [bare]
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":  # "data" alone: an empty data line
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return []

    def _dispatch(self) -> SSEEvent | None:
        if not self._data and self._event is None:
            self._retry = None
            return None
        event = SSEEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._last_id,
            retry=self._retry,
        )
        self._event = None
        self._data = []
        self._size = 0
        self._retry = None
        return event

    # ----------------------------------------------------------------------------------- text

    def feed_text(self, text: str) -> list[SSEEvent]:
        """Process a piece of the stream's text; line ends may fall anywhere, even inside ``\\r\\n``."""
        if not text:
            return []
        buffer = self._buffer + text
        # A trailing "\r" may be the first half of "\r\n": keep it until the next piece.
        hold_cr = buffer.endswith("\r")
        if hold_cr:
            buffer = buffer[:-1]
        parts = _NEWLINE.split(buffer) if "\r" in buffer else buffer.split("\n")
        rest = parts.pop()
        if hold_cr:
            rest += "\r"
        if len(rest) > self._max:
            raise ProviderResponseError(f"stream line longer than {self._max} characters", retryable=False)
        self._buffer = rest
        events: list[SSEEvent] = []
        for line in parts:
            events.extend(self.feed_line(line))
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: finish an unterminated line and deliver an event left open."""
        events: list[SSEEvent] = []
        rest, self._buffer = self._buffer, ""
        if rest.endswith("\r"):
            rest = rest[:-1]
        if rest:
            events.extend(self.feed_line(rest))
        event = self._dispatch()
        if event is not None:
            events.append(event)
        return events


class _ByteDecoder:
    """UTF-8 decoding that never splits a character across network chunks."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, chunk: bytes | str, final: bool = False) -> str:
        if isinstance(chunk, str):
            return chunk
        return self._decoder.decode(chunk, final)


def iter_sse(chunks: Iterable[bytes | str]) -> Iterator[SSEEvent]:
    """Events from an iterable of byte (or text) chunks of any size."""
    decoder, text = SSEDecoder(), _ByteDecoder()
    for chunk in chunks:
        yield from decoder.feed_text(text.decode(chunk))
    yield from decoder.feed_text(text.decode(b"", final=True))
    yield from decoder.flush()


def parse_sse(text: str) -> list[SSEEvent]:
    """Every event of a complete stream given as one text."""
    return list(iter_sse([text]))


async def aiter_sse(chunks: AsyncIterable[bytes | str]) -> AsyncGenerator[SSEEvent, None]:
    """Events from an async iterator of byte (or text) chunks, e.g. ``response.aiter_bytes()``.

    The events of an unterminated last event are delivered at EOF; telling a complete stream from
    a truncated one (no ``[DONE]``, no finish reason) is the consumer's job.
    """
    decoder, text = SSEDecoder(), _ByteDecoder()
    async for chunk in chunks:
        for event in decoder.feed_text(text.decode(chunk)):
            yield event
    for event in decoder.feed_text(text.decode(b"", final=True)):
        yield event
    for event in decoder.flush():
        yield event


async def aiter_sse_lines(lines: AsyncIterable[str]) -> AsyncGenerator[SSEEvent, None]:
    """Events from an async iterator of lines, e.g. ``response.aiter_lines()`` (line ends optional)."""
    decoder = SSEDecoder()
    async for line in lines:
        for event in decoder.feed_line(line.rstrip("\r\n")):
            yield event
    for event in decoder.flush():
        yield event
