"""A tiny MCP stdio server written by hand, for fixture servers that need raw control.

It speaks newline-delimited JSON-RPC on stdin/stdout without importing the MCP SDK, so it starts
in ~50 ms instead of ~1 s, and it can send what the SDK's own server would refuse (schemas
without ``type``, scalar ``structuredContent``, pages, junk lines). Each ``tools/call`` runs in a
thread with a ``Call`` handle that knows whether the client sent ``notifications/cancelled``.

    server = RawServer("demo", tools=[{"name": "hi", "inputSchema": {"type": "object"}}])
    @server.tool("hi")
    def hi(args, call): return text("hello")
    server.run()
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

Handler = Callable[[dict[str, Any], "Call"], dict[str, Any] | None]
"""A tool: arguments and the call in, the result out (None: the handler wrote its answer itself)."""


def text(value: str, *, is_error: bool = False, **extra: Any) -> dict[str, Any]:
    """A call result with one text part."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}], **extra}
    if is_error:
        result["isError"] = True
    return result


class RpcError(Exception):
    """Raise in a handler to answer with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Call:
    """One running tools/call."""

    def __init__(self, server: RawServer, request_id: Any, params: dict[str, Any]) -> None:
        self.server = server
        self.request_id = request_id
        self.cancelled = threading.Event()
        self.progress_token = (params.get("_meta") or {}).get("progressToken")

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.server.notify("notifications/progress", params)


class RawServer:
    """A minimal MCP server over stdio: initialize, ping, tools/list, tools/call."""

    def __init__(
        self,
        name: str,
        tools: list[Any],
        *,
        list_changed: bool = False,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.capabilities = capabilities or {}
        self.tools = tools
        self.handlers: dict[str, Handler] = {}
        self.calls: dict[Any, Call] = {}
        self.list_changed = list_changed
        self.on_cancel: Callable[[Call], None] | None = None
        self.list_page: Callable[[str | None], dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def tool(self, name: str) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            self.handlers[name] = fn
            return fn

        return register

    # ------------------------------------------------------------------ output

    def write_line(self, data: bytes) -> None:
        with self._lock:
            sys.stdout.buffer.write(data + b"\n")
            sys.stdout.buffer.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write_line(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    # ------------------------------------------------------------------- input

    def run(self) -> None:
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            message = json.loads(line)
            method = message.get("method")
            if "id" in message and method is not None:
                self.request(message["id"], method, message.get("params") or {})
            elif method == "notifications/cancelled":
                call = self.calls.get((message.get("params") or {}).get("requestId"))
                if call is not None:
                    call.cancelled.set()
                    if self.on_cancel is not None:
                        self.on_cancel(call)

    def request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        if method == "initialize":
            capabilities = {"tools": {"listChanged": True}} if self.list_changed else {"tools": {}}
            capabilities.update(self.capabilities)
            self.send(
                {
                    "id": request_id,
                    "result": {
                        "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                        "capabilities": capabilities,
                        "serverInfo": {"name": self.name, "version": "0.0.1"},
                    },
                }
            )
        elif method == "ping":
            self.send({"id": request_id, "result": {}})
        elif method == "tools/list":
            if self.list_page is not None:
                result = self.list_page(params.get("cursor"))
            else:
                result = {"tools": self.tools}
            self.send({"id": request_id, "result": result})
        elif method == "tools/call":
            call = Call(self, request_id, params)
            self.calls[request_id] = call
            threading.Thread(target=self._call, args=(call, params), daemon=True).start()
        else:
            self.send({"id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})

    def _call(self, call: Call, params: dict[str, Any]) -> None:
        name = params.get("name")
        handler = self.handlers.get(name)  # type: ignore[arg-type]
        try:
            if handler is None:
                result = text(f"Unknown tool: {name}", is_error=True)
            else:
                result = handler(params.get("arguments") or {}, call)
        except RpcError as exc:
            self.send({"id": call.request_id, "error": {"code": exc.code, "message": exc.message}})
            return
        finally:
            self.calls.pop(call.request_id, None)
        if result is not None and not call.cancelled.is_set():
            self.send({"id": call.request_id, "result": result})


def main_guard(server: RawServer) -> None:
    """Run the server until stdin ends; exit quietly on Ctrl-C or a closed pipe.

    ``$RAW_START_DELAY`` (seconds) delays the start, like a server that loads something first.
    """
    time.sleep(float(os.environ.get("RAW_START_DELAY", "0")))
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        server.run()
