"""Fixture: ``big`` answers with one text part of ``chars`` characters (one long stdout line)."""

from __future__ import annotations

from _raw import Call, RawServer, main_guard, text

server = RawServer(
    "huge",
    tools=[
        {
            "name": "big",
            "description": "A long text.",
            "inputSchema": {"type": "object", "properties": {"chars": {"type": "integer"}}},
        }
    ],
)


@server.tool("big")
def big(args: dict, call: Call) -> dict:
    chars = int(args.get("chars", 1_000_000))
    return text(("0123456789" * (chars // 10 + 1))[:chars])


if __name__ == "__main__":
    main_guard(server)
