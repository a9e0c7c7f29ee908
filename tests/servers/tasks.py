"""Fixture: a 2026-07-28 server that declares the Tasks extension (``io.modelcontextprotocol/tasks``).

Run as ``tasks.py`` (stdio) or ``tasks.py http PORT`` (Streamable HTTP on 127.0.0.1, ``/mcp``).
Written from the extension's text with the SDK's public extension points (``Server.extensions``,
``add_request_handler``), as ``mcp_agent/gateway/mcp/tasks.py`` serves ``agent_query``: a
``tools/call`` whose request declares the extension in its capabilities gets a
``CreateTaskResult`` (``resultType: "task"``) for the task tools; ``tasks/get``, ``tasks/update``
and ``tasks/cancel`` follow. A call that declares nothing is answered at once, as ever.

Tools (no timing: a task moves on when it is polled or told, never by the clock):

- ``slow`` ``{polls, text}``: a task ``working`` for ``polls`` ``tasks/get`` (default 2), then
  ``completed`` with "slow: TEXT"; a plain call answers "slow: TEXT" at once;
- ``fails``: a task that is ``failed`` at its first ``tasks/get`` (error -32000 "the fixture task
  broke"); a plain call answers an error result;
- ``asks``: a task ``input_required`` (a form elicitation under the key ``name``) until
  ``tasks/update`` answers it, then ``completed`` with "hello NAME";
- ``hold``: a task ``working`` until ``tasks/cancel`` (then ``cancelled``);
- ``seen``: (plain) what this process saw, as JSON: ``cancelled`` (task ids), ``created``
  (task ids), ``pid``.

An unknown task id: ``-32602`` "Task not found" (what a restarted process says of its old tasks).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

EXTENSION = "io.modelcontextprotocol/tasks"
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}
TASK_TOOLS = ("slow", "fails", "asks", "hold")

TOOLS = [
    types.Tool(
        name="slow",
        description="Answers after some polls.",
        input_schema={
            "type": "object",
            "properties": {"polls": {"type": "integer"}, "text": {"type": "string"}},
        },
    ),
    *(types.Tool(name=name, description=f"The {name} tool.", input_schema=OBJECT) for name in TASK_TOOLS[1:]),
    types.Tool(name="seen", description="What this process saw.", input_schema=OBJECT),
]

tasks: dict[str, dict[str, Any]] = {}
cancelled: list[str] = []


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def text(value: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": value}], "isError": is_error}


def declared(ctx: ServerRequestContext[Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return (
        ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        and bool(extensions)
        and EXTENSION in (extensions or {})
    )


def wire(task: dict[str, Any]) -> dict[str, Any]:
    out = {
        "taskId": task["taskId"],
        "status": task["status"],
        "createdAt": task["createdAt"],
        "lastUpdatedAt": now(),
        "ttlMs": 600_000,
        "pollIntervalMs": 20,
    }
    for key in ("statusMessage", "result", "error", "inputRequests"):
        if task.get(key) is not None:
            out[key] = task[key]
    return out


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
    args = dict(params.arguments or {})
    name = params.name
    if name == "seen":
        created = list(tasks)
        return text(json.dumps({"cancelled": cancelled, "created": created, "pid": os.getpid()}))
    if name not in TASK_TOOLS:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    if not declared(ctx):  # no task asked: the plain answer
        if name == "slow":
            return text(f"slow: {args.get('text', '')}")
        if name == "fails":
            return text("the fixture call broke", is_error=True)
        return text(f"{name} needs a task", is_error=True)
    task: dict[str, Any] = {
        "taskId": "up_" + secrets.token_hex(8),
        "status": "working",
        "createdAt": now(),
        "tool": name,
        "polls": int(args.get("polls", 2)),
        "text": str(args.get("text", "")),
    }
    if name == "asks":
        task["status"] = "input_required"
        task["inputRequests"] = {
            "name": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Your name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                },
            }
        }
    tasks[task["taskId"]] = task
    return {"resultType": "task", **wire(task)}


class TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


def find(task_id: str) -> dict[str, Any]:
    task = tasks.get(task_id)
    if task is None:
        raise MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")
    return task


async def get(ctx: ServerRequestContext[Any], params: TaskIdParams) -> dict[str, Any]:
    task = find(params.task_id)
    if task["status"] == "working":
        if task["tool"] == "slow":
            task["polls"] -= 1
            if task["polls"] < 0:
                task["status"] = "completed"
                task["result"] = {**text(f"slow: {task['text']}")}
        elif task["tool"] == "fails":
            task["status"] = "failed"
            task["statusMessage"] = "the fixture task broke"
            task["error"] = {"code": -32000, "message": "the fixture task broke"}
    return wire(task)


async def update(ctx: ServerRequestContext[Any], params: UpdateParams) -> dict[str, Any]:
    task = find(params.task_id)
    answer = params.input_responses.get("name")
    if task["status"] == "input_required" and isinstance(answer, dict):
        content = answer.get("content") or {}
        task["status"] = "completed"
        task["inputRequests"] = None
        task["result"] = {**text(f"hello {content.get('name', '?')}")}
    return {}


async def cancel(ctx: ServerRequestContext[Any], params: TaskIdParams) -> dict[str, Any]:
    task = find(params.task_id)
    if task["status"] in ("completed", "failed", "cancelled"):
        raise MCPError(
            types.INVALID_PARAMS, f"Cannot cancel task: already in terminal status {task['status']}"
        )
    task["status"] = "cancelled"
    task["statusMessage"] = "cancelled by the client"
    cancelled.append(task["taskId"])
    return {}


def build() -> Server[Any]:
    server: Server[Any] = Server("tasks-fixture", version="1.0.0", on_list_tools=list_tools)
    server.extensions[EXTENSION] = {}
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    server.add_request_handler("tasks/get", TaskIdParams, get)
    server.add_request_handler("tasks/update", UpdateParams, update)
    server.add_request_handler("tasks/cancel", TaskIdParams, cancel)
    return server


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str]) -> None:
    server = build()
    if len(argv) >= 2 and argv[0] == "http":
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(argv[1]), log_level="warning")
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main(sys.argv[1:])
