"""``GET /api/v1/runs`` and ``/api/v1/runs/{id}``: the record of runs, each caller's own (an
admin's: everyone's), filtered and paged; on a SQLite state named by ``state.url``, which the
gateway opens and hands to an Agent factory that takes ``state=``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_agent.config import AgentConfig, CallerConfig, StateConfig
from mcp_agent.loop.agent import Agent
from mcp_agent.state import State

from .conftest import HubLike, RuleModel, Running, Tools, make_config, running_gateway

ALICE, BOB, OPS = "alice-" + "a" * 20, "bob-" + "b" * 20, "ops-" + "o" * 20


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
async def runs_gateway(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[Running, list[State]]]:
    callers = {
        "alice": CallerConfig(token=ALICE, scopes=["query"]),
        "bob": CallerConfig(token=BOB, scopes=["query"]),
        "ops": CallerConfig(token=OPS, scopes=["query", "approve", "admin"]),
    }
    config = make_config(callers=callers)
    url = f"sqlite:///{tmp_path_factory.mktemp('runs')}/state.db"
    config = config.model_copy(update={"state": StateConfig(url=url)})
    given: list[State] = []
    model, hub = RuleModel(), HubLike(Tools().source)

    @asynccontextmanager
    async def factory(config: AgentConfig, *, state: State) -> AsyncIterator[Agent]:
        given.append(state)
        yield Agent(model, hub, config, state=state)

    async with running_gateway(config, factory=factory) as gateway:
        yield gateway, given


async def ask(http: httpx.AsyncClient, token: str, query: str) -> dict[str, Any]:
    response = await http.post("/api/v1/query", json={"query": query}, headers=auth(token))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_the_gateway_hands_its_state_to_the_agent(runs_gateway: tuple[Running, list[State]]) -> None:
    gateway, given = runs_gateway
    [state] = given
    assert gateway.app.service.state_store is state
    assert type(state).__name__ == "SqliteState"


async def test_runs_are_recorded_and_listed_newest_first_each_callers_own(
    runs_gateway: tuple[Running, list[State]],
) -> None:
    gateway, _ = runs_gateway
    async with gateway.client() as http:
        first = await ask(http, ALICE, "echo one")
        second = await ask(http, ALICE, "plain Two")
        theirs = await ask(http, BOB, "empty")
        mine = (await http.get("/api/v1/runs", headers=auth(ALICE))).json()
        ids = [run["id"] for run in mine["runs"]]
        assert ids[:2] == [second["run_id"], first["run_id"]] and theirs["run_id"] not in ids
        assert all(run["caller"] == "alice" for run in mine["runs"])
        record = (await http.get(f"/api/v1/runs/{first['run_id']}", headers=auth(ALICE))).json()
        assert record["query"] == "echo one" and record["answer"] == "echo said: one"
        assert record["termination_reason"] == "success" and record["session_id"] == first["session_id"]
        assert record["rounds"] == 2 and record["usage"]["total_tokens"] == 30
        assert [(call["name"], call["ok"]) for call in record["tool_calls"]] == [("echo", True)]
        assert record["ended"] >= record["started"] and record["elapsed_ms"] > 0
        # another caller's run is unknown to bob, as one that never was; the admin sees it
        hidden = await http.get(f"/api/v1/runs/{first['run_id']}", headers=auth(BOB))
        never = await http.get("/api/v1/runs/nope", headers=auth(BOB))
        assert hidden.status_code == never.status_code == 404
        assert hidden.json()["error"]["message"].replace(first["run_id"], "X") == never.json()["error"][
            "message"
        ].replace("nope", "X")
        assert (await http.get(f"/api/v1/runs/{first['run_id']}", headers=auth(OPS))).status_code == 200
        everyone = (await http.get("/api/v1/runs", headers=auth(OPS))).json()["runs"]
        assert {first["run_id"], second["run_id"], theirs["run_id"]} <= {run["id"] for run in everyone}


async def test_filters_and_pages(runs_gateway: tuple[Running, list[State]]) -> None:
    gateway, _ = runs_gateway
    async with gateway.client() as http:
        for index in range(5):
            await ask(http, BOB, f"page {index}")
        empty = await ask(http, BOB, "empty")
        assert empty["termination_reason"] == "empty_response"

        async def runs(**params: Any) -> dict[str, Any]:
            response = await http.get("/api/v1/runs", params=params, headers=auth(BOB))
            assert response.status_code == 200, response.text
            body: dict[str, Any] = response.json()
            return body

        ended_empty = (await runs(reason="empty_response"))["runs"]
        assert ended_empty[0]["id"] == empty["run_id"]
        assert all(r["termination_reason"] == "empty_response" for r in ended_empty)
        found = (await runs(text="PAGE 3"))["runs"]
        assert [r["query"] for r in found] == ["page 3"]
        assert [r["query"] for r in (await runs(text="answer: page 1"))["runs"]] == [
            "page 1"
        ]  # the answer too
        first = await runs(text="page", limit=2)
        assert [r["query"] for r in first["runs"]] == ["page 4", "page 3"] and first["count"] == 2
        second = await runs(text="page", limit=2, before=first["next_before"])
        assert [r["query"] for r in second["runs"]] == ["page 2", "page 1"]
        last = await runs(text="page", limit=2, before=second["next_before"])
        assert [r["query"] for r in last["runs"]] == ["page 0"] and "next_before" not in last


@pytest.mark.parametrize(
    "params",
    [
        {"reason": "nope"},
        {"limit": "0"},
        {"limit": "501"},
        {"limit": "x"},
        {"before": "later"},
        {"before": "nan"},
        {"sort": "asc"},
    ],
)
async def test_bad_parameters_are_400(
    runs_gateway: tuple[Running, list[State]], params: dict[str, str]
) -> None:
    gateway, _ = runs_gateway
    async with gateway.client() as http:
        response = await http.get("/api/v1/runs", params=params, headers=auth(OPS))
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request"


async def test_a_gateway_without_a_state_url_keeps_runs_in_memory(tmp_path: Path) -> None:
    async with running_gateway() as gateway, gateway.client() as http:
        answer = (await http.post("/api/v1/query", json={"query": "hello"})).json()
        runs = (await http.get("/api/v1/runs")).json()["runs"]
        assert [run["id"] for run in runs] == [answer["run_id"]]
        assert type(gateway.app.service.state_store).__name__ == "MemoryState"
