"""The tolerant SSE parser: line ends anywhere, comments, multi-line data, bare JSON, EOF."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mcp_agent.exceptions import ProviderResponseError
from mcp_agent.providers.http.answers import (
    SSEDecoder,
    SSEEvent,
    aiter_sse,
    aiter_sse_lines,
    iter_sse,
    parse_sse,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("data: a\n\n", [SSEEvent(data="a")]),
        ("data: a\r\n\r\n", [SSEEvent(data="a")]),
        ("data: a\r\rdata: b\r\r", [SSEEvent(data="a"), SSEEvent(data="b")]),
        ("data:a\n\n", [SSEEvent(data="a")]),
        ("data:  two spaces\n\n", [SSEEvent(data=" two spaces")]),
        ("data: line1\ndata: line2\n\n", [SSEEvent(data="line1\nline2")]),
        (": keep-alive\n\ndata: x\n\n", [SSEEvent(data="x")]),
        ('event: error\ndata: {"e":1}\n\n', [SSEEvent(event="error", data='{"e":1}')]),
        ("event: ping\n\n", [SSEEvent(event="ping")]),
        ("id: 7\ndata: x\n\ndata: y\n\n", [SSEEvent(data="x", id="7"), SSEEvent(data="y", id="7")]),
        ("retry: 3000\ndata: x\n\n", [SSEEvent(data="x", retry=3000)]),
        ("retry: soon\ndata: x\n\n", [SSEEvent(data="x")]),
        ("foo: bar\ndata: x\n\n", [SSEEvent(data="x")]),
        ("\n\n\n", []),
        ("data\n\n", [SSEEvent(data="")]),
        ("\ufeffdata: bom\n\n", [SSEEvent(data="bom")]),
        # EOF without the final blank line (Gemini, Ollama): the open event is delivered
        ("data: last", [SSEEvent(data="last")]),
        ("data: last\n", [SSEEvent(data="last")]),
        ("data: last\r", [SSEEvent(data="last")]),
        # bare JSON lines (NDJSON, or an error object without "data:")
        ('{"a":1}\n{"b":2}\n', [SSEEvent(data='{"a":1}'), SSEEvent(data='{"b":2}')]),
        ('data: x\n{"error":"boom"}\n', [SSEEvent(data="x"), SSEEvent(data='{"error":"boom"}')]),
        ("data: [DONE]\n\n", [SSEEvent(data="[DONE]")]),
        # U+2028 inside JSON is not a line end
        ('data: {"t":"a\u2028b"}\n\n', [SSEEvent(data='{"t":"a\u2028b"}')]),
    ],
)
def test_parse_sse(text: str, expected: list[SSEEvent]) -> None:
    assert parse_sse(text) == expected


STREAM = (
    b'data: {"x": "caf\xc3\xa9"}\r\n\r\n'
    b": comment\r\n"
    b'event: error\r\ndata: {"error": 1}\r\n\r\n'
    b"data: [DONE]\r\n\r\n"
)
EXPECTED = [
    SSEEvent(data='{"x": "café"}'),
    SSEEvent(event="error", data='{"error": 1}'),
    SSEEvent(data="[DONE]"),
]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, len(STREAM)])
def test_chunk_boundaries_anywhere(size: int) -> None:
    """Splitting between \\r and \\n, or inside a UTF-8 character, changes nothing."""
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert list(iter_sse(chunks)) == EXPECTED


def test_cr_then_lf_in_the_next_chunk_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed_text("data: a\r") == []
    assert decoder.feed_text("\n") == []
    assert decoder.feed_text("data: b\r") == []
    assert decoder.feed_text("\n\r\n") == [SSEEvent(data="a\nb")]


def test_is_done_and_json() -> None:
    assert SSEEvent(data=" [DONE] ").is_done
    assert not SSEEvent(data="{}").is_done
    assert SSEEvent(data='{"a": [1]}').json() == {"a": [1]}


def test_an_oversized_event_is_refused() -> None:
    decoder = SSEDecoder(max_event_chars=10)
    with pytest.raises(ProviderResponseError):
        decoder.feed_text("data: 0123456789abc\n")
    decoder = SSEDecoder(max_event_chars=10)
    with pytest.raises(ProviderResponseError):
        decoder.feed_text("data: 0123456789abc")  # no line end yet


async def _agen(items: list[bytes | str]) -> AsyncIterator[bytes | str]:
    for item in items:
        yield item


async def test_aiter_sse_on_bytes() -> None:
    chunks: list[bytes | str] = [STREAM[i : i + 4] for i in range(0, len(STREAM), 4)]
    assert [e async for e in aiter_sse(_agen(chunks))] == EXPECTED


async def test_aiter_sse_delivers_an_event_open_at_eof() -> None:
    assert [e async for e in aiter_sse(_agen([b"data: a\n\ndata: b"]))] == [
        SSEEvent(data="a"),
        SSEEvent(data="b"),
    ]


async def test_aiter_sse_lines() -> None:
    lines = ["data: a\r\n", "", ": c", "data: b", "data: c", "", "event: error", "data: x"]

    async def gen() -> AsyncIterator[str]:
        for line in lines:
            yield line

    assert [e async for e in aiter_sse_lines(gen())] == [
        SSEEvent(data="a"),
        SSEEvent(data="b\nc"),
        SSEEvent(event="error", data="x"),
    ]
