"""Fixture: ``sleep`` takes as long as asked and records a cancellation in the file ``$SLOW_RECORD``.

``ping`` answers at once, to show the server stays usable after a cancelled call.
"""

from __future__ import annotations

import os

from _raw import Call, RawServer, main_guard, text

server = RawServer(
    "slow",
    tools=[
        {
            "name": "sleep",
            "description": "Sleep for some seconds.",
            "inputSchema": {
                "type": "object",
                "properties": {"seconds": {"type": "number"}},
                "required": ["seconds"],
            },
        },
        {"name": "ping", "description": "Answer pong.", "inputSchema": {"type": "object", "properties": {}}},
    ],
)


def record(line: str) -> None:
    path = os.environ.get("SLOW_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


@server.tool("sleep")
def sleep(args: dict, call: Call) -> dict:
    record(f"started {call.request_id}")
    if call.cancelled.wait(float(args.get("seconds", 60))):
        return text("cancelled")
    return text("slept")


@server.tool("ping")
def ping(args: dict, call: Call) -> dict:
    return text("pong")


server.on_cancel = lambda call: record(f"cancelled {call.request_id}")

if __name__ == "__main__":
    main_guard(server)
