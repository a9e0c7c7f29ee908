"""A 2026-07-28 tool server behind the gateway, and the caching hints of the lists the gateway
exposes to 2026-07-28 clients (raw HTTP, to see the wire)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcp_agent.assembly import open_agent
from mcp_agent.config import parse_config

from ...tools.conftest import SERVERS
from ..conftest import Running, eventually, running_gateway

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
async def gateway() -> AsyncIterator[Running]:
    data: dict[str, Any] = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "mcpServers": {
            "eras": {
                "command": sys.executable,
                "args": [str(SERVERS / "eras.py"), "stdio", "modern"],
                "discoverTimeoutSeconds": 30,
            }
        },
        "gateway": {"description": "Eras.", "exposeTools": True},
    }
    async with running_gateway(parse_config(data, environ={}), factory=open_agent) as running:
        [status] = running.app.service.server_status()
        assert status.status == "up", status.error
        yield running


async def ask(gateway: Running, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One 2026-07-28 request; its result."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": ENVELOPE}}
    headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": method}
    if "name" in (params or {}):
        headers["mcp-name"] = params["name"]  # type: ignore[index]
    async with gateway.client() as http:
        response = await http.post("/mcp", content=json.dumps(body), headers=headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert "result" in answer, answer
    return answer["result"]  # type: ignore[no-any-return]


async def test_tools_list_is_sorted_and_says_it_is_private_and_not_cacheable(gateway: Running) -> None:
    listed = await ask(gateway, "tools/list")
    names = [tool["name"] for tool in listed["tools"]]
    assert names == ["agent_query", "eras__ask", "eras__echo", "eras__grow", "eras__wire"]
    assert (listed["ttlMs"], listed["cacheScope"], listed["resultType"]) == (0, "private", "complete")
    for method in ("resources/list", "resources/templates/list", "prompts/list"):
        catalog = await ask(gateway, method)
        assert (catalog["ttlMs"], catalog["cacheScope"]) == (0, "private"), method


async def test_a_2026_upstream_serves_calls_and_its_list_changes_reach_the_gateway(gateway: Running) -> None:
    result = await ask(gateway, "tools/call", {"name": "eras__echo", "arguments": {"text": "through"}})
    assert result["content"][0]["text"] == "through" and result["resultType"] == "complete"
    grown = await ask(gateway, "tools/call", {"name": "eras__grow", "arguments": {"name": "later"}})
    assert grown.get("isError") is not True, grown

    async def listed() -> bool:
        return "eras__later" in [tool["name"] for tool in (await ask(gateway, "tools/list"))["tools"]]

    await eventually(listed, timeout=20)
