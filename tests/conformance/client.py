"""The client the conformance suite's client scenarios run, three ways (``--as``):

- ``hub`` (the default): the gateway's ToolHub as the client. This writes an ``agent.json`` with
  the scenario server's URL as its one ``mcpServers`` entry (bare tool names) and opens the
  ToolHub over it exactly as the gateway does (``open_tool_hub`` from the loaded config);
- ``sdk``: the MCP SDK's ``Client`` straight to the scenario server, the reference;
- ``through``: the same SDK ``Client`` talking to ``mcp-agent serve`` (``exposeTools``, bare
  names) that has the scenario server as its upstream: what a client sees through the gateway;
- ``login``: the authorization scenarios, the gateway as the OAuth client: ``mcp-agent login``
  (a real process, ``$MCP_AGENT_BROWSER`` set to ``tests/auth/browser.py``, which follows the
  authorization redirect without a person; skipped for ``grant: client_credentials``, which
  logs in by itself), then the ToolHub lists and calls the server's tools with the stored
  tokens. ``oauth`` comes from the scenario's context (``oauth_for``).

The suite starts a scenario's server and runs ``python -m tests.conformance.client --as X <server URL>`` with the
scenario's name in ``$MCP_CONFORMANCE_SCENARIO``, its wire version in
``$MCP_CONFORMANCE_PROTOCOL_VERSION`` (the SDK client uses the handshake up to 2025-11-25 and
probes ``server/discover`` for 2026-07-28) and, for some, what to call in
``$MCP_CONFORMANCE_CONTEXT``. The client lists the tools and calls what the scenario expects:

- the calls the context names (``toolCalls``: name and arguments);
- ``tools_call``: ``add_numbers`` with two numbers;
- ``json-schema-2020-12-preservation``: ``json_schema_echo`` with the input schema the hub holds
  for ``json_schema_2020_12_tool`` (as its server sent it), so the scenario sees what was kept;
- otherwise every listed tool, with a value for each property its input schema requires (and
  nothing else): a call a server that validates its arguments accepts, as the gateway does
  (``http-invalid-tool-headers`` judges whether the call of its one valid tool, which requires
  ``region``, reaches it).

The SDK client answers sampling with a fixed text, elicitation by accepting the schema's
defaults, and roots with one root. Logs go to stderr (the suite keeps them); the suite judges
from what its server saw.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import Client
from mcp.client.session import ClientRequestContext

from mcp_agent.config import parse_config
from mcp_agent.messages import ToolSpec
from mcp_agent.tools.hub import open_tool_hub
from tests.conformance.processes import gateway

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
        schema = getattr(focal, "input_schema", None) or {}
        return [("json_schema_echo", {"schema": schema})]
    return [(name, required_arguments(spec)) for name, spec in specs.items()]


def required_arguments(spec: Any) -> dict[str, Any]:
    """A value for each property the tool's input schema requires (a ``ToolSpec`` or an SDK
    ``Tool``): its default, else a plain value of its type."""
    schema = getattr(spec, "input_schema", None) or getattr(spec, "parameters", None) or {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return {
        str(key): default_of(properties.get(key) if isinstance(properties.get(key), dict) else {})
        for key in required
    }


async def drive_hub(
    url: str,
    scenario: str,
    context: dict[str, Any],
    folder: Path,
    *,
    oauth: dict[str, Any] | None = None,
    state: Path | None = None,
) -> bool:
    """List and call the tools; whether the server said it needs a login (again)."""
    server: dict[str, Any] = {"url": url, "toolPrefix": "", "startupTimeoutSeconds": 20}
    if oauth is not None:
        server["oauth"] = oauth
    data = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "conformance"},
        "mcpServers": {"scenario": server},
    }
    (folder / "agent.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    config = parse_config(data, environ={})
    async with open_tool_hub(
        config.servers(), start="wait", default_timeout=CALL_SECONDS, state_dir=state, cache=False
    ) as hub:
        specs = {spec.name: spec for spec in hub.list_tools()}
        print(f"client: {scenario}: tools {list(specs)}; status {hub.status()}", file=sys.stderr)
        again = any(status.error == NEEDS_LOGIN for status in hub.status())
        for name, arguments in calls_for(scenario, context, specs):
            result = await hub.call_tool(name, arguments, timeout=CALL_SECONDS)
            print(f"client: {name} -> {result}", file=sys.stderr)
            again = again or NEEDS_LOGIN in result.text
    return again


def default_of(schema: dict[str, Any]) -> Any:
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if kind == "array":
        return []
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    return {"integer": 0, "number": 0, "boolean": False}.get(str(kind), "conformance")


async def sampled(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(text="Paris"), model="conformance"
    )


async def elicited(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    if not isinstance(params, types.ElicitRequestFormParams):
        return types.ElicitResult(action="decline")
    properties = dict(params.requested_schema.get("properties") or {})
    return types.ElicitResult(
        action="accept", content={key: default_of(value) for key, value in properties.items()}
    )


async def roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///conformance", name="conformance")])


async def drive_sdk(url: str, scenario: str, context: dict[str, Any]) -> None:
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    client = Client(
        url,
        mode="auto" if version >= "2026" else "legacy",
        read_timeout_seconds=CALL_SECONDS,
        sampling_callback=sampled,
        elicitation_callback=elicited,
        list_roots_callback=roots,
    )
    with anyio.fail_after(4 * CALL_SECONDS):
        async with client:
            tools = (await client.list_tools()).tools
            specs = {tool.name: tool for tool in tools}
            print(f"client: {scenario}: tools {list(specs)} ({client.protocol_version})", file=sys.stderr)
            for name, arguments in calls_for(scenario, context, specs):
                try:
                    result = await client.call_tool(name, arguments)
                except Exception as error:  # a refused call is the scenario's to judge
                    print(f"client: {name} -> {type(error).__name__}: {error}", file=sys.stderr)
                else:
                    print(f"client: {name} -> {result}", file=sys.stderr)


def through_gateway(url: str, scenario: str, context: dict[str, Any], folder: Path) -> None:
    """``mcp-agent serve`` with the scenario server as its upstream, the SDK client in front."""
    upstream = {"scenario": {"url": url, "toolPrefix": "", "startupTimeoutSeconds": 20}}
    try:
        with gateway(folder, upstream, expose=True) as relay:
            anyio.run(drive_sdk, relay, scenario, context)
    finally:
        log = folder / "gateway.log"
        if log.exists():
            sys.stderr.write(log.read_text(errors="replace")[-3000:])


CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""The Client ID Metadata Document the suite's ``auth/basic-cimd`` expects as the client id."""
BROWSER = Path(__file__).resolve().parents[1] / "auth" / "browser.py"


