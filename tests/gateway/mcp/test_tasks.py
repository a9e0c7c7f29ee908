"""``agent_query`` as a task (the MCP Tasks extension), against a real gateway over HTTP.

The SDK's client cannot ask for a task, so the requests are raw 2026-07-28 JSON-RPC over httpx:
the same answer as a plain call, cancellation, a run that survives its client, expiry, callers
kept apart, approvals as ``input_required`` answered by ``tasks/update``, ``notifications/tasks``
on ``subscriptions/listen``, and ``tasks/get`` answered by another replica sharing the store
(SQLite, Redis). A restarted or killed gateway process: ``test_tasks_restart.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import AgentConfig, CallerConfig
from mcp_agent.gateway.mcp.tasks import EXTENSION, MAX_TTL_MS
from tests.scale.infra import RedisServer

from ..conftest import Running, answer_of, eventually, make_config, running_gateway, sse_events
from .test_server import connect

pytestmark = pytest.mark.anyio

TASKS = {"extensions": {EXTENSION: {}}}


def envelope(capabilities: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    if capabilities is not None:
        meta["io.modelcontextprotocol/clientCapabilities"] = capabilities
    return meta


def headers(method: str, name: str | None, token: str | None = None) -> dict[str, str]:
    found = {
        "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    if name is not None:
        found["mcp-name"] = name
    if token is not None:
        found["Authorization"] = f"Bearer {token}"
    return found


async def rpc(
    http: httpx.AsyncClient,
    method: str,
    params: dict[str, Any],
    *,
    capabilities: dict[str, Any] | None = TASKS,
    name: str | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """One 2026 request; its JSON-RPC answer (``result`` or ``error``)."""
    if name is None:
        name = params.get("taskId") or params.get("name")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**params, "_meta": envelope(capabilities)},
    }
    response = await http.post("/mcp", json=body, headers=headers(method, name, token))
    answer: dict[str, Any] = response.json()
    return answer


async def create(
    http: httpx.AsyncClient, query: str, *, capabilities: dict[str, Any] = TASKS, **extra: Any
) -> dict[str, Any]:
    """Ask for ``query`` as a task; the ``CreateTaskResult``."""
    token = extra.pop("token", None)
    params = {"name": "agent_query", "arguments": {"query": query}, **extra}
    answer = await rpc(http, "tools/call", params, capabilities=capabilities, token=token)
    result: dict[str, Any] = answer["result"]
    assert result["resultType"] == "task", result
    return result


async def get(http: httpx.AsyncClient, task_id: str, **kwargs: Any) -> dict[str, Any]:
    return await rpc(http, "tasks/get", {"taskId": task_id}, **kwargs)


async def until(http: httpx.AsyncClient, task_id: str, *statuses: str, **kwargs: Any) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task is in one of ``statuses`` (bounded: not a timing assertion)."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        seen.update((await get(http, task_id, **kwargs))["result"])
        return seen["status"] in statuses

    await eventually(reached, timeout=20)
    return seen


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"]).rsplit("\n\n[session_id:", 1)[0]


# ------------------------------------------------------------------------------------------------


async def test_a_task_answers_what_a_plain_call_answers(gateway: Running) -> None:
    async with connect(gateway.url, "http", "modern") as client:
        plain = await client.call_tool("agent_query", {"query": "echo same"})
    async with gateway.client() as http:
        created = await create(http, "echo same")
        assert set(created) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
        assert created["status"] == "working" and created["taskId"].startswith("task_")
        assert not {"result", "error", "inputRequests", "requestState", "task"} & set(created)
        immediate = await get(http, created["taskId"])  # durable before the answer
        assert immediate["result"]["taskId"] == created["taskId"]
        done = await until(http, created["taskId"], "completed")
    assert done["resultType"] == "complete"
    result = done["result"]
    assert text_of(result) == answer_of(plain) == "echo said: same"
    assert result["isError"] is False
    assert result["structuredContent"]["answer"] == plain.structured_content["answer"]
    assert result["structuredContent"]["termination_reason"] == "success"


async def test_clients_that_do_not_declare_the_extension_see_no_change(gateway: Running) -> None:
    async with gateway.client() as http:
        plain = await rpc(
            http, "tools/call", {"name": "agent_query", "arguments": {"query": "echo plain"}}, capabilities={}
        )
        assert plain["result"]["resultType"] == "complete"
        assert text_of(plain["result"]) == "echo said: plain" and "taskId" not in plain["result"]
        # a legacy 2025 `task` hint alone does not make a task either
        hinted = await rpc(
            http,
            "tools/call",
            {"name": "agent_query", "arguments": {"query": "echo hint"}, "task": {"ttl": 5000}},
            capabilities={},
        )
        assert hinted["result"]["resultType"] == "complete"
        created = await create(http, "echo mine")
        for method in ("tasks/get", "tasks/cancel"):
            refused = await rpc(http, method, {"taskId": created["taskId"]}, capabilities={})
            assert refused["error"]["code"] == -32021
            assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
        for method in ("tasks/result", "tasks/list"):  # removed by SEP-2663
            assert (await rpc(http, method, {"taskId": created["taskId"]}))["error"]["code"] == -32601
    async with connect(gateway.url, "http", "modern") as client:
        assert answer_of(await client.call_tool("agent_query", {"query": "echo sdk"})) == "echo said: sdk"
    async with connect(gateway.url, "http", "legacy") as client:
        assert answer_of(await client.call_tool("agent_query", {"query": "echo old"})) == "echo said: old"


async def test_an_unknown_task_and_a_mismatched_header_are_refused(gateway: Running) -> None:
    async with gateway.client() as http:
        unknown = await get(http, "task_nope")
        assert unknown["error"]["code"] == -32602 and "not found" in unknown["error"]["message"]
        assert (await rpc(http, "tasks/cancel", {"taskId": "task_nope"}))["error"]["code"] == -32602
        created = await create(http, "echo x")
        wrong = await get(http, created["taskId"], name="task_other")
        assert wrong["error"]["code"] == -32020


async def test_tasks_cancel_cancels_the_run(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "sleep 30")
        await gateway.tools.sleeping.wait()
        ack = await rpc(http, "tasks/cancel", {"taskId": created["taskId"]})
        assert ack["result"]["resultType"] == "complete"
        assert not {"taskId", "status", "result", "error"} & set(ack["result"])
        done = await until(http, created["taskId"], "cancelled", "completed", "failed")
        assert done["status"] == "cancelled" and "cancelled" in done["statusMessage"]
        assert gateway.tools.cancelled == [30.0]
        again = await rpc(http, "tasks/cancel", {"taskId": created["taskId"]})  # terminal: the same ack
        assert again["result"]["resultType"] == "complete"
        await eventually(lambda: gateway.app.service.in_flight == 0)


async def test_a_task_goes_on_after_its_client_left(gateway: Running) -> None:
    async with gateway.client() as first:
        created = await create(first, "sleep 0.3")
    # the client that asked is gone; a new one asks
    async with gateway.client() as second:
        done = await until(second, created["taskId"], "completed", "failed", "cancelled")
    assert done["status"] == "completed" and text_of(done["result"]) == "sleep said: slept"
    assert gateway.tools.cancelled == []


async def test_a_task_expires_after_its_ttl_and_the_ttl_is_capped(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "echo brief", task={"ttl": 1000})
        assert created["ttlMs"] == 1000
        assert (await until(http, created["taskId"], "completed"))["ttlMs"] == 1000

        async def gone() -> bool:
            return "error" in await get(http, created["taskId"])

        await eventually(gone)
        assert (await get(http, created["taskId"]))["error"]["code"] == -32602
        capped = await create(http, "echo long", task={"ttl": 10**12})
        assert capped["ttlMs"] == MAX_TTL_MS
        default = await create(http, "echo default")
        assert default["ttlMs"] == 3_600_000


ALICE, BOB = "alice-" + "a" * 20, "bob-" + "b" * 20


async def test_another_callers_task_is_unknown() -> None:
    callers = {
        "alice": CallerConfig(token=ALICE, scopes=["query"]),
        "bob": CallerConfig(token=BOB, scopes=["query"]),
    }
    async with running_gateway(make_config(callers=callers)) as gateway, gateway.client() as http:
        created = await create(http, "sleep 30", token=ALICE)
        task_id = created["taskId"]
        mine = await get(http, task_id, token=ALICE)
        assert mine["result"]["status"] == "working"
        theirs = await get(http, task_id, token=BOB)
        unknown = await get(http, "task_" + "x" * 32, token=BOB)
        assert theirs["error"] == unknown["error"]  # the same answer as a task that does not exist
        assert (await rpc(http, "tasks/cancel", {"taskId": task_id}, token=BOB))["error"]["code"] == -32602
        updated = await rpc(http, "tasks/update", {"taskId": task_id, "inputResponses": {}}, token=BOB)
        assert updated["error"]["code"] == -32602
        assert gateway.tools.cancelled == []
        assert (await get(http, task_id, token=ALICE))["result"]["status"] == "working"
        await rpc(http, "tasks/cancel", {"taskId": task_id}, token=ALICE)
        await until(http, task_id, "cancelled", token=ALICE)


FORMS_AND_TASKS = {"elicitation": {"form": {}}, **TASKS}


async def test_an_approval_makes_the_task_input_required_and_tasks_update_answers_it(
    gateway: Running,
) -> None:
    async with gateway.client() as http:
        created = await create(http, "write task.txt", capabilities=FORMS_AND_TASKS)
        task_id = created["taskId"]
        waiting = await until(http, task_id, "input_required", capabilities=FORMS_AND_TASKS)
        [(key, request)] = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert "write_file" in request["params"]["message"]
        assert request["params"]["requestedSchema"]["required"] == ["approve"]
        assert "requestState" not in waiting
        ignored = await rpc(
            http, "tasks/update", {"taskId": task_id, "inputResponses": {"unknown-key": {"action": "accept"}}}
        )
        assert ignored["result"]["resultType"] == "complete"
        assert gateway.tools.written == []
        ack = await rpc(
            http,
            "tasks/update",
            {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"approve": True}}}},
            capabilities=FORMS_AND_TASKS,
        )
        assert ack["result"]["resultType"] == "complete"
        done = await until(http, task_id, "completed", capabilities=FORMS_AND_TASKS)
    assert text_of(done["result"]) == "write_file said: written"
    assert gateway.tools.written == ["task.txt"]


async def test_status_notifications_reach_a_listener_that_asked_for_the_task(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "write heard.txt", capabilities=FORMS_AND_TASKS)
        task_id = created["taskId"]
        await until(http, task_id, "input_required", capabilities=FORMS_AND_TASKS)
        listen = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "subscriptions/listen",
            "params": {
                "notifications": {"taskIds": [task_id, "task_not_mine"], "toolsListChanged": True},
                "_meta": envelope(FORMS_AND_TASKS),
            },
        }
        seen: list[dict[str, Any]] = []
        async with http.stream(
            "POST", "/mcp", json=listen, headers=headers("subscriptions/listen", None)
        ) as stream:
            events = sse_events(stream)
            _, ack = await anext(events)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"]["taskIds"] == [task_id]
            assert ack["params"]["notifications"]["toolsListChanged"] is True
            with anyio.fail_after(20):
                async for _, message in events:
                    assert message["method"] == "notifications/tasks"
                    assert message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7
                    seen.append(message["params"])
                    if message["params"]["status"] == "input_required" and len(seen) == 1:
                        [key] = message["params"]["inputRequests"]
                        await rpc(
                            http,
                            "tasks/update",
                            {
                                "taskId": task_id,
                                "inputResponses": {key: {"action": "accept", "content": {"approve": True}}},
                            },
                        )
                    if message["params"]["status"] == "completed":
                        break
    assert seen[0]["status"] == "input_required" and seen[-1]["status"] == "completed"
    assert text_of(seen[-1]["result"]) == "write_file said: written"
    async with gateway.client() as http:  # without the extension, asking for tasks is refused
        refused = await rpc(
            http,
            "subscriptions/listen",
            {"notifications": {"taskIds": [task_id]}},
            capabilities={},
            name=None,
        )
        assert refused["error"]["code"] == -32021


# ------------------------------------------------------------------------------------------------ replicas


def on_state(url: str, **limits: Any) -> AgentConfig:
    config = make_config()
    return config.model_copy(update={"state": config.state.model_copy(update={"url": url, **limits})})


@asynccontextmanager
async def two_replicas(url: str) -> AsyncIterator[tuple[Running, Running]]:
    async with running_gateway(on_state(url)) as first, running_gateway(on_state(url)) as second:
        yield first, second


async def check_replicas(first: Running, second: Running) -> None:
    async with first.client() as a, second.client() as b:
        created = await create(a, "echo shared")
        assert (await get(b, created["taskId"]))["result"]["taskId"] == created["taskId"]
        done = await until(b, created["taskId"], "completed")
        assert text_of(done["result"]) == "echo said: shared"
        # a cancellation asked of the other replica reaches the run
        sleeping = await create(a, "sleep 30")
        await first.tools.sleeping.wait()
        assert (await rpc(b, "tasks/cancel", {"taskId": sleeping["taskId"]}))["result"][
            "resultType"
        ] == "complete"
        assert (await until(b, sleeping["taskId"], "cancelled", "completed", "failed"))[
            "status"
        ] == "cancelled"
        assert first.tools.cancelled == [30.0]
        # a listener on the other replica hears of the task's changes
        later = await create(a, "sleep 0.5")
        heard = await listen_until_done(b, later["taskId"])
        assert heard[-1]["status"] == "completed" and text_of(heard[-1]["result"]) == "sleep said: slept"


async def listen_until_done(http: httpx.AsyncClient, task_id: str) -> list[dict[str, Any]]:
    """The ``notifications/tasks`` of ``task_id`` on a ``subscriptions/listen`` stream, until it ends."""
    listen = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": [task_id]}, "_meta": envelope(TASKS)},
    }
    heard: list[dict[str, Any]] = []
    async with http.stream(
        "POST", "/mcp", json=listen, headers=headers("subscriptions/listen", None)
    ) as stream:
        events = sse_events(stream)
        _, ack = await anext(events)
        assert ack["params"]["notifications"]["taskIds"] == [task_id]
        with anyio.fail_after(20):
            async for _, message in events:
                assert message["method"] == "notifications/tasks" and message["params"]["taskId"] == task_id
                heard.append(message["params"])
                if message["params"]["status"] in ("completed", "failed", "cancelled"):
                    break
    return heard


async def test_another_replica_answers_on_a_shared_sqlite_file(tmp_path: Path) -> None:
    async with two_replicas(f"sqlite:///{tmp_path}/state.db") as (first, second):
        await check_replicas(first, second)


async def test_another_replica_answers_on_redis(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, persist=False)  # skips (fails under CI=true) without redis-server
    server.start()
    try:
        async with two_replicas(server.url) as (first, second):
            await check_replicas(first, second)
    finally:
        server.stop()


# ------------------------------------------------------------------------------------------------ failures


async def test_bad_input_is_answered_at_once_and_admission_failures_complete_the_task() -> None:
    config = make_config(max_concurrent_queries=1, max_queued_queries=0)
    async with running_gateway(config) as gateway, gateway.client() as http:
        bad = await rpc(http, "tools/call", {"name": "agent_query", "arguments": {"query": ""}})
        assert bad["result"]["resultType"] == "complete" and bad["result"]["isError"] is True
        assert "Invalid agent_query arguments" in bad["result"]["content"][0]["text"]
        unknown = await rpc(
            http, "tools/call", {"name": "agent_query", "arguments": {"query": "hi", "session_id": "nope"}}
        )
        done = await until(http, unknown["result"]["taskId"], "completed")
        assert (
            done["result"]["isError"] is True and "unknown session_id" in done["result"]["content"][0]["text"]
        )
        holding = await create(http, "sleep 30")
        await gateway.tools.sleeping.wait()
        busy = await create(http, "echo too many")
        refused = await until(http, busy["taskId"], "completed")
        assert (
            refused["result"]["isError"] is True and "busy" in refused["result"]["content"][0]["text"].lower()
        )
        await rpc(http, "tasks/cancel", {"taskId": holding["taskId"]})
        await until(http, holding["taskId"], "cancelled")


async def test_a_run_still_going_when_its_task_expires_is_cancelled(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "sleep 30", task={"ttl": 1000})
        await eventually(lambda: gateway.tools.cancelled == [30.0])
        await eventually(lambda: gateway.app.service.in_flight == 0)
        assert (await get(http, created["taskId"]))["error"]["code"] == -32602


async def test_a_run_that_raises_fails_the_task_with_a_json_rpc_error(gateway: Running) -> None:
    async def broken(request: Any, admission: Any, **kwargs: Any) -> Any:
        admission.release()
        raise RuntimeError("boom")

    gateway.app.service.run = broken  # type: ignore[method-assign]
    async with gateway.client() as http:
        created = await create(http, "echo never")
        failed = await until(http, created["taskId"], "failed", "completed")
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"]["code"] == -32603 and "boom" in failed["error"]["message"]


async def test_a_task_store_that_fails_is_answered_clearly(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, persist=False)  # skips (fails under CI=true) without redis-server
    server.start()
    try:
        async with running_gateway(on_state(server.url)) as gateway, gateway.client() as http:
            created = await create(http, "echo before")
            await until(http, created["taskId"], "completed")
            server.stop()  # Redis goes away under the gateway
            refused = await rpc(
                http, "tools/call", {"name": "agent_query", "arguments": {"query": "echo after"}}
            )
            assert refused["result"]["resultType"] == "complete" and refused["result"]["isError"] is True
            assert "the task store failed" in refused["result"]["content"][0]["text"]
            unread = await get(http, created["taskId"])
            assert unread["error"]["code"] == -32603 and "the task store failed" in unread["error"]["message"]
    finally:
        server.stop()
