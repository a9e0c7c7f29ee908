"""One BFCL API class as an MCP stdio server over a live instance of it (a real subprocess).

Run: ``python bench/bfcl/multi_turn/server.py CLASS CONTROL_SOCKET`` (the gateway starts it as
one of its ``mcpServers``). Tools: the class's functions (``data.to_mcp_tool``), less the ones
the harness hides; a call runs on the live instance and returns what BFCL's executor
(``multi_turn_utils.execute_multi_turn_func_call``) makes of the result: a string as is, a dict
as JSON, anything else ``str()``; an exception is ``"Error during execution: ..."`` (an
``isError`` result).

Stdio, not HTTP: the gateway owns the process (it starts and stops with the gateway), and a
stdio server's notifications need no stream the client must keep open, so the tool list can
change at any moment. The state is driven through a control socket (``control``), which the
harness uses between turns: a new entry (``load``), a missed function's turn (``hide``), and the
state after a turn (``take``). One conversation at a time: the harness replays one entry at a
time against it, as BFCL runs one conversation per set of instances.

It is built on ``tests/servers/_raw.py``'s hand-written server (stdin/stdout JSON-RPC, starts in
~50 ms, and can announce a list change from any thread).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.bfcl.multi_turn.control import pack
from bench.bfcl.multi_turn.data import api_class, function_docs, to_mcp_tool
from tests.servers._raw import Call, RawServer, main_guard, text


def bfcl_text(result: Any) -> str:
    """A call's result as BFCL's executor gives it to a model."""
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


class ApiServer:
    """One API class: its tools, its live instance, and the calls since the last ``take``."""

    def __init__(self, class_name: str) -> None:
        from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

        self.class_name = class_name
        self.cls = api_class(class_name)
        self.stateless = class_name in STATELESS_CLASSES
        self.all_tools = [to_mcp_tool(doc) for doc in function_docs(class_name)]
        self.hidden: frozenset[str] = frozenset()
        self.instance: Any = self.cls()
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.raw = RawServer(f"bfcl-{class_name}", tools=list(self.all_tools), list_changed=True)
        self.raw.request = self._request  # type: ignore[method-assign]

    def visible(self) -> list[dict[str, Any]]:
        return [tool for tool in self.all_tools if tool["name"] not in self.hidden]

    def _request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        if method == "tools/call":
            call = Call(self.raw, request_id, params)
            threading.Thread(target=self._call, args=(call, params), daemon=True).start()
            return
        RawServer.request(self.raw, request_id, method, params)

    def _call(self, call: Call, params: dict[str, Any]) -> None:
        name = str(params.get("name"))
        arguments = dict(params.get("arguments") or {})
        with self.lock:
            if name not in {tool["name"] for tool in self.visible()}:
                self.raw.send({"id": call.request_id, "result": text(f"Unknown tool: {name}", is_error=True)})
                return
            error = False
            try:
                result = bfcl_text(getattr(self.instance, name)(**arguments))
            except Exception as exc:  # BFCL's executor turns every failure into this text
                result, error = f"Error during execution: {exc}", True
            self.calls.append(
                {
                    "name": name,
                    "arguments": arguments,
                    "result": result,
                    "error": error,
                    "at": time.monotonic_ns(),
                }
            )
        self.raw.send({"id": call.request_id, "result": text(result, is_error=error)})

    def _set_hidden(self, hidden: frozenset[str]) -> None:
        if hidden == self.hidden:
            return
        self.hidden = hidden
        self.raw.tools = self.visible()
        self.raw.notify("notifications/tools/list_changed")

    def control(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        with self.lock:
            if op == "load":
                instance = self.cls()
                if not self.stateless:
                    instance._load_scenario(
                        request.get("config") or {}, long_context=bool(request.get("long_context"))
                    )
                self.instance, self.calls = instance, []
                self._set_hidden(frozenset(request.get("hidden") or ()))
                return {"ok": True}
            if op == "hide":
                self._set_hidden(frozenset(request.get("hidden") or ()))
                return {"ok": True}
            if op == "take":
                calls, self.calls = self.calls, []
                return {"instance": pack(self.instance), "calls": calls}
        return {"error": f"unknown op {op!r} (load, hide or take)"}

    def listen(self, path: str) -> None:
        """Answer control requests at ``path`` (a thread; the socket is removed first if stale)."""
        if os.path.exists(path):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(4)

        def serve() -> None:
            while True:
                connection, _ = listener.accept()
                with connection, connection.makefile("rwb") as stream:
                    line = stream.readline()
                    try:
                        answer = self.control(json.loads(line))
                    except Exception as exc:  # a bad request is the harness's bug: say what
                        answer = {"error": f"{type(exc).__name__}: {exc}"}
                    stream.write(json.dumps(answer).encode() + b"\n")
                    stream.flush()

        threading.Thread(target=serve, daemon=True).start()


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit(
            "usage: server.py CLASS CONTROL_SOCKET (CLASS: a BFCL API class, e.g. GorillaFileSystem)"
        )
    server = ApiServer(argv[0])
    server.listen(argv[1])
    main_guard(server.raw)


if __name__ == "__main__":
    main(sys.argv[1:])
