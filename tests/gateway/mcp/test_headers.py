"""The routing headers of 2026-07-28 requests on the gateway's own endpoint: a mismatch is
``-32020`` HeaderMismatch with HTTP 400 (``middleware.EnvelopeHeaders`` and the SDK's checks),
sent as raw HTTP requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcp_agent.gateway.middleware import envelope_header_mismatch

from ..conftest import Running, running_gateway

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "agent_query", "arguments": {"query": "hi"}, "_meta": ENVELOPE},
}


@pytest.fixture(scope="module")
async def gateway() -> AsyncIterator[Running]:
    async with running_gateway() as running:
        yield running


async def post(gateway: Running, body: dict[str, Any], headers: list[tuple[str, str]]) -> tuple[int, Any]:
    async with gateway.client() as http:
        response = await http.post("/mcp", content=json.dumps(body), headers=[*ACCEPT.items(), *headers])
    return response.status_code, response.json()


VERSION = ("mcp-protocol-version", MODERN)


@pytest.mark.parametrize(
    ("body", "headers", "says"),
    [
        (LIST, [VERSION, ("mcp-method", "tools/call")], "mcp-method header does not match"),
        (LIST, [VERSION], "mcp-method header does not match"),
        (
            CALL,
            [VERSION, ("mcp-method", "tools/call"), ("mcp-name", "other")],
            "mcp-name header does not match",
        ),
        (CALL, [VERSION, ("mcp-method", "tools/call")], "mcp-name header does not match"),
        (
            LIST,
            [VERSION, ("mcp-method", "tools/list"), ("mcp-method", "tools/list")],
            "appears more than once",
        ),
        # the header routes these to the handshake-era path: EnvelopeHeaders answers them
        (LIST, [("mcp-method", "tools/list")], "mcp-protocol-version header does not match"),
        (
            LIST,
            [("mcp-protocol-version", "2025-11-25"), ("mcp-method", "tools/list")],
            "mcp-protocol-version header does not match",
        ),
    ],
)
async def test_a_header_that_contradicts_the_body_gets_32020_and_400(
    gateway: Running, body: dict[str, Any], headers: list[tuple[str, str]], says: str
) -> None:
    status, answer = await post(gateway, body, headers)
    assert status == 400
    assert answer["id"] == body["id"]
    assert answer["error"]["code"] == -32020
    assert says in answer["error"]["message"]


async def test_matching_headers_are_served(gateway: Running) -> None:
    status, answer = await post(gateway, LIST, [VERSION, ("mcp-method", "tools/list")])
    assert status == 200
    assert [tool["name"] for tool in answer["result"]["tools"]] == ["agent_query"]


async def test_a_handshake_era_initialize_without_headers_is_not_touched(gateway: Running) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    async with gateway.client() as http:
        response = await http.post("/mcp", content=json.dumps(initialize), headers=ACCEPT)
    assert response.status_code == 200
    assert "mcp-session-id" in response.headers


def test_envelope_header_mismatch_judges_only_2026_envelopes() -> None:
    body = json.dumps(LIST).encode()
    assert envelope_header_mismatch(body, {})["error"]["code"] == -32020  # type: ignore[index]
    assert (
        envelope_header_mismatch(body, {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}) is None
    )
    legacy = {**LIST, "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}}}
    assert envelope_header_mismatch(json.dumps(legacy).encode(), {}) is None
    assert envelope_header_mismatch(b"not json", {}) is None
    assert (
        envelope_header_mismatch(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(), {})
        is None
    )
