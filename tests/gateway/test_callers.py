"""Callers kept apart: each sees and continues only its own conversations, events and approvals;
MCP sessions are bound to the caller that opened them; scopes gate approving and admin views."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import CallerConfig
from mcp_agent.gateway.callers import ALL_SCOPES, LOCAL, Caller, CallerBook, bearer_token

from .conftest import Running, eventually, make_config, running_gateway, sse_events
from .test_mcp import connect

ALICE, BOB, OPS = "alice-" + "a" * 20, "bob-" + "b" * 20, "ops-" + "o" * 20


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
async def callers_gateway() -> AsyncIterator[Running]:
    callers = {
        "alice": CallerConfig(token=ALICE, scopes=["query"]),
        "bob": CallerConfig(token=BOB, scopes=["query"]),
        "ops": CallerConfig(token=OPS, scopes=["query", "approve", "admin"]),
    }
    async with running_gateway(make_config(callers=callers)) as gateway:
        yield gateway


async def ask(
    http: httpx.AsyncClient, token: str, query: str, session_id: str | None = None
) -> httpx.Response:
    body: dict[str, Any] = {"query": query}
    if session_id is not None:
        body["session_id"] = session_id
    return await http.post("/api/v1/query", json=body, headers=auth(token))


async def test_a_conversation_belongs_to_the_caller_that_started_it(callers_gateway: Running) -> None:
    async with callers_gateway.client() as http:
        first = (await ask(http, ALICE, "history")).json()
        mine = first["session_id"]
        # alice continues it; bob cannot, exactly as if it did not exist
        assert (await ask(http, ALICE, "history", mine)).json()["answer"] == "seen: history | history"
        stolen = await ask(http, BOB, "history", mine)
        assert stolen.status_code == 404 and stolen.json()["error"]["type"] == "unknown_session"
        never = await ask(http, BOB, "history", "NoSuchConversation0000000")
        assert stolen.json()["error"]["message"].replace(mine, "X") == never.json()["error"][
            "message"
        ].replace("NoSuchConversation0000000", "X")
        # listings: alice and ops see it, bob does not
        listed = {
            name: [
                s["id"] for s in (await http.get("/api/v1/sessions", headers=auth(token))).json()["sessions"]
            ]
            for name, token in (("alice", ALICE), ("bob", BOB), ("ops", OPS))
        }
        assert mine in listed["alice"] and mine in listed["ops"] and mine not in listed["bob"]
        # bob cannot delete it; alice can
        assert (await http.delete(f"/api/v1/sessions/{mine}", headers=auth(BOB))).status_code == 404
        assert (await ask(http, ALICE, "history", mine)).status_code == 200
        assert (await http.delete(f"/api/v1/sessions/{mine}", headers=auth(ALICE))).status_code == 200
        assert (await ask(http, ALICE, "history", mine)).status_code == 404


async def test_an_admin_may_continue_anyones_conversation(callers_gateway: Running) -> None:
    async with callers_gateway.client() as http:
        mine = (await ask(http, ALICE, "history")).json()["session_id"]
        assert (await ask(http, OPS, "history", mine)).json()["answer"] == "seen: history | history"


async def test_over_mcp_another_callers_session_id_is_unknown(callers_gateway: Running) -> None:
    async with connect(callers_gateway.url, "http", "modern", headers=auth(ALICE)) as alice:
        first = await alice.call_tool("agent_query", {"query": "history"})
        mine = first.structured_content["session_id"]
    async with connect(callers_gateway.url, "sse", "legacy", headers=auth(BOB)) as bob:
        stolen = await bob.call_tool("agent_query", {"query": "history", "session_id": mine})
    assert stolen.is_error and stolen.content[0].text.startswith(f"unknown session_id {mine!r}")


async def test_events_show_only_the_callers_own_runs(callers_gateway: Running) -> None:
    seen: dict[str, list[dict[str, Any]]] = {"alice": [], "bob": [], "ops": []}
    async with callers_gateway.client() as http, anyio.create_task_group() as tg:

        async def listen(name: str, token: str) -> None:
            async with http.stream("GET", "/api/v1/events", headers=auth(token)) as response:
                async for _, data in sse_events(response):
                    seen[name].append(data)

        for name, token in (("alice", ALICE), ("bob", BOB), ("ops", OPS)):
            tg.start_soon(listen, name, token)
        await eventually(lambda: callers_gateway.app.service.bus.listeners >= 3)
        await ask(http, ALICE, "echo private to alice")
        await eventually(lambda: any(e["type"] == "run_ended" for e in seen["ops"]))
        await ask(http, BOB, "echo for bob")
        await eventually(lambda: sum(e["type"] == "run_ended" for e in seen["ops"]) == 2)
        await eventually(lambda: any(e["type"] == "run_ended" for e in seen["bob"]))
        tg.cancel_scope.cancel()
    assert all(event["caller"] == "alice" for event in seen["alice"]) and seen["alice"]
    assert all(event["caller"] == "bob" for event in seen["bob"]) and seen["bob"]
    assert "private to alice" not in json.dumps(seen["bob"])
    assert {event["caller"] for event in seen["ops"]} == {"alice", "bob"}


async def test_approvals_are_listed_to_their_caller_and_resolved_only_with_the_approve_scope(
    callers_gateway: Running,
) -> None:
    async with callers_gateway.client() as http, anyio.create_task_group() as tg:
        answers: list[str] = []

        async def write() -> None:
            answers.append((await ask(http, ALICE, "write secret-plan")).json()["answer"])

        tg.start_soon(write)

        async def pending(token: str) -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = (await http.get("/api/v1/approvals", headers=auth(token))).json()[
                "pending"
            ]
            return items

        async def ops_sees_one() -> bool:
            return len(await pending(OPS)) == 1

        await eventually(ops_sees_one)
        [item] = await pending(OPS)
        assert item["caller"] == "alice"
        assert len(await pending(ALICE)) == 1  # her own
        assert await pending(BOB) == []  # not bob's business
        for token in (ALICE, BOB):  # neither may approve (alice would approve herself)
            refused = await http.post(
                f"/api/v1/approvals/{item['id']}", json={"approved": True}, headers=auth(token)
            )
            assert refused.status_code == 403 and refused.json()["error"]["type"] == "forbidden"
        done = await http.post(f"/api/v1/approvals/{item['id']}", json={"approved": True}, headers=auth(OPS))
        assert done.status_code == 200
        await eventually(lambda: len(answers) == 1)
    assert answers == ["write_file said: written"]


async def test_metrics_need_the_admin_scope(callers_gateway: Running) -> None:
    async with callers_gateway.client() as http:
        assert (await http.get("/metrics", headers=auth(ALICE))).status_code == 403
        assert (await http.get("/metrics", headers=auth(OPS))).status_code == 200


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_an_mcp_session_is_bound_to_the_caller_that_opened_it(
    callers_gateway: Running, transport: str
) -> None:
    """Bob learns alice's session id and posts into it: refused as if it did not exist."""
    url = callers_gateway.url
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        if transport == "http":
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
            headers = {"Accept": "application/json, text/event-stream"}
            opened = await http.post("/mcp", json=init, headers={**headers, **auth(ALICE)})
            session = opened.headers["mcp-session-id"]
            as_bob = await http.post(
                "/mcp", json=ping, headers={**headers, **auth(BOB), "mcp-session-id": session}
            )
            as_alice = await http.post(
                "/mcp", json=ping, headers={**headers, **auth(ALICE), "mcp-session-id": session}
            )
            assert as_bob.status_code == 404
            assert as_alice.status_code == 200
            await http.delete("/mcp", headers={**auth(ALICE), "mcp-session-id": session})
        else:
            async with http.stream("GET", "/sse", headers=auth(ALICE)) as stream:
                endpoint = ""
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        endpoint = line[6:]
                        break
                as_bob = await http.post(endpoint, json=ping, headers=auth(BOB))
                as_alice = await http.post(endpoint, json=ping, headers=auth(ALICE))
            assert as_bob.status_code == 404
            assert as_alice.status_code == 202


