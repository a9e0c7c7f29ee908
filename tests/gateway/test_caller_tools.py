"""Tools per caller (``gateway.callers.NAME.tools``): two callers with different filters and one
without, against the same gateway (``exposeTools`` on), with the SDK's real clients over HTTP.

Each caller lists only its tools (both eras, and REST), its call of another tool answers exactly
as a call of a tool that does not exist (both eras, the lean path of a 2026 call, and the SDK's
``Mcp-Param`` header check before dispatch), and its ``agent_query`` offers the model only its
tools and answers a model that calls another one as it answers an unknown tool. Globs that match
no tool are warned about at start-up.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp import MCPError

from mcp_agent.config import CallerConfig, CallerToolsConfig
from mcp_agent.messages import ToolCall, Turn, Usage
from mcp_agent.providers.base import DeltaCallback, ModelRequest
from mcp_agent.providers.fake import tool_turn

from .conftest import RuleModel, Running, make_config, running_gateway
from .mcp.test_server import connect

ALICE, BOB, CAROL = "alice-" + "a" * 20, "bob-" + "b" * 20, "carol-" + "c" * 20
ALL = ["agent_query", "echo", "geo", "sleep", "write_file"]
SEES = {
    ALICE: ["agent_query", "echo"],  # allow e*, s* and geo; deny sleep and geo
    BOB: ["agent_query", "sleep", "write_file"],  # deny echo and geo
    CAROL: ALL,  # no filter
}
GEO_SCHEMA = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    "required": ["region"],
}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class CallingModel(RuleModel):
    """``RuleModel``, plus ``call NAME``: call the tool ``NAME``; remembers what each query offered."""

    def __init__(self) -> None:
        super().__init__()
        self.offered: dict[str, list[str]] = {}

    async def complete(self, request: ModelRequest, on_delta: DeltaCallback | None = None) -> Turn:
        query = next(m.content for m in request.messages if m.role == "user")
        self.offered[query] = sorted(spec.name for spec in request.tools)
        verb, _, name = query.partition(" ")
        if verb == "call" and request.messages[-1].role == "user":
            usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
            return tool_turn(ToolCall(f"c-{name}", name, {"text": "hi"}), usage=usage)
        return await super().complete(request, on_delta)


def callers() -> dict[str, CallerConfig]:
    return {
        "alice": CallerConfig(
            token=ALICE,
            tools=CallerToolsConfig(allow=["e*", "s*", "geo"], deny=["sleep", "geo"]),
        ),
        "bob": CallerConfig(token=BOB, tools=CallerToolsConfig(deny=["echo", "geo"])),
        "carol": CallerConfig(token=CAROL),
    }


@pytest.fixture(scope="module")
async def gateway() -> AsyncIterator[Running]:
    config = make_config(expose_tools=True, callers=callers())
    async with running_gateway(config, model=CallingModel()) as running:
        running.tools.source.add("geo", lambda region: f"geo {region}", parameters=GEO_SCHEMA, server="mem")
        running.hub.changed()
        yield running


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "legacy"), ("http", "modern")])
async def test_each_caller_lists_only_its_tools(gateway: Running, transport: str, era: str) -> None:
    for token, names in SEES.items():
        async with connect(gateway.url, transport, era, headers=auth(token)) as client:
            tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == names
        # agent_query's description sums up only the caller's tools too
        summary = tools[0].description
        assert [name for name in ALL[1:] if re.search(rf"\b{name}\b", summary)] == names[1:], summary


@pytest.mark.parametrize(("transport", "era"), [("sse", "legacy"), ("http", "modern")])
async def test_a_call_outside_the_callers_tools_is_an_unknown_tool(
    gateway: Running, transport: str, era: str
) -> None:
    calls = len(gateway.tools.source.calls)
    async with connect(gateway.url, transport, era, headers=auth(ALICE)) as alice:
        errors = []
        for name in ("sleep", "write_file", "geo", "no_such_tool"):
            with pytest.raises(MCPError) as raised:
                await alice.call_tool(name, {"text": "hi", "seconds": 0, "region": "eu"})
            errors.append((raised.value.code, raised.value.message.replace(name, "NAME")))
        assert errors == [(-32602, "Unknown tool: NAME")] * 4
        assert (await alice.call_tool("echo", {"text": "mine"})).content[0].text == "mine"
    async with connect(gateway.url, transport, era, headers=auth(BOB)) as bob:
        with pytest.raises(MCPError, match="Unknown tool: echo"):
            await bob.call_tool("echo", {"text": "hi"})
        assert (await bob.call_tool("sleep", {"seconds": 0})).content[0].text == "slept"
    assert [name for name, _ in gateway.tools.source.calls[calls:]] == ["echo", "sleep"]


def raw_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


async def post_raw(
    http: httpx.AsyncClient, token: str, name: str, arguments: dict[str, Any]
) -> tuple[int, Any]:
    headers = {
        **auth(token),
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    response = await http.post("/mcp", content=json.dumps(raw_call(name, arguments)), headers=headers)
    return response.status_code, response.json()


async def test_a_2026_call_outside_is_answered_as_an_unknown_tool_byte_for_byte(gateway: Running) -> None:
    """On the wire: the lean path does not claim it, and the SDK's ``Mcp-Param`` header check
    (``geo`` declares ``x-mcp-header``, and no header is sent) finds no schema for it, as for a
    tool that does not exist; for carol, who may use ``geo``, that check refuses the call."""
    fast = gateway.app.fast_calls
    assert fast is not None
    async with gateway.client() as http:
        for name, arguments in (("sleep", {"seconds": 0}), ("geo", {"region": "eu"})):
            claimed = fast.claimed
            forbidden = await post_raw(http, ALICE, name, arguments)
            unknown = await post_raw(http, ALICE, "no_such_tool", arguments)
            assert fast.claimed == claimed
            assert json.dumps(forbidden).replace(name, "NAME") == json.dumps(unknown).replace(
                "no_such_tool", "NAME"
            )
            assert forbidden[1]["error"]["code"] == -32602
        status, answer = await post_raw(http, CAROL, "geo", {"region": "eu"})
        assert status == 400 and "Mcp-Param-Region" in answer["error"]["message"]
        claimed = fast.claimed
        assert (await post_raw(http, ALICE, "echo", {"text": "x"}))[1]["result"]["content"][0]["text"] == "x"
        assert fast.claimed == claimed + 1  # the caller's own tool still takes the lean path


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_agent_query_offers_only_the_callers_tools_and_a_forbidden_call_is_unknown(
    gateway: Running, era: str
) -> None:
    model = gateway.model
    assert isinstance(model, CallingModel)
    calls = len(gateway.tools.source.calls)
    async with connect(gateway.url, "http", era, headers=auth(ALICE)) as alice:
        texts = {}
        for name in ("write_file", "no_such_tool", "echo"):
            result = await alice.call_tool("agent_query", {"query": f"call {name}"})
            assert not result.is_error
            texts[name] = result.content[0].text.split("\n\n[session_id")[0]
            assert model.offered[f"call {name}"] == ["echo"]
    assert texts["write_file"] == texts["no_such_tool"].replace("no_such_tool", "write_file")
    assert texts["write_file"] == "write_file said: error: unknown tool 'write_file'. Available tools: echo"
    assert texts["echo"] == "echo said: hi"
    assert [name for name, _ in gateway.tools.source.calls[calls:]] == ["echo"]


async def test_a_caller_without_a_filter_is_offered_and_runs_every_tool(gateway: Running) -> None:
    model = gateway.model
    assert isinstance(model, CallingModel)
    async with gateway.client() as http:
        answer = await http.post("/api/v1/query", json={"query": "call geo"}, headers=auth(CAROL))
    assert model.offered["call geo"] == ALL[1:]
    said = answer.json()["answer"]  # geo is known to carol: its arguments are checked (region missing)
    assert said.startswith("geo said: ") and "unknown tool" not in said and "region" in said
    async with gateway.client() as http:
        echoed = await http.post("/api/v1/query", json={"query": "echo all of them"}, headers=auth(CAROL))
    assert echoed.json()["answer"] == "echo said: all of them"


async def test_rest_lists_and_runs_only_the_callers_tools(gateway: Running) -> None:
    model = gateway.model
    assert isinstance(model, CallingModel)
    async with gateway.client() as http:
        for token, names in SEES.items():
            listed = (await http.get("/api/v1/tools", headers=auth(token))).json()
            assert sorted(tool["name"] for tool in listed["tools"]) == names[1:]
            assert listed["count"] == len(names) - 1
            health = (await http.get("/api/v1/health", headers=auth(token))).json()
            assert health["tool_count"] == len(names) - 1
        answer = await http.post("/api/v1/query", json={"query": "call sleep"}, headers=auth(ALICE))
    assert answer.json()["answer"] == "sleep said: error: unknown tool 'sleep'. Available tools: echo"
    assert model.offered["call sleep"] == ["echo"]


async def test_globs_that_match_no_tool_are_warned_at_start_up(caplog: pytest.LogCaptureFixture) -> None:
    typo = {
        "alice": CallerConfig(
            token=ALICE, tools=CallerToolsConfig(allow=["ech*", "time__*"], deny=["wirte_*"])
        ),
        "bob": CallerConfig(token=BOB, tools=CallerToolsConfig(allow=["sleep"])),
    }
    with caplog.at_level(logging.WARNING, logger="mcp_agent.gateway.service"):
        async with running_gateway(make_config(callers=typo)):
            pass
    warned = [record.getMessage() for record in caplog.records if "gateway.callers." in record.getMessage()]
    assert warned == [
        "gateway.callers.alice.tools.allow: 'time__*' matches no tool; no tool name is close; "
        "the caller cannot use what it was meant for",
        "gateway.callers.alice.tools.deny: 'wirte_*' matches no tool; nearest: write_file; "
        "the caller cannot use what it was meant for",
    ]


async def test_a_task_of_a_tool_outside_the_callers_tools_is_never_made() -> None:
    """A 2026 client that declares the Tasks extension: an exposed tool whose server makes tasks
    (``tests/servers/tasks.py``, a real subprocess) is relayed as a task only for a caller that
    may use it; for another, the call is an unknown tool and the server sees nothing."""
    from mcp_agent.assembly import open_agent

    from .mcp.test_task_relay import call, config, create, seen

    callers = {
        "alice": {"token": ALICE, "tools": {"deny": ["fx__slow"]}},
        "bob": {"token": BOB},
    }
    async with (
        running_gateway(config(callers=callers), factory=open_agent) as running,
        running.client() as http,
    ):
        forbidden = await call(http, "fx__slow", {"text": "hi", "polls": 1}, token=ALICE)
        unknown = await call(http, "fx__nope", {"text": "hi", "polls": 1}, token=ALICE)
        assert forbidden["error"] == {**unknown["error"], "message": "Unknown tool: fx__slow"}
        assert forbidden["error"]["code"] == -32602
        assert (await seen(http, token=ALICE))["created"] == []
        assert (await create(http, "fx__slow", {"text": "hi", "polls": 1}, token=BOB))["status"] == "working"


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (
            ["time__*"],
            'gateway.callers.a.tools: expected an object such as {"allow": ["time__*"], "deny": '
            "[\"*__write_*\"]} (globs over exposed names), got list ['time__*']",
        ),
        ("time__*", "gateway.callers.a.tools: expected an object such as"),
        ({"allow": "time__*"}, "gateway.callers.a.tools.allow: Input should be a valid list"),
        ({"deny": [3]}, "gateway.callers.a.tools.deny[0]: Input should be a valid string"),
        ({"allow": [""]}, "gateway.callers.a.tools.allow[0]: String should have at least 1 character"),
        ({"alow": ["x"]}, "gateway.callers.a.tools.alow: unknown key"),
    ],
)
def test_a_bad_tools_filter_is_a_clear_config_error(tools: Any, message: str) -> None:
    from mcp_agent.config import parse_config
    from mcp_agent.exceptions import ConfigError

    with pytest.raises(ConfigError) as raised:
        parse_config({"gateway": {"callers": {"a": {"token": "x", "tools": tools}}}}, environ={})
    assert message in str(raised.value)


def test_a_filter_from_config_reaches_the_caller() -> None:
    from mcp_agent.config import parse_config
    from mcp_agent.gateway.service import GatewayService
    from mcp_agent.tools.allowed import EVERY_TOOL, ToolFilter

    gateway = {
        "authToken": "owner-token",
        "callers": {
            "a": {"token": "x", "tools": {"allow": ["time__*"], "deny": ["*__set_*"]}},
            "b": {"token": "y", "tools": {"deny": ["web__*"]}},
            "c": {"token": "z", "tools": None},
        },
    }
    book = GatewayService(parse_config({"gateway": gateway}, environ={})).callers
    found = {caller.name: caller.tools for caller in book.callers}
    assert found == {
        "owner": EVERY_TOOL,
        "a": ToolFilter(("time__*",), ("*__set_*",)),
        "b": ToolFilter(None, ("web__*",)),
        "c": EVERY_TOOL,
    }
    a = next(caller for caller in book.callers if caller.name == "a")
    assert a.may_use("time__now") and not a.may_use("time__set_zone") and not a.may_use("web__fetch")
