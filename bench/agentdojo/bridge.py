"""An MCP server serving one AgentDojo suite's tools over its environment (a real subprocess).

Run: ``python bench/agentdojo/bridge.py SUITE STATE_DIR`` (stdio). Tools: the suite's functions,
each with AgentDojo's own pydantic model of its parameters as the input schema, its docstring as
the description and the annotations of ``suites.ANNOTATIONS``; a result is the text AgentDojo
shows a model (``suites.render``: its YAML formatter), a failure (bad arguments, a missing e-mail)
an ``isError`` result with AgentDojo's error text.

State per run goes through files in ``STATE_DIR``, a side channel the model never sees (no tool
of the gateway reaches it):

- ``load.pickle`` — ``{"run": ID, "env": ENVIRONMENT}``, written by the harness before each run
  (the suite's data with the run's injection vectors filled in, as AgentDojo builds it). The first
  call that sees a new ``run`` loads that environment afresh; a run without calls never loads it.
- ``after.pickle`` — ``{"run": ID, "env": ENVIRONMENT, "calls": [{"function", "args"}, ...]}``,
  written after every call: the environment and the calls that ran, for AgentDojo's checkers.

Both files are replaced whole (written beside, then renamed), so a reader never sees half. They
are pickles, not JSON: AgentDojo's environments rebuild parts of themselves when validated (an
``Inbox`` made from JSON recomputes its e-mails from ``initial_emails``, losing a sent one), and a
pickle keeps the object as it is. Only the harness and the bridge, one user's processes, read them.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.agentdojo.suites import ANNOTATIONS, load_suite, render

LOAD = "load.pickle"
AFTER = "after.pickle"


def write_whole(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` pickled, never leaving a half-written file to read."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(partial, path)


def read_whole(path: Path) -> Any:
    return pickle.loads(path.read_bytes())


class Bridge:
    """One suite's tools over one environment, reloaded when ``load.pickle`` names a new run."""

    def __init__(self, suite_name: str, state: Path) -> None:
        from agentdojo.functions_runtime import FunctionsRuntime

        self.suite = load_suite(suite_name)
        self.table = ANNOTATIONS[suite_name]
        self.state = state
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.run: str | None = None
        self.env: Any = None
        self.calls: list[dict[str, Any]] = []

    def tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=function.name,
                description=function.description,
                input_schema=function.parameters.model_json_schema(),
                annotations=types.ToolAnnotations.model_validate(self.table.hints(function.name)),
            )
            for function in self.suite.tools
        ]

    def _current(self) -> None:
        loaded = read_whole(self.state / LOAD)
        if loaded["run"] != self.run:
            self.run, self.env, self.calls = loaded["run"], loaded["env"], []

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        self._current()
        result, error = self.runtime.run_function(self.env, name, arguments, raise_on_error=False)
        self.calls.append({"function": name, "args": arguments})
        write_whole(
            self.state / AFTER,
            {"run": self.run, "env": self.env, "calls": self.calls},
        )
        if error is not None:
            return types.CallToolResult(content=[types.TextContent(text=error)], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=render(result))])


def build(bridge: Bridge) -> Server[Any]:
    tools = bridge.tools()
    names = {tool.name for tool in tools}

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            return types.CallToolResult(
                content=[types.TextContent(text=f"unknown tool {params.name!r}")], is_error=True
            )
        return bridge.call(params.name, dict(params.arguments or {}))

    return Server(
        f"agentdojo-{bridge.suite.name}", version="0.1.35", on_list_tools=list_tools, on_call_tool=call_tool
    )


async def serve(bridge: Bridge) -> None:
    from mcp.server.stdio import stdio_server

    server = build(bridge)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: bridge.py SUITE STATE_DIR (SUITE: workspace, banking, travel or slack)")
    state = Path(argv[1])
    if not state.is_dir():
        raise SystemExit(f"bridge.py: the state folder {state} does not exist")
    anyio.run(serve, Bridge(argv[0], state))


if __name__ == "__main__":
    main(sys.argv[1:])
