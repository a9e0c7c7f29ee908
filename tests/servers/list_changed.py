"""Fixture: ``add_tool`` adds a tool at run time and sends ``notifications/tools/list_changed``."""

from __future__ import annotations

from _raw import Call, RawServer, main_guard, text

server = RawServer(
    "list_changed",
    tools=[
        {
            "name": "add_tool",
            "description": "Add a tool with this name.",
            "inputSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        }
    ],
    list_changed=True,
)


@server.tool("add_tool")
def add_tool(args: dict, call: Call) -> dict:
    name = str(args["name"])
    server.tools = [
        *server.tools,
        {"name": name, "description": "Added later.", "inputSchema": {"type": "object"}},
    ]
    server.handlers[name] = lambda args, call: text(f"{name} ran")
    server.notify("notifications/tools/list_changed")
    return text(f"added {name}")


if __name__ == "__main__":
    main_guard(server)