async def test_without_tokens_everything_is_the_local_caller() -> None:
    async with running_gateway() as gateway, gateway.client() as http:
        first = (await http.post("/api/v1/query", json={"query": "history"})).json()
        again = await http.post("/api/v1/query", json={"query": "history", "session_id": first["session_id"]})
        assert again.json()["answer"] == "seen: history | history"
        [session] = (await http.get("/api/v1/sessions")).json()["sessions"]
        assert session["owner"] == "local"
        assert (await http.get("/metrics")).status_code == 200
        assert "model" in (await http.get("/api/v1/health")).json()


def test_caller_book_identifies_by_token_and_hides_which_was_close() -> None:
    book = CallerBook.from_config("owner-token", {"alice": ("a-token", ["query"])})
    assert book.identify("Bearer owner-token") == Caller("owner", ALL_SCOPES)
    assert book.identify("bearer a-token") == Caller("alice", frozenset({"query"}))
    for header in (
        None,
        "",
        "Bearer",
        "Bearer  ",
        "Basic a-token",
        "a-token",
        "Bearer a-tokenx",
        "Bearer a-toke",
    ):
        assert book.identify(header) is None
    assert not book.open and CallerBook().open
    assert CallerBook().callers == [LOCAL]
    assert bearer_token("Bearer  tok ") == b"tok"


@pytest.mark.parametrize(
    ("caller", "owner", "sees", "sees_approval"),
    [
        (Caller("alice", frozenset({"query"})), "alice", True, True),
        (Caller("alice", frozenset({"query"})), "bob", False, False),
        (Caller("alice", frozenset({"query"})), None, False, False),
        (Caller("ops", frozenset({"approve"})), "bob", False, True),
        (Caller("root", frozenset({"admin"})), "bob", True, True),
        (LOCAL, "anyone", True, True),
    ],
)
def test_what_a_caller_sees(caller: Caller, owner: str | None, sees: bool, sees_approval: bool) -> None:
    assert caller.sees(owner) is sees
    assert caller.sees_approval(owner) is sees_approval


def test_callers_config_errors() -> None:
    from mcp_agent.config import parse_config
    from mcp_agent.exceptions import ConfigError

    def gateway(**values: Any) -> None:
        parse_config({"gateway": values}, environ={})

    for values, message in [
        ({"callers": {"a": {"token": "x"}, "b": {"token": "x"}}}, "same token"),
        ({"callers": {"a": {"token": "x"}}, "authToken": "x"}, "also a caller's token"),
        ({"callers": {"a": {"token": ""}}}, "gateway.callers.a.token"),
        ({"callers": {"a": {"token": "x", "scopes": ["root"]}}}, "scopes"),
        ({"callers": {"a": {"token": "x", "scopes": []}}}, "scopes"),
        ({"callers": {"bad name": {"token": "x"}}}, "caller name"),
        ({"callers": {"a": {"tokn": "x"}}}, "tokn"),
        ({"callerShare": 0}, "callerShare"),
    ]:
        with pytest.raises(ConfigError, match=message):
            gateway(**values)
