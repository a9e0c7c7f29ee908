"""The client the conformance suite's client scenarios run: the gateway's ToolHub as the client.

The suite starts a scenario's server and runs ``client.py <server URL>`` with the scenario's
name in ``$MCP_CONFORMANCE_SCENARIO`` (and, for some, what to call in
``$MCP_CONFORMANCE_CONTEXT``). This writes an ``agent.json`` with that URL as its one
``mcpServers`` entry (bare tool names), opens the ToolHub over it exactly as the gateway does
(``open_tool_hub`` from the loaded config), lists the tools and calls what the scenario expects:

- the calls the context names (``toolCalls``: name and arguments);
- ``tools_call``: ``add_numbers`` with two numbers;
- ``json-schema-2020-12-preservation``: ``json_schema_echo`` with the input schema the hub holds
  for ``json_schema_2020_12_tool`` (as its server sent it), so the scenario sees what was kept;
- otherwise every listed tool, with no arguments.

Logs go to stderr (the suite keeps them); the exit status is 0 unless the hub could not be
opened. The suite judges from what its server saw.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from mcp_agent.config import parse_config
from mcp_agent.messages import ToolSpec
from mcp_agent.tools.hub import open_tool_hub

CALL_SECONDS = 20.0


def calls_for(
    scenario: str, context: dict[str, Any], specs: dict[str, ToolSpec]
) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(context.get("toolCalls"), list):
        return [(str(call["name"]), dict(call.get("arguments") or {})) for call in context["toolCalls"]]
    if scenario == "tools_call":
        return [("add_numbers", {"a": 5, "b": 3})]
    if scenario == "json-schema-2020-12-preservation":
        focal = specs.get("json_schema_2020_12_tool")
        schema = focal.input_schema if focal is not None and focal.input_schema is not None else {}
        return [("json_schema_echo", {"schema": schema})]
    return [(name, {}) for name in specs]


async def drive(url: str, scenario: str, context: dict[str, Any], folder: Path) -> None:
    data = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "conformance"},
        "mcpServers": {"scenario": {"url": url, "toolPrefix": "", "startupTimeoutSeconds": 20}},
    }
    (folder / "agent.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    config = parse_config(data, environ={})
    async with open_tool_hub(config.servers(), start="wait", default_timeout=CALL_SECONDS) as hub:
        specs = {spec.name: spec for spec in hub.list_tools()}
        print(f"client: {scenario}: tools {list(specs)}; status {hub.status()}", file=sys.stderr)
        for name, arguments in calls_for(scenario, context, specs):
            result = await hub.call_tool(name, arguments, timeout=CALL_SECONDS)
            print(f"client: {name} -> {result}", file=sys.stderr)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: client.py SERVER_URL (run by the conformance suite)", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="mcp-agent-conformance-client-") as folder:
        anyio.run(drive, argv[-1], scenario, context, Path(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
