"""Tools for OAuth callers (``gateway.oauth.tools``): rules by token scope or claim, against real
tokens of the test authorization server (``tests/auth/issuer.py``) and the SDK's real clients
over HTTP, with ``exposeTools`` on.

Three OAuth users with different scopes and claims list different tools, call only theirs (any
other answers exactly as an unknown tool), and their ``agent_query`` offers the model only their
tools. Rules combine as a union, the deny of any matching rule wins, a token that matches no
rule has no tool, and without ``tools`` an OAuth caller has every tool. Globs of the rules that
match no tool are warned about at start-up; bad rules are clear config errors.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import MCPError

from mcp_agent.auth.resource import Grant
from mcp_agent.config.sections import OAuthResourceConfig
from mcp_agent.gateway.callers import OAuthTools, gateway_tool_glob_warnings
from mcp_agent.tools.allowed import EVERY_TOOL, ToolFilter

from ..auth.issuer import Issuer, serving
from .conftest import Running
from .mcp.test_server import connect
from .test_caller_tools import CallingModel
from .test_oauth_resource import oauth_gateway

RULES = [
    {"scope": "agent:web", "tools": {"allow": ["echo"]}},  # users with agent:web get echo
    {"tools": {"allow": ["sleep"]}},  # everyone gets sleep
    {"claim": "groups", "value": "ops", "tools": {"allow": ["write_file"], "deny": ["sleep"]}},
]


@asynccontextmanager
async def oauth_tools_gateway(issuer: Issuer, **oauth: Any) -> AsyncIterator[Running]:
    """The gateway on a free port, ``exposeTools`` on, with ``gateway.oauth`` for ``issuer``."""
    async with oauth_gateway(
        issuer, static=False, model=CallingModel(), expose_tools=True, scopePrefix="agent:", **oauth
    ) as running:
        yield running


@pytest.fixture(scope="module")
async def issuer() -> AsyncIterator[Issuer]:
    async with serving(Issuer()) as served:
        yield served


@pytest.fixture(scope="module")
async def gateway(issuer: Issuer) -> AsyncIterator[Running]:
    async with oauth_tools_gateway(issuer, tools=RULES) as running:
        yield running


def tokens(issuer: Issuer, gateway: Running) -> dict[str, str]:
    """alice has agent:web; bob only agent:query; carol is in the ops group (a list claim); dave's
    group is another (a string claim): he matches only the rule for everyone, as bob does."""
    aud = f"{gateway.url}/mcp"  # other tests' gateways move the issuer's default audience
    return {
        "alice": issuer.mint(aud=aud, sub="alice", scope="agent:query agent:web"),
        "bob": issuer.mint(aud=aud, sub="bob", scope="agent:query"),
        "carol": issuer.mint(aud=aud, sub="carol", scope="agent:query", groups=["ops", "dev"]),
        "dave": issuer.mint(aud=aud, sub="dave", scope="agent:query", groups="dev"),
    }


ALL = ["agent_query", "echo", "sleep", "write_file"]
SEES = {
    "alice": ["agent_query", "echo", "sleep"],
    "bob": ["agent_query", "sleep"],
    "carol": ["agent_query", "write_file"],  # ops allows write_file and denies sleep
    "dave": ["agent_query", "sleep"],
}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_oauth_users_list_the_tools_their_scopes_and_claims_give(
    gateway: Running, issuer: Issuer, era: str
) -> None:
    for user, token in tokens(issuer, gateway).items():
        async with connect(gateway.url, "http", era, headers=auth(token)) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
        assert listed == SEES[user], user
    async with gateway.client() as http:  # REST too
        for user, token in tokens(issuer, gateway).items():
            rest = (await http.get("/api/v1/tools", headers=auth(token))).json()
            assert sorted(tool["name"] for tool in rest["tools"]) == SEES[user][1:], user


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_oauth_users_call_of_another_tool_is_an_unknown_tool(
    gateway: Running, issuer: Issuer, era: str
) -> None:
    users = tokens(issuer, gateway)
    calls = len(gateway.tools.source.calls)
    async with connect(gateway.url, "http", era, headers=auth(users["bob"])) as bob:
        errors = []
        for name in ("echo", "no_such_tool"):
            with pytest.raises(MCPError) as raised:
                await bob.call_tool(name, {"text": "hi"})
            errors.append((raised.value.code, raised.value.message.replace(name, "NAME")))
        assert errors == [(-32602, "Unknown tool: NAME")] * 2
        assert (await bob.call_tool("sleep", {"seconds": 0})).content[0].text == "slept"
    async with connect(gateway.url, "http", era, headers=auth(users["alice"])) as alice:
        assert (await alice.call_tool("echo", {"text": "mine"})).content[0].text == "mine"
    async with connect(gateway.url, "http", era, headers=auth(users["carol"])) as carol:
        with pytest.raises(MCPError, match="Unknown tool: sleep"):
            await carol.call_tool("sleep", {"seconds": 0})
    assert [name for name, _ in gateway.tools.source.calls[calls:]] == ["sleep", "echo"]


async def test_an_oauth_users_agent_query_offers_and_runs_only_its_tools(
    gateway: Running, issuer: Issuer
) -> None:
    model = gateway.model
    assert isinstance(model, CallingModel)
    users = tokens(issuer, gateway)
    calls = len(gateway.tools.source.calls)
    async with connect(gateway.url, "http", "modern", headers=auth(users["alice"])) as alice:
        result = await alice.call_tool("agent_query", {"query": "call echo"})
        assert result.content[0].text.split("\n\n[session_id")[0] == "echo said: hi"
        assert model.offered["call echo"] == ["echo", "sleep"]
    async with connect(gateway.url, "http", "modern", headers=auth(users["bob"])) as bob:
        result = await bob.call_tool("agent_query", {"query": "call echo"})
        said = result.content[0].text.split("\n\n[session_id")[0]
        assert said == "echo said: error: unknown tool 'echo'. Available tools: sleep"
        assert model.offered["call echo"] == ["sleep"]
    assert [name for name, _ in gateway.tools.source.calls[calls:]] == ["echo"]


async def test_a_token_that_matches_no_rule_has_no_tool_and_no_rules_means_every_tool(
    issuer: Issuer,
) -> None:
    async with oauth_tools_gateway(issuer, tools=[{"scope": "agent:web", "tools": {}}]) as only_web:
        async with connect(
            only_web.url, "http", "modern", headers=auth(issuer.mint(sub="eve", scope="agent:query"))
        ) as eve:
            assert [tool.name for tool in (await eve.list_tools()).tools] == ["agent_query"]
            with pytest.raises(MCPError, match="Unknown tool: echo"):
                await eve.call_tool("echo", {"text": "hi"})
        web = issuer.mint(sub="eve", scope="agent:query agent:web")
        async with connect(only_web.url, "http", "modern", headers=auth(web)) as eve:  # {}: every tool
            assert len((await eve.list_tools()).tools) == 4
    async with oauth_tools_gateway(issuer) as open_gateway:  # mint for this gateway (its audience)
        everyone = auth(issuer.mint(sub="eve", scope="agent:query"))
        async with connect(open_gateway.url, "http", "modern", headers=everyone) as eve:
            assert [tool.name for tool in (await eve.list_tools()).tools] == ALL


def grant(scopes: str = "", **claims: Any) -> Grant:
    return Grant("oauth:x", frozenset({"query"}), frozenset(scopes.split()), "x", None, claims)


def test_matching_rules_combine_as_a_union_and_any_deny_wins() -> None:
    settings = OAuthResourceConfig.model_validate(
        {
            "issuer": "http://127.0.0.1:1",
            "tools": [
                {"scope": "agent:web", "tools": {"allow": ["web__*"], "deny": ["web__post"]}},
                {"tools": {"allow": ["time__*"]}},
                {"claim": "role", "value": "admin", "tools": {}},
                {"claim": "groups", "value": "ops", "tools": {"deny": ["time__set_*"]}},
            ],
        },
        by_alias=True,
        by_name=True,
    )
    rules = OAuthTools(settings.tools)
    web = rules.filter_for(grant("agent:web"))
    assert web == ToolFilter(("web__*", "time__*"), ("web__post",))
    assert rules.filter_for(grant("agent:web")) is web  # one filter per set of rules: its memo lasts
    assert rules.filter_for(grant()) == ToolFilter(("time__*",), ())
    assert rules.filter_for(grant(role="admin")) is EVERY_TOOL  # {} allows everything
    assert rules.filter_for(grant(role=["admin"])) is EVERY_TOOL
    assert rules.filter_for(grant(role="administrator")) == ToolFilter(("time__*",), ())
    ops = rules.filter_for(grant(role="admin", groups=["ops"]))
    assert ops == ToolFilter(None, ("time__set_*",))
    assert ops.permits("anything") and not ops.permits("time__set_zone")
    assert OAuthTools(None).filter_for(grant()) is EVERY_TOOL
    assert not OAuthTools([]).filter_for(grant()).permits("time__now")


def test_rule_globs_that_match_no_tool_are_named_with_their_place() -> None:
    from mcp_agent.config import parse_config

    gateway = {
        "oauth": {
            "issuer": "http://127.0.0.1:1",
            "tools": [
                {"scope": "s", "tools": {"allow": ["echo", "wbe__*"]}},
                {"tools": {"deny": ["sleeep"]}},
            ],
        },
        "callers": {"a": {"token": "x", "tools": {"allow": ["nope"]}}},
    }
    config = parse_config({"gateway": gateway}, environ={})
    assert gateway_tool_glob_warnings(config.gateway, ["echo", "sleep", "web__get"]) == [
        "gateway.callers.a.tools.allow: 'nope' matches no tool; no tool name is close",
        "gateway.oauth.tools[0].tools.allow: 'wbe__*' matches no tool; nearest: web__get",
        "gateway.oauth.tools[1].tools.deny: 'sleeep' matches no tool; nearest: sleep",
    ]


async def test_rule_globs_that_match_no_tool_are_warned_at_start_up(
    issuer: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    rules = [{"scope": "agent:web", "tools": {"allow": ["echo", "web__*"]}}]
    with caplog.at_level(logging.WARNING, logger="mcp_agent.gateway.service"):
        async with oauth_tools_gateway(issuer, tools=rules):
            pass
    warned = [
        record.getMessage() for record in caplog.records if "gateway.oauth.tools" in record.getMessage()
    ]
    assert warned == [
        "gateway.oauth.tools[0].tools.allow: 'web__*' matches no tool; no tool name is close; "
        "the caller cannot use what it was meant for"
    ]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([], "gateway.oauth.tools: List should have at least 1 item"),
        ({"scope": "a"}, "gateway.oauth.tools: Input should be a valid list"),
        (["web__*"], 'gateway.oauth.tools[0]: expected an object such as {"scope": "agent:web"'),
        ([{"scope": "a"}], "gateway.oauth.tools[0].tools: Field required"),
        (
            [{"scope": "a", "claim": "g", "value": "v", "tools": {}}],
            "gateway.oauth.tools[0]: give either scope or claim (with value), not both",
        ),
        ([{"claim": "groups", "tools": {}}], "gateway.oauth.tools[0]: claim and value go together"),
        ([{"value": "ops", "tools": {}}], "gateway.oauth.tools[0]: claim and value go together"),
        ([{"scope": "", "tools": {}}], "gateway.oauth.tools[0].scope: String should have at least 1"),
        ([{"scope": "a", "tools": ["x"]}], "gateway.oauth.tools[0].tools: expected an object such as"),
        ([{"scope": "a", "tools": {"allow": [""]}}], "gateway.oauth.tools[0].tools.allow[0]: String"),
        ([{"scopes": "a", "tools": {}}], "gateway.oauth.tools[0].scopes: unknown key"),
    ],
)
def test_a_bad_rule_is_a_clear_config_error(tools: Any, message: str) -> None:
    from mcp_agent.config import parse_config
    from mcp_agent.exceptions import ConfigError

    with pytest.raises(ConfigError) as raised:
        parse_config({"gateway": {"oauth": {"issuer": "http://127.0.0.1:1", "tools": tools}}}, environ={})
    assert message in str(raised.value)
