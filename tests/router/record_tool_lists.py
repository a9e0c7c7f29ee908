"""Record the ``tools/list`` answers of the reference MCP servers as JSON fixtures (a script).

The router's evaluation (``test_router_eval.py``, ``bench/bench_router.py``) runs offline on
these files. To refresh them, install the servers and run this script with the commands to use:

    python -m tests.router.record_tool_lists time='mcp-server-time' \\
        fetch='mcp-server-fetch' git='mcp-server-git' \\
        everything='node .../server-everything/dist/index.js stdio' ...

Each argument is ``NAME=COMMAND``; the answer is written to ``tool_lists/NAME.json`` as the list
of tools exactly as the server sent them (plus the server's name and version). It speaks plain
JSON-RPC over stdio, so it needs nothing but the standard library.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "tool_lists"


def _send(proc: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[str], request_id: int) -> dict[str, Any]:
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue  # stray output
        if isinstance(message, dict) and message.get("id") == request_id:
            return message
    raise RuntimeError(f"the server closed its output before answering request {request_id}")


def tool_list(command: str) -> dict[str, Any]:
    proc = subprocess.Popen(
        shlex.split(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "record_tool_lists", "version": "1"},
                },
            },
        )
        info = _answer(proc, 1)["result"].get("serverInfo", {})
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[Any] = []
        cursor = None
        request_id = 2
        while True:
            params = {"cursor": cursor} if cursor else {}
            _send(proc, {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": params})
            result = _answer(proc, request_id)["result"]
            tools.extend(result["tools"])
            cursor = result.get("nextCursor")
            request_id += 1
            if not cursor:
                break
        return {"server": info, "tools": tools}
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str]) -> None:
    HERE.mkdir(exist_ok=True)
    for arg in argv:
        name, _, command = arg.partition("=")
        data = tool_list(command)
        (HERE / f"{name}.json").write_text(
            json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        print(
            f"{name}: {len(data['tools'])} tools ({data['server'].get('name')} {data['server'].get('version')})"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
