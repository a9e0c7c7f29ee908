"""Fixture: tools with media, structured output and metadata; resources and prompts, paged.

Everything it sends is exact, for the pass-through tests (the reference ``everything`` server
from npm covers the same ground less precisely). ``$MEDIA_SCHEME`` (default ``media``) is the
scheme of its URIs, so two copies serve different resources; ``$MEDIA_SHARED`` adds the resource
``shared://one``, whose text names the scheme of the copy that answered.

Tools:

- ``picture`` (title, annotations): text, a PNG image, a WAV audio clip, a resource link and an
  embedded text resource.
- ``weather``: ``structuredContent`` matching its ``outputSchema``; ``no_structure`` and
  ``wrong_structure`` advertise the same schema and return none, or one that does not match;
  ``odd_schema`` advertises an ``outputSchema`` that is not an object schema.
- ``long``: ``{"size": N}`` → a text of N ``a``, an image, a text of N ``b``.
- ``add_note`` / ``add_prompt``: add a resource / prompt and announce the change.
- ``crash``: exits at once (code 3).

Resources ``<scheme>://notes/1..3`` (two a page), the template ``<scheme>://notes/{id}`` (any
id reads), ``<scheme>://blob`` (not listed, binary). Prompts ``greet`` (argument ``name``) and
``show`` (an image message), one a page.
"""

from __future__ import annotations

import os
from typing import Any

from _raw import Call, RawServer, main_guard, text

SCHEME = os.environ.get("MEDIA_SCHEME", "media")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
NUMBER_SCHEMA = {
    "type": "object",
    "properties": {"temp": {"type": "number"}},
    "required": ["temp"],
}
NO_ARGS = {"type": "object", "properties": {}}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "picture",
        "title": "A picture",
        "description": "Media of every kind.",
        "inputSchema": NO_ARGS,
        "annotations": {"readOnlyHint": True, "openWorldHint": False, "title": "Picture"},
    },
    {"name": "weather", "description": "Structured.", "inputSchema": NO_ARGS, "outputSchema": NUMBER_SCHEMA},
    {
        "name": "no_structure",
        "description": "Breaks its schema.",
        "inputSchema": NO_ARGS,
        "outputSchema": NUMBER_SCHEMA,
    },
    {
        "name": "wrong_structure",
        "description": "Breaks its schema.",
        "inputSchema": NO_ARGS,
        "outputSchema": NUMBER_SCHEMA,
    },
    {"name": "odd_schema", "description": "Odd.", "inputSchema": NO_ARGS, "outputSchema": {"type": "string"}},
    {
        "name": "long",
        "description": "Long texts around an image.",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
    },
    {"name": "add_note", "description": "Add a resource.", "inputSchema": NO_ARGS},
    {"name": "add_prompt", "description": "Add a prompt.", "inputSchema": NO_ARGS},
    {"name": "crash", "description": "Exit at once.", "inputSchema": NO_ARGS},
]
notes = [1, 2, 3]
prompts: list[dict[str, Any]] = [
    {
        "name": "greet",
        "title": "Greeting",
        "description": "Greets someone.",
        "arguments": [{"name": "name", "required": True}],
    },
    {"name": "show", "description": "Shows the picture."},
]
server = RawServer(
    "media",
    tools=TOOLS,
    capabilities={"resources": {"listChanged": True}, "prompts": {"listChanged": True}},
)


def note(n: int) -> dict[str, Any]:
    return {"uri": f"{SCHEME}://notes/{n}", "name": f"note {n}", "mimeType": "text/plain"}


@server.tool("picture")
def picture(args: dict[str, Any], call: Call) -> dict[str, Any]:
    return {
        "content": [
            {"type": "text", "text": "a red dot"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
            {"type": "resource_link", **note(1)},
            {
                "type": "resource",
                "resource": {"uri": f"{SCHEME}://notes/2", "mimeType": "text/plain", "text": "note 2"},
            },
        ]
    }


@server.tool("weather")
def weather(args: dict[str, Any], call: Call) -> dict[str, Any]:
    return text('{"temp": 21.5}', structuredContent={"temp": 21.5})


@server.tool("no_structure")
def no_structure(args: dict[str, Any], call: Call) -> dict[str, Any]:
    return text("warm")


@server.tool("wrong_structure")
def wrong_structure(args: dict[str, Any], call: Call) -> dict[str, Any]:
    return text("warm", structuredContent={"temp": "warm"})


@server.tool("odd_schema")
def odd_schema(args: dict[str, Any], call: Call) -> dict[str, Any]:
    return text("plain")


@server.tool("long")
def long(args: dict[str, Any], call: Call) -> dict[str, Any]:
    size = int(args["size"])
    return {
        "content": [
            {"type": "text", "text": "a" * size},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "text", "text": "b" * size},
        ]
    }


