"""A tolerant Server-Sent Events parser, pure and incremental, for every provider's stream.

It follows the WHATWG event-stream rules and forgives what real model servers send: lines end
in ``\\n``, ``\\r\\n`` or ``\\r`` (also split across network chunks); an event may carry several
``data:`` lines (joined with ``\\n``); ``:`` lines are comments; unknown fields are ignored; a
missing space after the colon is fine; a byte-order mark is dropped; an event left open at EOF is
still delivered (Gemini and Ollama end streams without a final blank line). One extension: a
bare line that starts with ``{`` or ``[`` is taken as a whole event of its own, so an NDJSON
stream, or an error object a server writes without ``data:``, is not lost.

Nothing here knows about OpenAI, Anthropic or Gemini: ``[DONE]``, ``ping`` and ``error`` events
are the consumer's business (``SSEEvent.is_done`` is a convenience). Use ``SSEDecoder`` directly,
or ``aiter_sse`` on an async iterator of bytes (``httpx.Response.aiter_bytes()``), ``aiter_sse_lines``
on an async iterator of lines (``aiter_lines()``), or ``parse_sse`` on a whole text.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Iterator
from typing import Any, NamedTuple

from ...exceptions import ProviderResponseError

__all__ = ["SSEDecoder", "SSEEvent", "aiter_sse", "aiter_sse_lines", "iter_sse", "parse_sse"]

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
