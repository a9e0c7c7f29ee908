"""Fixture: a hand-written 2026-07-28 server over Streamable HTTP (an ASGI app, no SDK), for the
tests of the raw call path (``tools/server/raw_call.py``) against the SDK's.

Run as ``raw_http.py http PORT`` (uvicorn on 127.0.0.1). It answers ``server/discover``
(2026-07-28 only), ``initialize`` (2025-11-25, for a client that asks for the handshake era),
``tools/list`` and ``tools/call``, each as JSON, or as an SSE stream when the call's arguments say
``"sse": true``. Tools:

- ``echo`` ``{text}``: the text; ``structured``: text and ``structuredContent``; ``fail``: an
  ``isError`` result; ``image``: a text and a PNG image;
- ``rpc_error``: a JSON-RPC error (-32602 "bad things"); an unknown tool: -32602 "Unknown tool";
- ``bad_result``: an invalid result (``content`` is a string);
- ``big`` ``{size}``: a text of ``size`` characters;
- ``sleep`` ``{seconds}``: answers after that long; a call whose client goes away first is
  counted, ``cancelled`` tells how many were;
- ``die``: the process exits at once (code 3), mid-call;
- ``progress`` ``{steps}``: one ``notifications/progress`` per step on the call's token (SSE);
- ``chatter``: a ``notifications/message`` at each of info and error, when the request's
  ``_meta`` log level lets it through (SSE);
- ``ask``: ``input_required`` with one elicitation; the retry with the answer and the
  ``requestState`` gets "answered: <content>";
- ``header_tool`` ``{region}``: ``x-mcp-header`` on ``region`` (a tool the raw path leaves to the SDK);
- answers wrong at the HTTP level: ``accepted`` (202), ``status_error`` (400 with a JSON-RPC
  error), ``status_404`` (404, text), ``status_500`` (500, JSON that is no JSON-RPC),
  ``redirect`` (307 to ``/moved``, which answers "redirected"), ``plain_text`` (200,
  ``text/plain``), ``garbage`` (JSON that does not parse), ``garbage_sse`` (an SSE event that
  does not parse), ``cut_sse`` (an SSE stream that ends after a log, without a response);
- ``wire``: every ``tools/call`` POST so far: its routing headers (and ``Authorization``), ``_meta``
  and ``params`` keys;
- ``connections``: how many TCP connections the calls so far came on.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

VERSION = "2026-07-28"
LEGACY = "2025-11-25"
OBJECT = {"type": "object"}
TOOLS: list[dict[str, Any]] = [
    {"name": name, "inputSchema": OBJECT}
    for name in (
        "echo",
        "structured",
        "fail",
        "image",
        "rpc_error",
        "bad_result",
        "big",
        "sleep",
        "die",
        "progress",
        "chatter",
        "ask",
        "wire",
        "connections",
        "cancelled",
    )
] + [
    {
        "name": "header_tool",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        },
    }
]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
ROUTING = (
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "accept",
    "content-type",
    "region",
    "mcp-param-region",
    "authorization",
)

wire: list[dict[str, Any]] = []
connections: set[tuple[str, int]] = set()
cancelled = [0]


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": value}], **extra}


class Answer:
    """The messages of one POST's answer: notifications, then a result or an error."""

    def __init__(self) -> None:
        self.notes: list[dict[str, Any]] = []
        self.final: dict[str, Any] = {}


async def call(params: dict[str, Any], answer: Answer, disconnected: anyio.Event) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    meta = params.get("_meta") or {}
    if name == "echo":
        answer.final = {"result": text(str(args.get("text")))}
    elif name == "structured":
        answer.final = {"result": text('{"a": 1}', structuredContent={"a": 1})}
    elif name == "fail":
        answer.final = {"result": text("disk is on fire", isError=True)}
    elif name == "image":
        image = {"type": "image", "data": PNG, "mimeType": "image/png"}
        answer.final = {
            "result": {"resultType": "complete", "content": [{"type": "text", "text": "a dot"}, image]}
        }
    elif name == "rpc_error":
        answer.final = {"error": {"code": -32602, "message": "bad things"}}
    elif name == "bad_result":
        answer.final = {"result": {"resultType": "complete", "content": "not a list"}}
    elif name == "big":
        answer.final = {"result": text("x" * int(args.get("size", 0)))}
    elif name == "sleep":
        with anyio.move_on_after(float(args.get("seconds", 0))):
            await disconnected.wait()
        if disconnected.is_set():
            cancelled[0] += 1
        answer.final = {"result": text("slept")}
    elif name == "die":
        os._exit(3)
    elif name == "progress":
        token = meta.get("progressToken")
        steps = int(args.get("steps", 0))
        for step in range(1, steps + 1):
            if token is not None:
                note = {"progressToken": token, "progress": step, "total": steps, "message": f"step {step}"}
                answer.notes.append({"method": "notifications/progress", "params": note})
        answer.final = {"result": text(f"counted to {steps}")}
    elif name == "chatter":
        asked = meta.get("io.modelcontextprotocol/logLevel")
        for level in ("info", "error"):
            if asked in LEVELS and LEVELS.index(level) >= LEVELS.index(asked):
                log = {"level": level, "logger": "raw_http", "data": f"a line at {level}"}
                answer.notes.append({"method": "notifications/message", "params": log})
        answer.final = {"result": text("chattered")}
    elif name == "ask":
        responses = params.get("inputResponses")
        if responses and params.get("requestState") == "state-1":
            content = responses.get("q", {}).get("content")
            answer.final = {"result": text(f"answered: {json.dumps(content, sort_keys=True)}")}
        else:
            schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            request = {
                "method": "elicitation/create",
                "params": {"message": "ok?", "requestedSchema": schema},
            }
            answer.final = {
                "result": {
                    "resultType": "input_required",
                    "inputRequests": {"q": request},
                    "requestState": "state-1",
                }
            }
    elif name == "header_tool":
        answer.final = {"result": text(f"region {args.get('region')}")}
    elif name == "wire":
        answer.final = {"result": text(json.dumps(wire))}
    elif name == "connections":
        answer.final = {"result": text(str(len(connections)))}
    elif name == "cancelled":
        answer.final = {"result": text(str(cancelled[0]))}
    else:
        answer.final = {"error": {"code": -32602, "message": f"Unknown tool: {name}"}}


