"""A 2026-07-28 client through a gateway that speaks the handshake era to its server (targets e
and f of the conformance tier): the server asks over its back channel, and the gateway holds the
call between ``input_required`` rounds (``gateway/mcp/held_calls.py``).

The conformance fixture (``tests/servers/conformance.py``), a stdio child told ``protocol:
legacy``, asks its input-required questions over the back channel there, one at a time.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import MCPError

from mcp_agent.assembly import open_agent
from mcp_agent.config import parse_config
from mcp_agent.gateway.mcp.held_calls import HELD_PREFIX

from ..conftest import Running, running_gateway
from .test_relay import client

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = str(ROOT / "tests" / "servers" / "conformance.py")
# the clients here use sampling and roots, which the SDK calls deprecated (2026-07-28)
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture
async def gateway() -> AsyncIterator[Running]:
    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
            "mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE], "protocol": "legacy"}},
            "gateway": {"description": "Handshake era.", "exposeTools": True},
        },
        environ={},
    )
    async with running_gateway(config, factory=open_agent) as running:
        yield running


async def elicits(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("answered by hand")


def text_of(result: types.CallToolResult) -> str:
    part = result.content[0]
    assert isinstance(part, types.TextContent)
    return part.text


def name_answer(field: str, value: str) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={field: value})


async def test_each_round_has_a_state_of_its_own_and_an_earlier_one_is_refused(gateway: Running) -> None:
    async with client(gateway, "auto", elicitation_callback=elicits) as connected:
        session = connected.session
        name = "fx__test_input_required_result_multi_round"
        first = await session.call_tool(name, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state is not None and first.request_state.startswith(HELD_PREFIX)
        [(key, question)] = (first.input_requests or {}).items()
        assert isinstance(question, types.ElicitRequest)
        assert question.params.message == "Step 1: What is your name?"
        second = await session.call_tool(
            name,
            {},
            input_responses={key: name_answer("name", "Ada")},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(second, types.InputRequiredResult)
        assert second.request_state is not None and second.request_state != first.request_state
        [(key, question)] = (second.input_requests or {}).items()
        assert isinstance(question, types.ElicitRequest)
        assert question.params.message == "Step 2: What is your favorite color?"
        with pytest.raises(MCPError) as stale:  # the first round's state was good for one retry
            await session.call_tool(
                name,
                {},
                input_responses={key: name_answer("color", "red")},
                request_state=first.request_state,
                allow_input_required=True,
            )
        done = await session.call_tool(
            name,
            {},
            input_responses={key: name_answer("color", "blue")},
            request_state=second.request_state,
            allow_input_required=True,
        )
    assert stale.value.code == types.INVALID_PARAMS
    assert isinstance(done, types.CallToolResult) and text_of(done) == "Ada likes blue."
    assert len(gateway.app.tool.held) == 0


async def test_an_altered_state_is_a_protocol_error(gateway: Running) -> None:
    async with client(gateway, "auto", elicitation_callback=elicits) as connected:
        session = connected.session
        name = "fx__test_input_required_result_tampered_state"
        first = await session.call_tool(name, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        [key] = first.input_requests or {}
        answer = name_answer("ok", "yes")
        with pytest.raises(MCPError) as tampered:
            await session.call_tool(
                name,
                {},
                input_responses={key: answer},
                request_state=first.request_state + "-TAMPERED",
                allow_input_required=True,
            )
        done = await session.call_tool(
            name,
            {},
            input_responses={key: answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert tampered.value.code == types.INVALID_PARAMS
    assert "unknown or expired request_state" in tampered.value.message
    assert isinstance(done, types.CallToolResult) and text_of(done) == "state-ok: confirmed"


@pytest.mark.parametrize("declares", [{}, {"elicitation_callback": elicits}])
async def test_the_servers_minus_32021_for_its_refused_request_reaches_the_client(
    gateway: Running, declares: dict[str, Any]
) -> None:
    """The server asks for sampling over its back channel; the gateway refuses it for a client
    without sampling (-32021), the server fails the call with that error, and the client gets it."""
    async with client(gateway, "auto", **declares) as connected:
        with pytest.raises(MCPError) as raised:
            await connected.session.call_tool("fx__test_missing_capability", {}, allow_input_required=True)
    assert raised.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert raised.value.error.data == {"requiredCapabilities": {"sampling": {}}}
    assert len(gateway.app.tool.held) == 0
