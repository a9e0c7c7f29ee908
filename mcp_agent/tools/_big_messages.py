"""Big messages from a tool server, bounded in size and in work (pure, no I/O).

A server can write a line of any length on stdout, and a result of a million content parts fits
in a few megabytes. What keeps both cheap:

- ``LineSplitter`` cuts stdout into lines and never holds more than ``max_bytes`` of one. A
  longer line is dropped as it streams in; only its head and tail (a few KB each) are kept, so
  ``response_id`` can find the request it answers (the Python SDK writes ``id`` near the start,
  the TypeScript SDK as the last key) and that request can fail at once.
- ``parse_message`` turns a line into a JSON-RPC message with pydantic-core's JSON parser and
  the SDK's model. Validating ``dict[str, Any]`` straight from JSON costs ~10x more than parsing
  first and validating the Python value (1 s against 0.1 s for 8 MiB of tiny parts), and the
  cyclic GC is paused while a big line is parsed: it would traverse the new objects again and
  again (up to 6x the parse itself).
- ``bound_result`` keeps the first ``MAX_CONTENT_PARTS`` parts of a ``tools/call`` result and
  says how many were dropped, and reduces a result of more than ``MAX_RESULT_VALUES`` JSON values
  to its text, so nobody validates, converts or renders a million parts or objects; the repair
  filter applies it before the SDK's validation, on every transport.

Measured with ``bench/bench_big_results.py``.
"""

from __future__ import annotations

import gc
import json
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pydantic_core

MAX_CONTENT_PARTS = 1000
"""The most content parts of one tool result that are kept. At the default ``maxResultChars``
(16 000) a model reads fewer than this many parts of even one character each."""
MAX_RESULT_VALUES = 100_000
"""The most JSON values (objects, arrays, strings, numbers...) of one tool result that are
passed on whole; a bigger one keeps only its text parts. The SDK's validation costs ~0.4 us each."""
KEPT_BYTES = 4096
"""How much of the head and of the tail of an oversized line is kept to find its id."""
BIG_MESSAGE_BYTES = 256 * 1024
"""From this size on, a message is parsed with the cyclic GC paused."""


@dataclass(frozen=True)
class OversizedLine:
    """A line longer than the limit, of which only both ends were kept.

    Attributes:
        size: the line's length in bytes (without its newline).
        head: its first ``KEPT_BYTES`` bytes.
        tail: its last ``KEPT_BYTES`` bytes.
    """

    size: int
    head: bytes
    tail: bytes


class LineSplitter:
    """Bytes in, lines out, holding at most ``max_bytes`` (0 = no limit) of an unfinished line."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._pending: list[bytes] = []
        self._size = 0
        self._head: bytes | None = None
        """Set while a line longer than ``max_bytes`` is being dropped."""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | OversizedLine]:
        """The lines that ``chunk`` completes, in order (without their newlines)."""
        lines: list[bytes | OversizedLine] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:end])
            lines.append(self._finish())
            start = end + 1
        if start < len(chunk):
            self._add(chunk[start:])
        return lines

    def flush(self) -> list[bytes | OversizedLine]:
        """The unfinished last line, if any (the stream ended without a newline)."""
        return [self._finish()] if self._size else []

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._head is not None:
            if len(self._head) < KEPT_BYTES:
                self._head += piece[: KEPT_BYTES - len(self._head)]
            self._tail = (self._tail + piece)[-KEPT_BYTES:]
        elif self.max_bytes and self._size > self.max_bytes:
            line = b"".join([*self._pending, piece])
            self._head, self._tail = line[:KEPT_BYTES], line[-KEPT_BYTES:]
            self._pending.clear()
        else:
            self._pending.append(piece)

    def _finish(self) -> bytes | OversizedLine:
        line: bytes | OversizedLine
        if self._head is not None:
            line = OversizedLine(self._size, self._head, self._tail)
        else:
            line = b"".join(self._pending)
        self._pending.clear()
        self._size, self._head, self._tail = 0, None, b""
        return line


_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
_JSONRPC = rb'(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?'
_ID_FIRST = re.compile(rb"\A\s*\{\s*" + _JSONRPC + rb'"id"\s*:\s*' + _ID + rb'\s*,\s*"(?:result|error)"\s*:')
_RESULT_FIRST = re.compile(rb"\A\s*\{\s*" + _JSONRPC + rb'"(?:result|error)"\s*:')
_ID_LAST = re.compile(rb',\s*"id"\s*:\s*' + _ID + rb"\s*\}\s*\Z")


def response_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the JSON-RPC response whose first and last bytes these are, or None.

    Only a response counts: ``{"jsonrpc": "2.0", "id": 7, "result": ...`` (id before
    ``result``/``error``, as the Python SDK writes it) or ``{"result": ..., "id": 7}`` (id as the
    last key, as the TypeScript SDK writes it). An ``id`` inside the result is never taken: the
    patterns are anchored at the line's ends. A request or a notification gives None.
    """
    match = _ID_FIRST.match(head) or (_ID_LAST.search(tail) if _RESULT_FIRST.match(head) else None)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:  # an escape json rejects
        return None
    return value if isinstance(value, int | str) else None


