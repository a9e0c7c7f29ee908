"""Big messages from tool servers: line splitting under a cap, the id of a dropped response,
parsing, and results cut down to what is cheap to handle (all pure)."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import mcp_types as types
import pytest

from mcp_agent.tools._big_messages import (
    KEPT_BYTES,
    MAX_CONTENT_PARTS,
    MAX_RESULT_VALUES,
    LineSplitter,
    OversizedLine,
    bound_result,
    parse_message,
    response_id,
)
from mcp_agent.tools._repair import repair_call_result

# ---------------------------------------------------------------------------- LineSplitter


@pytest.mark.parametrize(
    ("chunks", "lines"),
    [
        ([b"a\nb\n"], [b"a", b"b"]),
        ([b"ab", b"c\nd", b"e\n"], [b"abc", b"de"]),
        ([b"\n\n"], [b"", b""]),
        ([b"1234567890\n"], [b"1234567890"]),  # exactly the limit is fine
        ([b"12345", b"67890\n"], [b"1234567890"]),
        ([b"12345678901\nok\n"], [OversizedLine(11, b"12345678901", b"12345678901"), b"ok"]),
        ([b"123456", b"78901", b"2\nok\n"], [OversizedLine(12, b"123456789012", b"123456789012"), b"ok"]),
    ],
)
def test_lines_are_split_and_a_line_over_the_limit_is_dropped(
    chunks: list[bytes], lines: list[bytes | OversizedLine]
) -> None:
    splitter = LineSplitter(10)
    seen = [line for chunk in chunks for line in splitter.feed(chunk)]
    assert seen == lines
    assert splitter.flush() == []


def test_an_oversized_line_keeps_its_head_and_tail_only() -> None:
    splitter = LineSplitter(100)
    head, middle, tail = b"H" * KEPT_BYTES, b"m" * 50_000, b"T" * KEPT_BYTES
    data = head + middle + tail
    seen = [line for i in range(0, len(data), 1000) for line in splitter.feed(data[i : i + 1000])]
    assert seen == []
    assert splitter.feed(b"\n") == [OversizedLine(len(data), head, tail)]


def test_a_line_without_newline_is_held_up_to_the_limit_then_flushed() -> None:
    splitter = LineSplitter(0)  # 0 = no limit
    assert splitter.feed(b"x" * 100) == []
    assert splitter.flush() == [b"x" * 100]
    assert splitter.flush() == []
    capped = LineSplitter(10)
    capped.feed(b"y" * 25)
    assert capped.flush() == [OversizedLine(25, b"y" * 25, b"y" * 25)]


def test_an_endless_line_costs_no_memory() -> None:
    splitter = LineSplitter(1024 * 1024)
    chunk = b"z" * 65536
    tracemalloc.start()
    try:
        for _ in range(1024):  # 64 MiB without a newline
            assert splitter.feed(chunk) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024  # the 1 MiB held before the switch, and no more
    (line,) = splitter.feed(b"\n")
    assert isinstance(line, OversizedLine) and line.size == 64 * 1024 * 1024


# ----------------------------------------------------------------------------- response_id


def _ends(message: str) -> tuple[bytes, bytes]:
    raw = message.encode()
    return raw[:KEPT_BYTES], raw[-KEPT_BYTES:]


BIG = "x" * (3 * KEPT_BYTES)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ('{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"' + BIG + '"}]}}', 7),
        ('{"jsonrpc": "2.0", "id": "r-1", "result": {"x": "' + BIG + '"}}', "r-1"),
        ('{"id":12,"error":{"code":1,"message":"' + BIG + '"}}', 12),
        ('{"result":{"content":[{"type":"text","text":"' + BIG + '"}]},"jsonrpc":"2.0","id":8}', 8),
        ('{"result": {"t": "' + BIG + '"}, "jsonrpc": "2.0", "id": "a\\"b"} ', 'a"b'),
        # an id inside the result is not the response's
        ('{"result":{"structuredContent":{"id":5},"t":"' + BIG + '"},"jsonrpc":"2.0"}', None),
        ('{"result":{"t":"' + BIG + '","rows":[{"id":5}]}}', None),
        # requests and notifications from the server answer nothing of ours
        ('{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"t":"' + BIG + '"}}', None),
        ('{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + BIG + '"}}', None),
        ('{"method":"x","params":{"t":"' + BIG + '"},"jsonrpc":"2.0","id":4}', None),
        ("#" * len(BIG), None),
        ('{"jsonrpc":"2.0","id":1.5,"result":{"t":"' + BIG + '"}}', None),
    ],
)
def test_response_id_is_read_from_either_end_of_a_response(message: str, expected: Any) -> None:
    assert response_id(*_ends(message)) == expected


# ------------------------------------------------------------------------------- parsing


def test_parse_message_reads_json_rpc_and_refuses_the_rest() -> None:
    message = parse_message(b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}')
    assert isinstance(message, types.JSONRPCResponse) and message.result == {"content": []}
    for junk in (b"hello", b'{"not": "json-rpc"}', b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe"):
        with pytest.raises(ValueError):
            parse_message(junk)


# --------------------------------------------------------------------------- bound_result


def test_a_result_of_many_parts_keeps_the_first_ones_and_says_how_many_went() -> None:
    parts = [{"type": "text", "text": str(i)} for i in range(MAX_CONTENT_PARTS + 500)]
    repaired = repair_call_result({"content": parts, "isError": False})
    content = repaired.result["content"]
    assert content[:MAX_CONTENT_PARTS] == parts[:MAX_CONTENT_PARTS]
    assert content[-1] == {
        "type": "text",
        "text": f"[... 500 more content parts not shown: the result had {MAX_CONTENT_PARTS + 500} parts]",
    }
    assert len(content) == MAX_CONTENT_PARTS + 1 and repaired.result["isError"] is False
    assert repaired.notes == (
        f"content: 500 of {MAX_CONTENT_PARTS + 500} parts dropped (at most 1000 are kept)",
    )
    types.CallToolResult.model_validate(repaired.result)


def test_a_result_of_too_many_values_keeps_its_text_only() -> None:
    result = {
        "content": [
            {"type": "text", "text": "summary"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "more", "_meta": {"rows": [[]] * 10}},
        ],
        "structuredContent": {"rows": [[]] * MAX_RESULT_VALUES},
        "isError": True,
    }
    bounded, notes = bound_result(result)
    assert bounded == {
        "content": [
            {"type": "text", "text": "summary"},
            {"type": "text", "text": "more"},
            {
                "type": "text",
                "text": f"[... only the text of this result is shown: it held more than {MAX_RESULT_VALUES} JSON values]",
            },
        ],
        "isError": True,
    }
    assert notes == (f"more than {MAX_RESULT_VALUES} JSON values: reduced to its 2 text parts",)
    # hidden in a part's _meta, or nested deep: the same
    nested: Any = [[]] * (MAX_RESULT_VALUES // 2)
    for _ in range(3):
        nested = {"a": nested, "b": [[]] * (MAX_RESULT_VALUES // 2)}
    meta = {"content": [{"type": "text", "text": "t", "_meta": {"x": nested}}]}
    assert bound_result(meta)[0]["content"][0] == {"type": "text", "text": "t"}


def test_an_ordinary_result_passes_as_the_same_object() -> None:
    result = {
        "content": [{"type": "text", "text": "x" * 1_000_000}] * MAX_CONTENT_PARTS,
        "structuredContent": {"rows": [[1, 2, 3]] * 1000},
    }
    assert bound_result(result) == (result, ())
    assert bound_result(result)[0] is result
    assert repair_call_result(json.loads('{"content": []}')).notes == ()
