"""Fixture: ``count`` reports ``notifications/progress`` once per step, then answers."""

from __future__ import annotations

from _raw import Call, RawServer, main_guard, text

server = RawServer(
    "progress",
    tools=[
        {
            "name": "count",
            "description": "Count up, reporting progress.",
            "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer"}}},
        }
    ],
)


@server.tool("count")
def count(args: dict, call: Call) -> dict:
    steps = int(args.get("steps", 3))
    for step in range(1, steps + 1):
        call.progress(step, steps, f"step {step}/{steps}")
    return text(f"counted to {steps}")


if __name__ == "__main__":
    main_guard(server)