def oversize_text(server: str, size: int, limit: int) -> str:
    """What a call whose answer was too big fails with."""
    return f"server {server} sent a message of {size} bytes; the limit is {limit} (mcpServers.{server}.maxMessageBytes)"


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic cyclic garbage collection inside (nested and concurrent uses may overlap)."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def parse_message(line: bytes) -> types.JSONRPCMessage:
    """One JSON-RPC message from one line.

    Raises:
        ValueError: the line is not JSON (nesting deeper than 200 levels included) or not a
            JSON-RPC message (pydantic's ``ValidationError`` is a ``ValueError``).
    """
    data = pydantic_core.from_json(line)
    return types.jsonrpc_message_adapter.validate_python(data, by_name=False)


def bound_result(result: Mapping[str, Any]) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """A ``tools/call`` result that costs little to validate, convert and render (pure).

    Content beyond ``MAX_CONTENT_PARTS`` parts is dropped with a note (``trim_content``). A
    result that still holds more than ``MAX_RESULT_VALUES`` JSON values (a ``structuredContent``
    or ``_meta`` of a million tiny objects: the SDK validates and re-serialises each one) keeps
    only its text parts and ``isError``, with a note. Returns the result (the same object when
    nothing changed) and what was changed, for the log.
    """
    result, trimmed = trim_content(result)
    notes = (trimmed,) if trimmed else ()
    if not _more_values_than(result, MAX_RESULT_VALUES):
        return result, notes
    content = result.get("content")
    texts = [
        {"type": "text", "text": part["text"]}
        for part in (content if isinstance(content, list) else ())
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    ]
    note = f"[... only the text of this result is shown: it held more than {MAX_RESULT_VALUES} JSON values]"
    reduced: dict[str, Any] = {"content": [*texts, {"type": "text", "text": note}]}
    if "isError" in result:
        reduced["isError"] = result["isError"]
    return reduced, (
        *notes,
        f"more than {MAX_RESULT_VALUES} JSON values: reduced to its {len(texts)} text parts",
    )


def _more_values_than(value: Any, limit: int) -> bool:
    """Whether ``value`` holds more than ``limit`` JSON values; looks at no more than that many."""
    count = 1
    stack = [value]
    while stack:
        item = stack.pop()
        children: Any = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        count += len(children)
        if count > limit:
            return True
        stack.extend(children)
    return False


def trim_content(
    result: Mapping[str, Any], max_parts: int = MAX_CONTENT_PARTS
) -> tuple[Mapping[str, Any], str | None]:
    """A ``tools/call`` result with at most ``max_parts`` content parts (pure).

    The first ``max_parts`` parts are kept, then one text part says how many were dropped.
    Returns the result (the same object when nothing was dropped) and a note for the log, or None.
    """
    content = result.get("content")
    if not isinstance(content, list) or len(content) <= max_parts:
        return result, None
    dropped = len(content) - max_parts
    note = f"[... {dropped} more content parts not shown: the result had {len(content)} parts]"
    trimmed = {**result, "content": [*content[:max_parts], {"type": "text", "text": note}]}
    return trimmed, f"content: {dropped} of {len(content)} parts dropped (at most {max_parts} are kept)"