@server.tool("add_note")
def add_note(args: dict[str, Any], call: Call) -> dict[str, Any]:
    notes.append(len(notes) + 1)
    server.notify("notifications/resources/list_changed")
    return text(f"added note {notes[-1]}")


@server.tool("add_prompt")
def add_prompt(args: dict[str, Any], call: Call) -> dict[str, Any]:
    prompts.append({"name": f"extra{len(prompts)}", "description": "Added later."})
    server.notify("notifications/prompts/list_changed")
    return text(f"added prompt {prompts[-1]['name']}")


@server.tool("crash")
def crash(args: dict[str, Any], call: Call) -> dict[str, Any]:
    os._exit(3)


def page(items: list[Any], cursor: str | None, size: int) -> tuple[list[Any], str | None]:
    start = int(cursor or 0)
    following = str(start + size) if start + size < len(items) else None
    return items[start : start + size], following


def read(uri: str) -> dict[str, Any] | None:
    if uri == f"{SCHEME}://blob":
        return {"uri": uri, "mimeType": "application/octet-stream", "blob": "AAEC"}
    if uri == "shared://one" and os.environ.get("MEDIA_SHARED"):
        return {"uri": uri, "mimeType": "text/plain", "text": f"shared from {SCHEME}"}
    head = f"{SCHEME}://notes/"
    if uri.startswith(head) and uri[len(head) :].isdigit():
        return {"uri": uri, "mimeType": "text/plain", "text": f"note {uri[len(head) :]}"}
    return None


def get_prompt(name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    if name == "greet":
        who = arguments.get("name", "nobody")
        return {"messages": [{"role": "user", "content": {"type": "text", "text": f"Hello, {who}!"}}]}
    if name == "show":
        image = {"type": "image", "data": PNG, "mimeType": "image/png"}
        return {"description": "The picture.", "messages": [{"role": "user", "content": image}]}
    if any(p["name"] == name for p in prompts):
        return {"messages": [{"role": "user", "content": {"type": "text", "text": name}}]}
    return None


original_request = server.request


def request(request_id: object, method: str, params: dict[str, Any]) -> None:
    cursor = params.get("cursor")
    result: dict[str, Any] | None
    if method == "resources/list":
        listed = [note(n) for n in notes]
        if os.environ.get("MEDIA_SHARED"):
            listed.append({"uri": "shared://one", "name": "shared"})
        items, following = page(listed, cursor, 2)
        result = {"resources": items}
    elif method == "resources/templates/list":
        template = {"uriTemplate": f"{SCHEME}://notes/{{id}}", "name": "note", "mimeType": "text/plain"}
        items, following = [template], None
        result = {"resourceTemplates": items}
    elif method == "resources/read":
        contents = read(str(params.get("uri")))
        if contents is None:
            error = {"code": -32002, "message": f"Resource not found: {params.get('uri')}"}
            server.send({"id": request_id, "error": error})
            return
        result, following = {"contents": [contents]}, None
    elif method == "prompts/list":
        items, following = page(prompts, cursor, 1)
        result = {"prompts": items}
    elif method == "prompts/get":
        result, following = get_prompt(str(params.get("name")), params.get("arguments") or {}), None
        if result is None:
            server.send(
                {
                    "id": request_id,
                    "error": {"code": -32602, "message": f"Unknown prompt: {params.get('name')}"},
                }
            )
            return
    else:
        original_request(request_id, method, params)
        return
    if following is not None:
        result["nextCursor"] = following
    server.send({"id": request_id, "result": result})


server.request = request  # type: ignore[method-assign]

if __name__ == "__main__":
    main_guard(server)
