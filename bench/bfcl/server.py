"""One MCP server for every single-turn BFCL entry: each entry's functions as MCP tools.

``python -m bench.bfcl.server PORT`` (from the repository root) serves on 127.0.0.1, one
process for a whole run. The entry and the run are chosen by the URL:
``/r/<run>/<entry id>/mcp`` is an MCP server (Streamable HTTP, JSON answers) whose tools are that
entry's functions under their BFCL names (``math.factorial`` stays ``math.factorial``), with the
input schemas BFCL's OpenAI-style handler sends (``bfcl/schema.py``). It speaks both MCP eras
(2026-07-28's ``server/discover``, and ``initialize`` for 2025-11-25), so a gateway connects in
one or two round trips. Every ``tools/call`` is recorded, its arguments exactly as they arrived
(the JSON of the request), and answered "ok"; ``GET /r/<run>/<entry id>/calls`` hands the run's
calls over (``[[name, arguments], ...]``, in arrival order) and forgets them. ``GET /api/v1/health``
answers ``ok``.

A hand-written ASGI app (no MCP SDK): an SDK server would validate the arguments against the
schema before the tool saw them, and the point is to see what the gateway delivers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench._gateway import GatewayProcess, free_port

from .data import entry
from .schema import mcp_tool

ROOT = Path(__file__).resolve().parents[2]
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
INFO = {"name": "bfcl", "version": "1"}

calls: dict[tuple[str, str], list[list[Any]]] = defaultdict(list)
"""(run, entry id) -> the calls received, each ``[name, arguments]``."""


@functools.cache
def tools_of(entry_id: str) -> list[dict[str, Any]]:
    found = entry(entry_id)
    return [mcp_tool(function, found.category) for function in found.functions]


def answer(run: str, entry_id: str, request: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC result or error (without ``jsonrpc``/``id``) for one request."""
    method, params = request.get("method"), request.get("params") or {}
    if method == "server/discover":
        return {"result": {"supportedVersions": [MODERN], "capabilities": {"tools": {}}, "serverInfo": INFO}}
    if method == "initialize":
        return {"result": {"protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": INFO}}
    if method == "ping":
        return {"result": {}}
    try:
        tools = tools_of(entry_id)
    except (KeyError, ValueError) as error:
        return {"error": {"code": -32602, "message": f"no BFCL entry {entry_id!r}: {error}"}}
    if method == "tools/list":
        return {"result": {"resultType": "complete", "tools": tools}}
    if method == "tools/call":
        name = params.get("name")
        if name not in {tool["name"] for tool in tools}:
            return {"error": {"code": -32602, "message": f"Unknown tool: {name}"}}
        calls[(run, entry_id)].append([name, params.get("arguments")])
        return {"result": {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


async def _send(send: Any, status: int, body: bytes = b"", content_type: bytes = b"application/json") -> None:
    headers = [(b"content-type", content_type)] if body else []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    parts = scope["path"].strip("/").split("/")
    if scope["method"] == "GET" and parts == ["api", "v1", "health"]:
        await _send(send, 200, b"ok", b"text/plain")
        return
    if len(parts) != 4 or parts[0] != "r" or parts[3] not in ("mcp", "calls"):
        await _send(send, 404, b"not found", b"text/plain")
        return
    run, entry_id = parts[1], parts[2]
    if parts[3] == "calls":
        if scope["method"] != "GET":
            await _send(send, 405, b"GET only", b"text/plain")
            return
        await _send(send, 200, json.dumps(calls.pop((run, entry_id), [])).encode())
        return
    if scope["method"] != "POST":  # no server-to-client stream: the client goes on without one
        await _send(send, 405)
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    try:
        request = json.loads(body)
    except ValueError:
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        await _send(send, 400, json.dumps(error).encode())
        return
    if not isinstance(request, dict) or "id" not in request:  # a notification
        await _send(send, 202)
        return
    final = {"jsonrpc": "2.0", "id": request["id"], **answer(run, entry_id, request)}
    await _send(send, 200, json.dumps(final).encode())


@contextlib.contextmanager
def running_server(timeout: float = 60) -> Iterator[str]:
    """This server in a process of its own on a free loopback port; yields its base URL."""
    port = free_port()
    process = GatewayProcess(["-m", "bench.bfcl.server", str(port)], port=port, cwd=ROOT)
    try:
        process.wait_ready(timeout)  # GET /api/v1/health, as a gateway answers it
        yield process.url
    finally:
        process.stop()


def main(argv: list[str]) -> None:
    import uvicorn

    if len(argv) != 1 or not argv[0].isdigit():
        sys.exit("usage: python -m bench.bfcl.server PORT")
    uvicorn.run(app, host="127.0.0.1", port=int(argv[0]), log_level="warning", access_log=False)


if __name__ == "__main__":
    main(sys.argv[1:])