BROKEN = (
    "accepted",
    "status_error",
    "status_404",
    "status_500",
    "redirect",
    "plain_text",
    "garbage",
    "garbage_sse",
    "cut_sse",
)


async def respond(
    send: Any, status: int, content_type: str, body: bytes, *extra: tuple[bytes, bytes]
) -> None:
    headers = [(b"content-type", content_type.encode()), *extra] if content_type else list(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def broken(name: str, scope: dict[str, Any], send: Any, request_id: Any) -> None:
    """The tools whose answer is wrong at the HTTP level (the transport's failure paths)."""
    if name == "accepted":
        await respond(send, 202, "", b"")
    elif name == "status_error":
        error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": "refused at 400"}}
        await respond(send, 400, "application/json", json.dumps(error).encode())
    elif name == "status_404":
        await respond(send, 404, "text/plain", b"no such thing")
    elif name == "status_500":
        await respond(send, 500, "application/json", b'{"oops": true}')
    elif name == "redirect" and scope["path"] != "/moved":
        await respond(send, 307, "", b"", (b"location", b"/moved"))
    elif name == "redirect":
        final = {"jsonrpc": "2.0", "id": request_id, "result": text("redirected")}
        await respond(send, 200, "application/json", json.dumps(final).encode())
    elif name == "plain_text":
        await respond(send, 200, "text/plain", b"hello")
    elif name == "garbage":
        await respond(send, 200, "application/json", b"this is no json")
    elif name == "garbage_sse":
        await respond(send, 200, "text/event-stream", b"event: message\ndata: this is no json\n\n")
    elif name == "cut_sse":
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "error", "data": "x"},
        }
        await respond(
            send, 200, "text/event-stream", f"event: message\ndata: {json.dumps(note)}\n\n".encode()
        )


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    if scope["method"] != "POST":
        await send({"type": "http.response.start", "status": 405, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = json.loads(body)
    headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
    method, params, request_id = request.get("method"), request.get("params") or {}, request.get("id")
    answer = Answer()
    sse = False
    if request_id is None:  # a notification (notifications/initialized of the handshake era)
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if method == "initialize":
        info = {"name": "raw_http", "version": "0.0.1"}
        answer.final = {
            "result": {"protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": info}
        }
    elif method == "server/discover":
        answer.final = {
            "result": {"supportedVersions": [VERSION], "capabilities": {"tools": {}, "logging": {}}}
        }
    elif method == "tools/list":
        answer.final = {
            "result": {"resultType": "complete", "tools": TOOLS, "ttlMs": 0, "cacheScope": "private"}
        }
    elif method == "tools/call" and params.get("name") in BROKEN:
        await broken(str(params["name"]), scope, send, request_id)
        return
    elif method == "tools/call":
        client = scope.get("client")
        if client:
            connections.add((client[0], client[1]))
        sse = bool((params.get("arguments") or {}).get("sse"))
        wire.append(
            {
                "headers": {key: headers[key] for key in ROUTING if key in headers},
                "meta": params.get("_meta") or {},
                "params": sorted(key for key in params if key != "_meta"),
                "id": request_id,
            }
        )
        disconnected = anyio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await call(params, answer, disconnected)
            tg.cancel_scope.cancel()
    else:
        answer.final = {"error": {"code": -32601, "message": f"Method not found: {method}"}}
    final = {"jsonrpc": "2.0", "id": request_id, **answer.final}
    if not sse:
        data = json.dumps(final).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})
        return
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    for note in answer.notes:
        event = json.dumps({"jsonrpc": "2.0", **note})
        await send(
            {
                "type": "http.response.body",
                "body": f"event: message\ndata: {event}\n\n".encode(),
                "more_body": True,
            }
        )
    event = json.dumps(final)
    await send({"type": "http.response.body", "body": f"event: message\ndata: {event}\n\n".encode()})


if __name__ == "__main__":
    import uvicorn

    if sys.argv[1:2] != ["http"]:
        sys.exit("usage: raw_http.py http PORT")
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
