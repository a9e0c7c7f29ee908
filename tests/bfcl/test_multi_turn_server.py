"""One BFCL API class as an MCP server (``bench/bfcl/multi_turn/server.py``), a real stdio
subprocess driven by a real MCP client and by its control socket."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from bench.bfcl.multi_turn import control
from bench.bfcl.multi_turn.data import function_docs, function_names, load_entries, parse_call, to_mcp_tool

ROOT = Path(__file__).resolve().parents[2]
SERVER = str(ROOT / "bench" / "bfcl" / "multi_turn" / "server.py")


async def ask(sock: str, request: dict[str, Any]) -> dict[str, Any]:
    return await anyio.to_thread.run_sync(control.ask, sock, request)


async def test_a_call_changes_the_live_state_and_the_tool_list_follows_the_harness(tmp_path: Path) -> None:
    entry = load_entries("multi_turn_base")[0]  # GorillaFileSystem and TwitterAPI, `cp` excluded
    assert entry.excluded == {"cp"}
    sock = str(tmp_path / "fs.sock")
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    params = StdioServerParameters(command=sys.executable, args=[SERVER, "GorillaFileSystem", sock])
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            await session.initialize()
            everything = [tool.name for tool in (await session.list_tools()).tools]
            assert everything == function_names("GorillaFileSystem")
            config = entry.config("GorillaFileSystem")
            await ask(sock, {"op": "load", "config": config, "long_context": False, "hidden": ["cp"]})
            with anyio.fail_after(30):
                await changed.wait()
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert "cp" not in tools and "mkdir" in tools
            mkdir = next(doc for doc in function_docs("GorillaFileSystem") if doc["name"] == "mkdir")
            assert tools["mkdir"].input_schema == to_mcp_tool(mkdir)["inputSchema"]
            refused = await session.call_tool("cp", {"source": "a", "destination": "b"})
            assert refused.is_error and "cp" in refused.content[0].text  # type: ignore[union-attr]

            moved = await session.call_tool("cd", {"folder": "document"})
            assert not moved.is_error
            assert json.loads(moved.content[0].text) == {"current_working_directory": "document"}  # type: ignore[union-attr]
            made = await session.call_tool("mkdir", {"dir_name": "temp"})
            assert not made.is_error
            # BFCL's own failure answers are results; an exception is BFCL's error text
            missing = await session.call_tool("cd", {"folder": "no_such_folder"})
            assert not missing.is_error and "No such file" in missing.content[0].text  # type: ignore[union-attr]
            failed = await session.call_tool("cd", {"fold": "x"})
            assert failed.is_error
            assert failed.content[0].text.startswith("Error during execution: ")  # type: ignore[union-attr]

            taken = await ask(sock, {"op": "take"})
            assert [call["name"] for call in taken["calls"]] == ["cd", "mkdir", "cd", "cd"]
            assert [call["error"] for call in taken["calls"]] == [False, False, False, True]
            live = control.unpack(taken["instance"])
            assert live._current_dir.name == "document"
            assert "temp" in live._current_dir.contents
            assert (await ask(sock, {"op": "take"}))["calls"] == []  # a take drains the calls

            # a later turn brings a withheld function: the list grows, announced again
            changed = anyio.Event()
            await ask(sock, {"op": "hide", "hidden": []})
            with anyio.fail_after(30):
                await changed.wait()
            assert "cp" in [tool.name for tool in (await session.list_tools()).tools]

            # a new load starts from the entry's initial state again
            await ask(sock, {"op": "load", "config": config, "long_context": False, "hidden": []})
            fresh = control.unpack((await ask(sock, {"op": "take"}))["instance"])
            assert "temp" not in fresh.root.contents["document"].contents

            with pytest.raises(RuntimeError, match="'explode'"):
                await ask(sock, {"op": "explode"})


def test_ground_truth_calls_are_named_by_the_methods_signature() -> None:
    assert parse_call("sort('final_report.pdf')", ["GorillaFileSystem"]) == (
        "sort",
        {"file_name": "final_report.pdf"},
    )
    assert parse_call("cd(folder='document')", ["TwitterAPI", "GorillaFileSystem"]) == (
        "cd",
        {"folder": "document"},
    )
    with pytest.raises(ValueError, match="no involved class"):
        parse_call("post_tweet('hi')", ["GorillaFileSystem"])


def test_bfcl_types_become_json_schema_as_bfcl_converts_them() -> None:
    docs = {doc["name"]: doc for doc in function_docs("TradingBot")}
    schema = to_mcp_tool(docs["place_order"])["inputSchema"]
    assert schema["type"] == "object"
    assert schema["properties"]["price"]["type"] == "number"
    assert schema["properties"]["price"]["format"] == "float"
    assert schema["properties"]["amount"]["type"] == "integer"
    assert "response" not in to_mcp_tool(docs["place_order"])
    for class_name in (
        "GorillaFileSystem",
        "TravelAPI",
        "VehicleControlAPI",
        "MessageAPI",
        "TicketAPI",
        "MathAPI",
    ):
        for doc in function_docs(class_name):
            text = json.dumps(to_mcp_tool(doc)["inputSchema"])
            assert '"type": "dict"' not in text and '"type": "float"' not in text, doc["name"]
