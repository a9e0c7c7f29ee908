"""The BFCL MCP server (``bench/bfcl/server.py``) as a real process, through the MCP SDK's client."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from bench.bfcl.data import entry
from bench.bfcl.schema import mcp_tool
from bench.bfcl.server import running_server


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server() as url:
        yield url


async def test_an_entry_is_served_under_its_url_and_its_calls_are_handed_over(server: str) -> None:
    item = entry("simple_python_3")  # math.hypot: a dotted name
    url = f"{server}/r/run1/{item.id}/mcp"
    async with (
        httpx2.AsyncClient() as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = (await session.list_tools()).tools
        assert [tool.name for tool in tools] == [f["name"] for f in item.functions]
        assert "." in tools[0].name
        assert tools[0].input_schema == mcp_tool(item.functions[0], item.category)["inputSchema"]
        arguments = {"x": 4, "y": "5", "extra": None}  # recorded as they arrive, invalid or not
        result = await session.call_tool(tools[0].name, arguments)
        assert not result.is_error and result.content[0].text == "ok"
        with pytest.raises(MCPError, match="Unknown tool: nope"):
            await session.call_tool("nope", {})
        calls = await http.get(f"{server}/r/run1/{item.id}/calls")
        assert calls.json() == [[tools[0].name, arguments]]
        assert (await http.get(f"{server}/r/run1/{item.id}/calls")).json() == []  # handed over once


async def test_bad_urls_and_unknown_entries_are_refused(server: str) -> None:
    async with httpx2.AsyncClient() as http:
        assert (await http.get(f"{server}/api/v1/health")).text == "ok"
        assert (await http.get(f"{server}/elsewhere")).status_code == 404
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        answer = (await http.post(f"{server}/r/x/simple_python_99999/mcp", json=listing)).json()
        assert "no BFCL entry" in answer["error"]["message"]
        answer = (await http.post(f"{server}/r/x/multi_turn_base_0/mcp", json=listing)).json()
        assert "not an id of a single-turn BFCL category" in answer["error"]["message"]
        broken = await http.post(f"{server}/r/x/simple_python_0/mcp", content=b"{nope")
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