def oauth_for(scenario: str, context: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The server's ``oauth`` key for an authorization scenario, from its context."""
    if scenario.startswith("auth/client-credentials"):
        oauth: dict[str, Any] = {"grant": "client_credentials", "clientId": context["client_id"]}
        if "private_key_pem" in context:
            key = folder / "client-key.pem"
            key.write_text(context["private_key_pem"], encoding="utf-8")
            oauth |= {
                "privateKeyFile": str(key),
                "privateKeyAlgorithm": context.get("signing_algorithm", "RS256"),
            }
        else:
            oauth["clientSecret"] = context["client_secret"]
        return oauth
    if "client_id" in context:  # a client registered beforehand (auth/pre-registration)
        return {"clientId": context["client_id"], "clientSecret": context["client_secret"]}
    return {"clientMetadataUrl": CIMD_URL}


LOGINS = 3
"""The most times the driver logs in for one scenario: what a person does when the gateway says
"needs login" again (the server changed its authorization server, or asks for more scopes); the
suite's ``auth/scope-retry-limit`` allows three authorization requests."""


async def drive_login(url: str, scenario: str, context: dict[str, Any], folder: Path) -> None:
    oauth = oauth_for(scenario, context, folder)
    data = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "conformance"},
        "mcpServers": {
            "scenario": {"url": url, "toolPrefix": "", "startupTimeoutSeconds": 20, "oauth": oauth}
        },
    }
    (folder / "agent.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.environ["MCP_AGENT_STATE_DIR"] = str(folder / "state")
    for _ in range(LOGINS if oauth.get("grant") != "client_credentials" else 1):
        if oauth.get("grant") != "client_credentials":
            done = await anyio.run_process(
                [
                    sys.executable,
                    "-m",
                    "mcp_agent",
                    "login",
                    "scenario",
                    "--config",
                    str(folder / "agent.json"),
                ],
                env={**os.environ, "MCP_AGENT_BROWSER": f"{sys.executable} {BROWSER}"},
                check=False,
            )
            print(
                f"client: login -> {done.returncode}\n{done.stderr.decode(errors='replace')}", file=sys.stderr
            )
        if not await drive_hub(url, scenario, context, folder, oauth=oauth, state=folder / "state"):
            return


NEEDS_LOGIN = "needs login: `mcp-agent login scenario`"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="run by the conformance suite's client mode")
    parser.add_argument("--as", dest="mode", choices=("hub", "sdk", "through", "login"), default="hub")
    parser.add_argument("url")
    options = parser.parse_args(argv)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="mcp-agent-conformance-client-") as folder:
        if options.mode == "hub":
            anyio.run(drive_hub, options.url, scenario, context, Path(folder))
        elif options.mode == "sdk":
            anyio.run(drive_sdk, options.url, scenario, context)
        elif options.mode == "login":
            anyio.run(drive_login, options.url, scenario, context, Path(folder))
        else:
            through_gateway(options.url, scenario, context, Path(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
