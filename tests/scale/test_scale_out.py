"""Scale-out, for real: two gateway processes sharing one ``redis-server``, HAProxy round-robin in
front, every client going through HAProxy on 127.0.0.1 (``conftest.running_cluster``).

HAProxy names the replica that answered in ``X-Served-By``; round-robin alternates strictly, so
``aim`` (health checks through the balancer until the *other* replica answered) makes the next
request go to the replica a test wants, without talking to it directly. The model is the fake
model server, shared by both replicas (``conftest.scale_reply``). Bounds are "does not hang"
bounds, never timings.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.fakes.model_server import FakeModelServer

from .conftest import Cluster, running_cluster
from .infra import ROOT, Replica

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

BOUND = 60.0
INTERRUPTED = "interrupted by a gateway restart"


def client(cluster: Cluster) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=cluster.url, timeout=httpx.Timeout(120, connect=10))


async def ask(
    http: httpx.AsyncClient, text: str, session_id: str | None = None
) -> tuple[dict[str, Any], str]:
    """POST /api/v1/query through the balancer: (the answer, the replica that ran it)."""
    body: dict[str, Any] = {"query": text}
    if session_id is not None:
        body["session_id"] = session_id
    response = await http.post("/api/v1/query", json=body)
    assert response.status_code == 200, response.text
    return response.json(), response.headers["x-served-by"]


async def aim(http: httpx.AsyncClient, at: Replica) -> None:
    """Make the balancer's next request go to ``at``: ask health until another replica answered."""
    with anyio.fail_after(BOUND):
        while (await http.get("/api/v1/health")).headers["x-served-by"] == at.name:
            pass


async def in_flight(replica: Replica) -> int:
    """``mcp_agent_queries_in_flight`` of one replica (read from it directly: an observation)."""
    async with httpx.AsyncClient(timeout=10) as http:
        text = (await http.get(f"{replica.url}/metrics")).text
    match = re.search(
        r"^mcp_agent_queries_in_flight ([0-9.e+]+)$", text, re.MULTILINE
    )  # prometheus_client: "1.0"
    assert match is not None, text[:500]
    return int(float(match.group(1)))


async def until(check: Any, what: str, bound: float = BOUND) -> None:
    """Wait until ``check()`` (sync or async) is true; fail naming ``what`` after ``bound``."""
    try:
        with anyio.fail_after(bound):
            while True:
                value = check()
                if not isinstance(value, bool):
                    value = await value
                if value:
                    return
                await anyio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {bound:g} s") from None


def started_on(cluster: Cluster) -> Replica | None:
    """The replica whose ``slow`` tool server started a sleep, if any."""
    for replica in cluster.replicas:
        record = cluster.record(replica)
        if record.exists() and "started" in record.read_text():
            return replica
    return None


@pytest.fixture
def cluster(model_server: FakeModelServer, tmp_path: Path) -> Any:
    with running_cluster(tmp_path, model_server.base_url) as running:
        yield running


# ------------------------------------------------------------------------------------------------


async def test_a_conversation_whose_turns_alternate_between_replicas_keeps_its_context(
    cluster: Cluster,
) -> None:
    async with client(cluster) as http:
        first, served = await ask(http, "hello")
        session_id = first["session_id"]
        assert first["answer"] == "answer: hello"
        servers = [served]
        questions = ["hello"]
        for turn in range(5):
            questions.append(f"history {turn}")
            answer, served = await ask(http, questions[-1], session_id)
            servers.append(served)
            assert answer["session_id"] == session_id
            assert answer["answer"] == "seen: " + " | ".join(questions)
    assert set(servers) == {"a", "b"}
    assert all(one != two for one, two in itertools.pairwise(servers))  # strictly alternating


