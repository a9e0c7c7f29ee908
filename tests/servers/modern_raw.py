"""Fixture: a hand-written 2026-07-28 server over stdio, with full control of its
``subscriptions/listen`` streams (``_raw.py``: no SDK).

It answers ``server/discover`` (2026-07-28 only, ``tools.listChanged``), lists its tools without
the cache hints and ``resultType`` 2026-07-28 requires (a sloppy server), acknowledges each
``subscriptions/listen``, and has these tools:

- ``add`` ``{name, quiet?}``: add a tool; announce it on the open listen stream unless ``quiet``;
- ``drop``: end the open listen stream (a result: the spec's graceful close).

Each request method it gets is appended to the file ``$ERA_LOG`` (when set).
"""

from __future__ import annotations

import os
from typing import Any

from _raw import Call, RawServer, main_guard, text

SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"

server = RawServer(
    "modern_raw",
    tools=[
        {"name": "add", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
        {"name": "drop", "inputSchema": {"type": "object"}},
    ],
)
listening: list[Any] = []  # the id of the open listen request, if any
original = server.request


def log(method: str) -> None:
    path = os.environ.get("ERA_LOG")
    if path:
        with open(path, "a") as file:
            file.write(method + "\n")


def request(request_id: Any, method: str, params: dict[str, Any]) -> None:
    log(method)
    if method == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": True}}}
        server.send({"id": request_id, "result": result})
    elif method == "tools/list":
        server.send({"id": request_id, "result": {"tools": server.tools}})
    elif method == "subscriptions/listen":
        listening[:] = [request_id]
        honored = (params.get("notifications") or {}) if isinstance(params, dict) else {}
        ack = {"_meta": {SUBSCRIPTION: request_id}, "notifications": honored}
        server.notify("notifications/subscriptions/acknowledged", ack)
    else:
        original(request_id, method, params)


server.request = request  # type: ignore[method-assign]


@server.tool("add")
def add(args: dict[str, Any], call: Call) -> dict[str, Any]:
    server.tools.append({"name": str(args["name"]), "inputSchema": {"type": "object"}})
    if listening and not args.get("quiet"):
        server.notify("notifications/tools/list_changed", {"_meta": {SUBSCRIPTION: listening[0]}})
    return text("added", resultType="complete")


@server.tool("drop")
def drop(args: dict[str, Any], call: Call) -> dict[str, Any]:
    if listening:
        server.send({"id": listening.pop(), "result": {"resultType": "complete"}})
    return text("dropped", resultType="complete")


if __name__ == "__main__":
    main_guard(server)
