"""Fixture: a server whose start, failure and tool list the test controls through files.

- ``$GATED_LOG``: each start appends ``start <pid>`` (and each call ``call <tool>``).
- ``$GATED_FAIL_UNLESS``: while this file is missing, the server exits at once (status 3); with
  ``$GATED_FAIL_AT_GATE`` set, it exits when the gate opens instead (a start that fails late).
- ``$GATED_GATE``: the server does not answer ``initialize`` until this file exists (a slow
  start that ends when the test says so, with no timing involved).
- ``$GATED_TOOLS``: a file of tool names, one a line (default: ``echo``); every tool echoes
  its ``text`` argument with its own name in front. The tool ``announce`` sends
  ``notifications/resources/list_changed`` and ``notifications/prompts/list_changed``.
- ``$GATED_SCHEMA``: a JSON file, the ``inputSchema`` of every tool, sent as the file has it
  (default: one string property ``text``).
- ``$GATED_DESTRUCTIVE``: tool names, comma-separated, annotated ``destructiveHint: true`` (the
  others ``readOnlyHint: true``).
- ``$GATED_DESCRIPTIONS``: a JSON file mapping tool names to their descriptions, read anew at
  each ``tools/list`` (the others keep the default); when set, the server declares
  ``tools.listChanged`` and the tool ``relist`` sends ``notifications/tools/list_changed`` (a
  server whose definitions change while it runs: a "rug pull").
- ``$GATED_RESOURCES``: a file of resource URIs, one a line (a line with ``{`` is a URI
  template); when set, the server declares ``resources``, lists them two a page (or
  ``$GATED_PAGE``; the file is read anew at each request), and reads each listed URI (or one
  its templates match) as ``read <uri>``.
- ``$GATED_PROMPTS``: a file of prompt names, one a line; when set, the server declares
  ``prompts``, lists them one a page, and gets each as ``prompt <name>``.

Each catalog listing is logged as ``<method>``; each ``resources/read`` and ``prompts/get`` the
server receives, declared capability or not, as ``resources/read <uri>`` and ``prompts/get <name>``
(followed by its arguments as JSON when it has any); and each ``tools/call``, known tool or not,
as ``tools/call <name> <arguments>``.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from _raw import Call, RawServer, main_guard, text


def log(line: str) -> None:
    if path := os.environ.get("GATED_LOG"):
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


def lines(variable: str) -> list[str]:
    path = os.environ.get(variable)
    if not path or not os.path.exists(path):
        return []
    return [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]


def tool_names() -> list[str]:
    return lines("GATED_TOOLS") if os.environ.get("GATED_TOOLS") else ["echo"]


def descriptions() -> dict[str, str]:
    path = os.environ.get("GATED_DESCRIPTIONS")
    if not path or not os.path.exists(path):
        return {}
    found: dict[str, str] = json.loads(Path(path).read_text(encoding="utf-8"))
    return found


def tool(name: str) -> dict:
    schema_file = os.environ.get("GATED_SCHEMA")
    described: dict[str, Any] = {
        "name": name,
        "description": descriptions().get(name, f"Echo the text ({name})."),
        "inputSchema": (
            json.loads(Path(schema_file).read_text())
            if schema_file
            else {"type": "object", "properties": {"text": {"type": "string"}}}
        ),
    }
    if destructive := os.environ.get("GATED_DESTRUCTIVE"):
        hint = "destructiveHint" if name in destructive.split(",") else "readOnlyHint"
        described["annotations"] = {hint: True}
    return described


def fail_unless_allowed() -> None:
    if (fail_unless := os.environ.get("GATED_FAIL_UNLESS")) and not os.path.exists(fail_unless):
        os._exit(3)


log(f"start {os.getpid()}")
if not os.environ.get("GATED_FAIL_AT_GATE"):
    fail_unless_allowed()

capabilities: dict[str, Any] = {}
if os.environ.get("GATED_RESOURCES"):
    capabilities["resources"] = {"listChanged": True}
if os.environ.get("GATED_PROMPTS"):
    capabilities["prompts"] = {"listChanged": True}
server = RawServer(
    "gated",
    tools=[tool(name) for name in tool_names()],
    capabilities=capabilities,
    list_changed=bool(os.environ.get("GATED_DESCRIPTIONS")),
)
for name in tool_names():

    @server.tool(name)
    def handle(args: dict, call: Call, name: str = name) -> dict:
        log(f"call {name}")
        if name == "relist":
            server.notify("notifications/tools/list_changed")
        if name == "announce":
            server.notify("notifications/resources/list_changed")
            server.notify("notifications/prompts/list_changed")
        return text(f"{name}: {args.get('text', '')}")


def page(items: list[Any], cursor: str | None, size: int) -> dict[str, Any]:
    start = int(cursor or 0)
    result: dict[str, Any] = {"items": items[start : start + size]}
    if start + size < len(items):
        result["nextCursor"] = str(start + size)
    return result


def readable(uri: str) -> bool:
    for line in lines("GATED_RESOURCES"):
        if "{" in line:
            pattern = re.escape(line)
            if re.fullmatch(re.sub(r"\\\{[^}]*\\\}", "[^/]+", pattern), uri):
                return True
        elif line == uri:
            return True
    return False


def catalog(request_id: object, method: str, params: dict) -> bool:
    """Answer a resources or prompts request; False for any other method."""
    if method == "resources/list" and capabilities.get("resources"):
        listed = [
            {"uri": uri, "name": uri.rsplit("/", 1)[-1]} for uri in lines("GATED_RESOURCES") if "{" not in uri
        ]
        result = page(listed, params.get("cursor"), int(os.environ.get("GATED_PAGE", "2")))
        result["resources"] = result.pop("items")
    elif method == "resources/templates/list" and capabilities.get("resources"):
        templates = [
            {"uriTemplate": uri, "name": "template"} for uri in lines("GATED_RESOURCES") if "{" in uri
        ]
        result = {"resourceTemplates": templates}
    elif method == "resources/read" and capabilities.get("resources"):
        uri = str(params.get("uri"))
        if not readable(uri):
            server.send(
                {"id": request_id, "error": {"code": -32002, "message": f"Resource not found: {uri}"}}
            )
            return True
        result = {"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"read {uri}"}]}
    elif method == "prompts/list" and capabilities.get("prompts"):
        result = page(
            [{"name": name, "description": f"The {name} prompt."} for name in lines("GATED_PROMPTS")],
            params.get("cursor"),
            1,
        )
        result["prompts"] = result.pop("items")
    elif method == "prompts/get" and capabilities.get("prompts"):
        name = str(params.get("name"))
        result = {"messages": [{"role": "user", "content": {"type": "text", "text": f"prompt {name}"}}]}
    else:
        return False
    if method.endswith("/list"):
        log(method)
    server.send({"id": request_id, "result": result})
    return True


original_request = server.request


def request(request_id: object, method: str, params: dict) -> None:
    if method == "initialize" and (gate := os.environ.get("GATED_GATE")):
        while not os.path.exists(gate):
            time.sleep(0.02)
        fail_unless_allowed()
    if method == "tools/list" and os.environ.get("GATED_DESCRIPTIONS"):
        server.tools = [tool(name) for name in tool_names()]
    if method == "tools/call":
        log(f"tools/call {params.get('name')} {json.dumps(params.get('arguments'))}")
    elif method == "resources/read":
        log(f"{method} {params.get('uri')}")
    elif method == "prompts/get":
        arguments = params.get("arguments")
        log(f"{method} {params.get('name')}" + (f" {json.dumps(arguments)}" if arguments else ""))
    if not catalog(request_id, method, params):
        original_request(request_id, method, params)


server.request = request  # type: ignore[method-assign]

if __name__ == "__main__":
    main_guard(server)
