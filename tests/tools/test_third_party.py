"""A real third-party MCP server from PyPI (``mcp-server-time``) through the ToolHub."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp_agent.config import StdioServerConfig
from mcp_agent.tools.hub import open_tool_hub

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


async def test_mcp_server_time_lists_and_answers() -> None:
    # a test extra (pyproject): missing means a broken set-up, not a reason to skip
    assert TIME_SERVER.exists(), f"mcp-server-time is not installed next to {sys.executable}"
    config = StdioServerConfig(command=str(TIME_SERVER), args=["--local-timezone", "UTC"])
    async with open_tool_hub({"time": config}) as hub:
        (status,) = hub.status()
        assert (status.status, status.error, status.tool_count) == ("up", None, 2)
        tools = {spec.name: spec for spec in hub.list_tools()}
        assert sorted(tools) == ["time__convert_time", "time__get_current_time"]
        assert tools["time__get_current_time"].parameters["required"] == ["timezone"]

        now = await hub.call_tool("time__get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error
        assert now.structured is not None and now.structured["timezone"] == "Europe/Paris"

        converted = await hub.call_tool(
            "time__convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
        )
        assert not converted.is_error
        assert json.loads(converted.text)["target"]["datetime"].endswith("21:00:00+09:00")

        wrong = await hub.call_tool("time__get_current_time", {"timezone": "Mars/Olympus_Mons"})
        assert wrong.is_error and "Mars/Olympus_Mons" in wrong.text
