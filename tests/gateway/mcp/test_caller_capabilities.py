"""An exposed call's 2026-07-28 server is told the calling client's capabilities
(``tools/server/caller_capabilities.py``), not the gateway's.

The conformance fixture's ``test_input_required_result_capabilities`` asks (``input_required``)
for exactly what the request's ``_meta`` declares: sampling, elicitation, roots. A real SDK
client that declares only elicitation calls it through the gateway, in both eras, with the
fixture a stdio upstream (the SDK session's path), an HTTP one (the raw path) and an HTTP one
with ``MCP_AGENT_RAW_CALLS=0`` (the SDK session's path over HTTP). Without the forwarding the
fixture sees the gateway's three capabilities and asks all three: a 2026 client gets ``-32021``
from the gateway, a 2025 client an error result.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import MCPError

from mcp_agent.assembly import open_agent
from mcp_agent.config import parse_config
from mcp_agent.tools.server.caller_capabilities import forwarded
from mcp_agent.tools.server.raw_call import RAW_CALLS_ENV, client_capabilities
from tests.servers import over_http

from ..conftest import Running, running_gateway
from .test_relay import client

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = str(ROOT / "tests" / "servers" / "conformance.py")
TOOL = "fx__test_input_required_result_capabilities"
UPSTREAMS = ["stdio", "http", "http-sdk"]
# the clients here use sampling and roots, which the SDK calls deprecated (2026-07-28)
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@contextmanager
def upstream(kind: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The fixture's ``mcpServers`` entry: a stdio child, or over HTTP (raw calls on or off)."""
    if kind == "stdio":
        yield {"command": sys.executable, "args": [FIXTURE]}
        return
    if kind == "http-sdk":
        monkeypatch.setenv(RAW_CALLS_ENV, "0")
    with over_http("conformance.py") as url:
        yield {"url": url}


@pytest.fixture(params=UPSTREAMS)
async def gateway(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Running]:
    with upstream(request.param, monkeypatch) as server:
        config = parse_config(
            {
                "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
                "mcpServers": {"fx": server},
                "gateway": {"description": "Capabilities.", "exposeTools": True},
            },
            environ={},
        )
        async with running_gateway(config, factory=open_agent) as running:
            yield running


@pytest.fixture
async def stateless(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Running]:
    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
            "mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE]}},
            "gateway": {"description": "Capabilities.", "exposeTools": True},
        },
        environ={},
    )
    async with running_gateway(config, factory=open_agent, stateless=True) as running:
        yield running


class Elicits:
    """A client that can answer elicitation only, and what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})


def text_of(result: types.CallToolResult) -> str:
    part = result.content[0]
    assert isinstance(part, types.TextContent)
    return part.text


async def test_a_2026_client_that_declares_only_elicitation_is_asked_only_that(gateway: Running) -> None:
    elicits = Elicits()
    async with client(gateway, "auto", elicitation_callback=elicits) as connected:
        session = connected.session
        first = await session.call_tool(TOOL, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        [(key, question)] = (first.input_requests or {}).items()
        assert key == "ask" and isinstance(question, types.ElicitRequest)
        answer = types.ElicitResult(action="accept", content={"name": "Ada"})
        done = await session.call_tool(
            TOOL,
            {},
            input_responses={key: answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(done, types.CallToolResult) and not done.is_error
    assert text_of(done) == "capabilities checked"


async def test_a_2025_client_that_declares_only_elicitation_is_asked_only_that(gateway: Running) -> None:
    elicits = Elicits()
    async with client(gateway, "legacy", elicitation_callback=elicits) as connected:
        result = await connected.call_tool(TOOL, {})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "capabilities checked"
    assert elicits.asked == ["What is your name?"]


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_the_servers_minus_32021_reaches_the_client_as_it_is(gateway: Running, era: str) -> None:
    """The fixture refuses a client without sampling itself; the client gets its error."""
    async with client(gateway, era, elicitation_callback=Elicits()) as connected:
        with pytest.raises(MCPError) as raised:
            await connected.session.call_tool("fx__test_missing_capability", {}, allow_input_required=True)
    assert raised.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert raised.value.message == "This tool needs the client's sampling capability"
    assert raised.value.error.data == {"requiredCapabilities": {"sampling": {}}}


async def test_a_2025_client_without_a_back_channel_declares_nothing_to_the_server(
    stateless: Running,
) -> None:
    """Stateless HTTP: no question could reach the client, so the server is told of none."""
    elicits = Elicits()
    async with client(stateless, "legacy", elicitation_callback=elicits) as connected:
        result = await connected.call_tool(TOOL, {})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "capabilities checked" and elicits.asked == []


async def test_a_call_the_agents_loop_makes_declares_the_gateways_own(gateway: Running) -> None:
    hub = gateway.app.service.hub
    assert hub is not None
    result = await hub.call_tool(TOOL, {})
    assert result.is_error
    assert "needs elicitation/create, roots/list, sampling/createMessage from the client" in result.text


# ------------------------------------------------------------------------------------------ pure


def caps(**fields: Any) -> types.ClientCapabilities:
    return types.ClientCapabilities.model_validate(fields)


def test_forwarded_takes_the_callers_asks_and_keeps_the_gateways_extensions() -> None:
    own = client_capabilities(True, {"io.modelcontextprotocol/tasks": {}})
    caller = caps(
        elicitation={"form": {}},
        sampling={"tools": {}},
        extensions={"io.example/other": {}},
        experimental={"x": {}},
    )
    assert forwarded(own, caller) == {
        "extensions": {"io.modelcontextprotocol/tasks": {}},
        "elicitation": {"form": {}},
        "sampling": {"tools": {}},
    }


def test_forwarded_never_declares_what_the_gateway_cannot_carry() -> None:
    own = client_capabilities(False, {"io.modelcontextprotocol/tasks": {}})
    caller = caps(elicitation={}, sampling={}, roots={})
    assert forwarded(own, caller) == {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    assert forwarded(client_capabilities(True), caps()) == {}
