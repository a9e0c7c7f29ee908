"""Fixture: big results, each written as one long stdout line.

- ``big``: one text part of ``chars`` characters.
- ``parts``: about ``bytes`` bytes of tiny text parts (``{"type": "text", "text": "x"}``).
- ``rows``: one short text part plus a ``structuredContent`` of about ``bytes`` bytes of tiny
  rows (``{"rows": [[], [], ...]}``): much JSON structure, no content parts.
- ``big_id_last``: like ``big``, but the response is written with ``id`` as its last key, as the
  TypeScript SDK writes it (``{"result": ..., "jsonrpc": "2.0", "id": 3}``).
- ``noise``: writes one line of ``chars`` bytes that is no JSON-RPC message at all, then answers.
- ``lines``: ``count`` numbered lines of 13 characters, two of them non-ASCII (``line 0007 é😀``):
  ``lines_text(count)``, for tests that page a result and compare the pages exactly.
"""

from __future__ import annotations

import json

from _raw import Call, RawServer, main_guard, text

_CHARS = {"type": "object", "properties": {"chars": {"type": "integer"}}}
_BYTES = {"type": "object", "properties": {"bytes": {"type": "integer"}}}
server = RawServer(
    "huge",
    tools=[
        {"name": "big", "description": "A long text.", "inputSchema": _CHARS},
        {"name": "parts", "description": "Many tiny parts.", "inputSchema": _BYTES},
        {"name": "rows", "description": "Much structured content.", "inputSchema": _BYTES},
        {"name": "big_id_last", "description": "A long text, id last.", "inputSchema": _CHARS},
        {"name": "noise", "description": "A long junk line, then an answer.", "inputSchema": _CHARS},
        {
            "name": "lines",
            "description": "Numbered lines.",
            "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}},
        },
    ],
)


def _digits(chars: int) -> str:
    return ("0123456789" * (chars // 10 + 1))[:chars]


@server.tool("big")
def big(args: dict, call: Call) -> dict:
    return text(_digits(int(args.get("chars", 1_000_000))))


@server.tool("parts")
def parts(args: dict, call: Call) -> dict:
    part = {"type": "text", "text": "x"}
    count = max(1, (int(args.get("bytes", 1_000_000)) - 100) // (len(json.dumps(part)) + 2))
    return {"content": [part] * count}


@server.tool("rows")
def rows(args: dict, call: Call) -> dict:
    count = max(1, (int(args.get("bytes", 1_000_000)) - 150) // 4)
    return text("rows attached", structuredContent={"rows": [[]] * count})


@server.tool("big_id_last")
def big_id_last(args: dict, call: Call) -> None:
    result = text(_digits(int(args.get("chars", 1_000_000))))
    server.write_line(json.dumps({"result": result, "jsonrpc": "2.0", "id": call.request_id}).encode())


@server.tool("noise")
def noise(args: dict, call: Call) -> dict:
    server.write_line(b"#" * int(args.get("chars", 1_000_000)))
    return text("after noise")


def lines_text(count: int) -> str:
    return "".join(f"line {i:04d} é😀\n" for i in range(count))


@server.tool("lines")
def lines(args: dict, call: Call) -> dict:
    return text(lines_text(int(args.get("count", 100))))


if __name__ == "__main__":
    main_guard(server)
