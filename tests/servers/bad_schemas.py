"""Fixture: tools whose schemas the SDK's own server would refuse, beside one good tool.

``inputSchema: {}``, no ``inputSchema``, a non-object schema, an entry without a name, a tool that
requires task-augmented execution, and a tool whose ``structuredContent`` violates its own
``outputSchema`` (the SDK 2.x client would raise RuntimeError on it).
"""

from __future__ import annotations

from _raw import Call, RawServer, main_guard, text

server = RawServer(
    "bad_schemas",
    tools=[
        {"name": "empty_schema", "description": "inputSchema is {}.", "inputSchema": {}},
        {"name": "no_schema", "description": "No inputSchema at all."},
        {"name": "string_schema", "description": "A non-object schema.", "inputSchema": {"type": "string"}},
        {"description": "An entry without a name."},
        {
            "name": "needs_tasks",
            "description": "Requires task-augmented execution.",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required"},
        },
        {
            "name": "wrong_output",
            "description": "Its structuredContent does not match its outputSchema.",
            "inputSchema": {"type": "object", "properties": {}},
            "outputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        },
        {
            "name": "good",
            "description": "A well-formed tool.",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            "annotations": {"readOnlyHint": True, "title": "Good tool"},
        },
    ],
)


@server.tool("good")
def good(args: dict, call: Call) -> dict:
    return text(f"good: {args.get('q')}")


@server.tool("empty_schema")
def empty_schema(args: dict, call: Call) -> dict:
    return text("empty schema works")


@server.tool("wrong_output")
def wrong_output(args: dict, call: Call) -> dict:
    return {"content": [{"type": "text", "text": '{"y": 1}'}], "structuredContent": {"y": 1}}


if __name__ == "__main__":
    main_guard(server)