async def test_an_approval_asked_on_one_replica_is_resolved_through_the_other(cluster: Cluster) -> None:
    async with client(cluster) as http, anyio.create_task_group() as tg:
        answers: list[tuple[dict[str, Any], str]] = []

        async def run() -> None:
            answers.append(await ask(http, "approve the sum"))

        tg.start_soon(run)
        pending: list[dict[str, Any]] = []

        async def asked() -> bool:
            pending[:] = (await http.get("/api/v1/approvals")).json()["pending"]
            return bool(pending)

        await until(asked, "the approval")
        [approval] = pending
        assert approval["name"] == "echo__add" and approval["arguments"] == {"a": 2, "b": 3}
        [runner] = [r for r in cluster.replicas if await in_flight(r) == 1]
        resolver = cluster.other(runner)
        await aim(http, resolver)
        response = await http.post(
            f"/api/v1/approvals/{approval['id']}", json={"approved": True, "reason": "ok"}
        )
        assert response.status_code == 200, response.text
        assert response.headers["x-served-by"] == resolver.name
    [(answer, served)] = answers
    assert served == runner.name
    assert answer["termination_reason"] == "success"
    assert answer["answer"] == "echo__add said: 5"
    assert (await http_get_json(cluster, "/api/v1/approvals"))["pending"] == []


async def http_get_json(cluster: Cluster, path: str) -> Any:
    async with client(cluster) as http:
        response = await http.get(path)
        assert response.status_code == 200, response.text
        return response.json()


async def test_two_queries_on_one_session_through_different_replicas_are_serialised(
    cluster: Cluster, model_server: FakeModelServer
) -> None:
    async with client(cluster) as http:
        first, _ = await ask(http, "hello")
        session_id = first["session_id"]
        answers: dict[str, tuple[dict[str, Any], str]] = {}
        async with anyio.create_task_group() as tg:

            async def run(text: str) -> None:
                answers[text] = await ask(http, text, session_id)

            tg.start_soon(run, "sleep 3")
            await until(lambda: started_on(cluster) is not None, "the sleep")
            sleeper = started_on(cluster)
            assert sleeper is not None
            other = cluster.other(sleeper)
            await aim(http, other)
            tg.start_soon(run, "history")

            async def both_in_flight() -> bool:
                return await in_flight(other) == 1

            await until(both_in_flight, "the second query admitted on the other replica")
            assert await in_flight(sleeper) == 1  # both runs are in flight at once ...
    sleep_answer, sleep_served = answers["sleep 3"]
    history_answer, history_served = answers["history"]
    assert {sleep_served, history_served} == {"a", "b"}
    assert sleep_answer["answer"] == "slow__sleep said: slept"
    # ... yet the second saw the first one's whole turn: it waited for the session's lock
    assert history_answer["answer"] == "seen: hello | sleep 3 | history"
    calls = [r.json["messages"] for r in model_server.requests if r.path.endswith("/chat/completions")]
    after_tool = next(
        i for i, m in enumerate(calls) if m[-1]["role"] == "tool" and m[-1]["content"] == "slept"
    )
    history = next(
        i for i, m in enumerate(calls) if m[-1]["role"] == "user" and m[-1]["content"] == "history"
    )
    assert after_tool < history


async def test_a_replica_killed_mid_run_leaves_the_session_intact_and_the_run_recorded(
    cluster: Cluster,
) -> None:
    async with client(cluster) as http:
        first, _ = await ask(http, "hello")
        session_id = first["session_id"]
        outcome: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def doomed() -> None:
                try:
                    outcome.append(
                        await http.post(
                            "/api/v1/query", json={"query": "sleep 120", "session_id": session_id}
                        )
                    )
                except httpx.TransportError as exc:
                    outcome.append(exc)

            tg.start_soon(doomed)
            await until(lambda: started_on(cluster) is not None, "the sleep")
            victim = started_on(cluster)
            assert victim is not None
            victim.kill()
        # the client saw its call fail (HAProxy answers 502 for a server that died mid-answer)
        [failed] = outcome
        assert isinstance(failed, httpx.TransportError) or failed.status_code >= 500
        survivor = cluster.other(victim)
        # the next call, through the balancer, works: the session is intact (the killed turn was
        # never saved) and its lock, held by the dead replica, does not block it
        answer, served = await ask(http, "history", session_id)
        assert served == survivor.name
        assert answer["answer"] == "seen: hello | history"
        runs: list[dict[str, Any]] = []

        async def recorded() -> bool:
            runs[:] = (await http.get("/api/v1/runs", params={"text": "sleep 120"})).json()["runs"]
            return bool(runs) and runs[0]["termination_reason"] is not None

        await until(recorded, "the interrupted run recorded")
        [run] = runs
        assert run["termination_reason"] == "terminal_error" and run["detail"] == INTERRUPTED
        assert run["session_id"] == session_id


