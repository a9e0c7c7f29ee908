"""Fixture: ``tools/list`` in three pages (``nextCursor``), five tools in all.

With ``$PAGED_LOOP`` set, the second page names itself as the next one, forever.
"""

from __future__ import annotations

import os
from typing import Any

from _raw import RawServer, main_guard, text

TOOLS = [
    {
        "name": f"tool{i}",
        "description": f"Tool number {i}.",
        "inputSchema": {"type": "object", "properties": {}},
    }
    for i in range(5)
]
PAGES = {None: (0, 2, "page2"), "page2": (2, 4, "page3"), "page3": (4, 5, None)}
if os.environ.get("PAGED_LOOP"):  # a buggy server whose second page points to itself
    PAGES["page2"] = (2, 4, "page2")
server = RawServer("paged", tools=TOOLS)


def list_page(cursor: str | None) -> dict[str, Any]:
    start, end, following = PAGES[cursor]
    result: dict[str, Any] = {"tools": TOOLS[start:end]}
    if following:
        result["nextCursor"] = following
    return result


server.list_page = list_page
for index in range(5):
    server.handlers[f"tool{index}"] = lambda args, call, i=index: text(f"tool {i} ran")

if __name__ == "__main__":
    main_guard(server)
