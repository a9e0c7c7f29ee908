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
server.tools.append(
    {
        "name": "break_listing",
        "description": "Make the next tools/list fail, then announce a change.",
        "inputSchema": {"type": "object"},
    }
)
broken = False
original_request = server.request


def request(request_id: object, method: str, params: dict) -> None:
    global broken
    if method == "tools/list" and broken:
        broken = False
        server.send({"id": request_id, "error": {"code": -32603, "message": "listing is broken"}})
        return
    original_request(request_id, method, params)


server.request = request  # type: ignore[method-assign]


@server.tool("break_listing")
def break_listing(args: dict, call: Call) -> dict:
    global broken
    broken = True
    server.notify("notifications/tools/list_changed")
    return text("the next listing fails")


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
