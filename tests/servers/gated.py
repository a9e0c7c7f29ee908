"""Fixture: a server whose start, failure and tool list the test controls through files.

- ``$GATED_LOG``: each start appends ``start <pid>`` (and each call ``call <tool>``).
- ``$GATED_FAIL_UNLESS``: while this file is missing, the server exits at once (status 3).
- ``$GATED_GATE``: the server does not answer ``initialize`` until this file exists (a slow
  start that ends when the test says so, with no timing involved).
- ``$GATED_TOOLS``: a file of tool names, one a line (default: ``echo``); every tool echoes
  its ``text`` argument with its own name in front.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from _raw import Call, RawServer, main_guard, text


def log(line: str) -> None:
    if path := os.environ.get("GATED_LOG"):
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


def tool_names() -> list[str]:
    path = os.environ.get("GATED_TOOLS")
    if not path:
        return ["echo"]
    return [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]


def tool(name: str) -> dict:
    return {
        "name": name,
        "description": f"Echo the text ({name}).",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }


log(f"start {os.getpid()}")
if (fail_unless := os.environ.get("GATED_FAIL_UNLESS")) and not os.path.exists(fail_unless):
    raise SystemExit(3)

server = RawServer("gated", tools=[tool(name) for name in tool_names()])
for name in tool_names():

    @server.tool(name)
    def handle(args: dict, call: Call, name: str = name) -> dict:
        log(f"call {name}")
        return text(f"{name}: {args.get('text', '')}")


original_request = server.request


def request(request_id: object, method: str, params: dict) -> None:
    if method == "initialize" and (gate := os.environ.get("GATED_GATE")):
        while not os.path.exists(gate):
            time.sleep(0.02)
    original_request(request_id, method, params)


server.request = request  # type: ignore[method-assign]

if __name__ == "__main__":
    main_guard(server)