@asynccontextmanager
async def mcp_session(url: str, served: list[str]) -> AsyncIterator[ClientSession]:
    """The SDK's Streamable HTTP client through the balancer; ``served`` collects X-Served-By."""

    async def note(response: httpx2.Response) -> None:
        served.append(response.headers.get("x-served-by", "?"))

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(60, read=120), event_hooks={"response": [note]}) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_stateless_streamable_http_works_through_the_balancer_without_sticky_sessions(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    with running_cluster(tmp_path, model_server.base_url, stateless=True) as cluster:
        served: list[str] = []
        async with mcp_session(cluster.url, served) as session:
            [tool] = (await session.list_tools()).tools
            assert tool.name == "agent_query"
            result = await session.call_tool("agent_query", {"query": "echo over the balancer"})
            assert not result.is_error
            assert result.structured_content["answer"] == "echo__echo said: over the balancer"
            session_id = result.structured_content["session_id"]
            questions = ["echo over the balancer"]
            for turn in range(4):
                questions.append(f"history {turn}")
                result = await session.call_tool(
                    "agent_query", {"query": questions[-1], "session_id": session_id}
                )
                assert not result.is_error, result.content
                assert result.structured_content["answer"] == "seen: " + " | ".join(questions)
    assert {"a", "b"} <= set(served)


async def test_a_dashboard_on_one_replica_sees_the_runs_of_the_other(cluster: Cluster) -> None:
    async with client(cluster) as http, http.stream("GET", "/api/v1/events") as stream:
        assert stream.status_code == 200
        watcher = cluster.by_name(stream.headers["x-served-by"])
        lines = stream.aiter_lines()
        assert await anext(lines) == ": listening"
        async with client(cluster) as asker:
            await aim(asker, cluster.other(watcher))
            answer, served = await ask(asker, "echo seen from afar")
        assert served != watcher.name
        seen: list[tuple[str, dict[str, Any]]] = []
        event = ""
        with anyio.fail_after(BOUND):
            async for line in lines:
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if data.get("session_id") == answer["session_id"]:  # a new conversation: this run's
                        seen.append((event, data))
                        if event == "run_ended":
                            break
    kinds = [kind for kind, _ in seen]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert "tool_call_ended" in kinds
    assert seen[0][1]["query"] == "echo seen from afar"
    assert seen[-1][1]["termination_reason"] == "success"


STICKY = [
    "stick-table type string len 64 size 100k expire 1h",
    "stick store-response res.hdr(mcp-session-id)",
    "stick on req.hdr(mcp-session-id)",
]


async def test_stateful_streamable_http_works_through_the_balancer_made_sticky_as_the_readme_says(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    readme = " ".join((ROOT / "docs" / "state.md").read_text(encoding="utf-8").split())
    assert all(f"`{line}`" in readme for line in STICKY)
    with running_cluster(tmp_path, model_server.base_url, balancer=STICKY) as cluster:
        by_client: list[list[str]] = []
        for index in range(3):  # a new MCP session each: round-robin places them, then they stick
            served: list[str] = []
            by_client.append(served)
            async with mcp_session(cluster.url, served) as session:
                result = await session.call_tool("agent_query", {"query": f"echo sticky {index}"})
                assert result.structured_content["answer"] == f"echo__echo said: sticky {index}"
                session_id = result.structured_content["session_id"]
                for _ in range(3):
                    result = await session.call_tool(
                        "agent_query", {"query": "history", "session_id": session_id}
                    )
                    assert not result.is_error, result.content
    for served in by_client:
        assert len(set(served)) == 1, served  # every request of one MCP session on one replica
    assert {served[0] for served in by_client} == {"a", "b"}  # and the sessions spread over both
