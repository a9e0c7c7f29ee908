"""Fixture: tools that fail in each way a server can: an isError result, a JSON-RPC error, an
invalid result, and a scalar ``structuredContent`` (which the SDK 2.x client would reject)."""

from __future__ import annotations

from _raw import Call, RawServer, RpcError, main_guard, text

EMPTY = {"type": "object", "properties": {}}
server = RawServer(
    "fails",
    tools=[
        {"name": "fail", "description": "Always fails.", "inputSchema": EMPTY},
        {"name": "rpc_error", "description": "Answers with a JSON-RPC error.", "inputSchema": EMPTY},
        {"name": "bad_result", "description": "Answers with an invalid result.", "inputSchema": EMPTY},
        {"name": "scalar", "description": "structuredContent is a number.", "inputSchema": EMPTY},
    ],
)


@server.tool("fail")
def fail(args: dict, call: Call) -> dict:
    return text("disk is on fire", is_error=True)


@server.tool("rpc_error")
def rpc_error(args: dict, call: Call) -> dict:
    raise RpcError(-32602, "bad things happened")


@server.tool("bad_result")
def bad_result(args: dict, call: Call) -> dict:
    return {"content": "not a list"}


@server.tool("scalar")
def scalar(args: dict, call: Call) -> dict:
    return {"content": [], "structuredContent": 42}


if __name__ == "__main__":
    main_guard(server)
