"""Fixture: ``crash`` makes the server exit mid-call with a message on stderr; ``echo`` works."""

from __future__ import annotations

import os
import sys

from _raw import Call, RawServer, main_guard, text

server = RawServer(
    "crashes",
    tools=[
        {
            "name": "crash",
            "description": "Exit the server with this code.",
            "inputSchema": {"type": "object", "properties": {"code": {"type": "integer"}}},
        },
        {
            "name": "echo",
            "description": "Return the text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
    ],
)


@server.tool("crash")
def crash(args: dict, call: Call) -> dict:
    sys.stderr.write(f"crashing on purpose (pid {os.getpid()})\n")
    sys.stderr.flush()
    os._exit(int(args.get("code", 7)))


@server.tool("echo")
def echo(args: dict, call: Call) -> dict:
    return text(str(args.get("text", "")) + f" (pid {os.getpid()})")


if __name__ == "__main__":
    main_guard(server)
