"""Calls to exposed tools as tasks (``gateway/mcp/task_relay.py``), against real processes.

A real gateway (the real Agent and ToolHub) over the fixture ``tests/servers/tasks.py``, a real
MCP server subprocess that runs its tools as tasks when a request declares the Tasks extension
(stdio, and Streamable HTTP for the replicas). The client sends raw 2026-07-28 JSON-RPC over
httpx, as ``test_tasks.py`` does, and the SDK's ``Client`` with the gateway's own client side of
the extension as a ``ClientExtension`` (``tools/server/tasks.py``): create, ``tasks/get``
until the result, ``tasks/cancel`` reaching the server, a failed task, ``tasks/update``
answering the server's ``inputRequests``, callers kept apart, a second replica on the same SQLite
file, the server killed mid-task, a server without the extension, and the guards before the call.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.extension import ClientExtension, ResultClaim

from mcp_agent.assembly import open_agent
from mcp_agent.config import AgentConfig, parse_config
from mcp_agent.tools.server.tasks import CLAIM, EXTENSION, CreatedTask, cancel_task, get_task

from ..conftest import Running, eventually, free_port, running_gateway
from .test_server import transport_for
from .test_tasks import ALICE, BOB, get, listen_until_done, rpc, until

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = str(ROOT / "tests" / "servers" / "tasks.py")
ECHO = str(ROOT / "tests" / "servers" / "echo.py")


def config(
    servers: dict[str, Any] | None = None,
    *,
    state: str | None = None,
    callers: dict[str, Any] | None = None,
    tool_timeout: float = 30,
    max_result_chars: int = 16_000,
) -> AgentConfig:
    data: dict[str, Any] = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "limits": {"toolTimeoutSeconds": tool_timeout, "maxResultChars": max_result_chars},
        "mcpServers": servers or {"fx": {"command": sys.executable, "args": [FIXTURE]}},
        "gateway": {"description": "Relayed tasks.", "exposeTools": True},
    }
    if state is not None:
        data["state"] = {"url": state}
    if callers is not None:
        data["gateway"]["callers"] = callers
    return parse_config(data, environ={})


@pytest.fixture
async def gateway() -> AsyncIterator[Running]:
    async with running_gateway(config(), factory=open_agent) as running:
        yield running


async def call(
    http: httpx.AsyncClient, name: str, arguments: dict[str, Any], **kwargs: Any
) -> dict[str, Any]:
    return await rpc(http, "tools/call", {"name": name, "arguments": arguments}, **kwargs)


async def create(
    http: httpx.AsyncClient, name: str, arguments: dict[str, Any], **kwargs: Any
) -> dict[str, Any]:
    answer = await call(http, name, arguments, **kwargs)
    result: dict[str, Any] = answer["result"]
    assert result["resultType"] == "task", answer
    return result


async def seen(http: httpx.AsyncClient, **kwargs: Any) -> dict[str, Any]:
    """What the fixture process saw (a plain call of its ``seen`` tool)."""
    answer = await call(http, "fx__seen", {}, capabilities={}, **kwargs)
    found: dict[str, Any] = json.loads(answer["result"]["content"][0]["text"])
    return found


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


# ------------------------------------------------------------------------------------------------


async def test_a_task_is_created_polled_and_answers_the_servers_result(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "fx__slow", {"text": "hi", "polls": 3})
        task_id = created["taskId"]
        assert task_id.startswith("task_") and created["status"] == "working"
        assert set(created) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
        upstream = (await seen(http))["created"]
        assert len(upstream) == 1 and upstream[0] not in json.dumps(created)  # the server's id stays inside
        first = await get(http, task_id)  # durable before the answer
        assert first["result"]["taskId"] == task_id
        done = await until(http, task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed", done
    assert done["taskId"] == task_id
    assert text_of(done["result"]) == "slow: hi" and done["result"]["isError"] is False


class TasksExtension(ClientExtension):
    """The SDK client's side of the extension: the gateway's own claim (``tools/server/tasks.py``)."""

    identifier = EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [CLAIM]


async def test_the_sdk_client_gets_and_follows_a_relayed_task(gateway: Running) -> None:
    async with Client(transport_for(gateway.url, "http"), extensions=[TasksExtension()]) as client:
        # the SDK resolves the claimed task with the claim's resolver: tasks/get until it ends
        followed = await client.call_tool("fx__slow", {"text": "sdk", "polls": 2})
        assert not followed.is_error and followed.content[0].text == "slow: sdk"
        created = await client.session.call_tool("fx__hold", {}, allow_claimed=True)
        assert isinstance(created, CreatedTask) and created.task_id.startswith("task_")
        assert (await get_task(client.session, created.task_id)).status == "working"
        await cancel_task(client.session, created.task_id)
        assert (await get_task(client.session, created.task_id)).status == "cancelled"


async def test_clients_that_ask_no_task_see_no_change(gateway: Running) -> None:
    async with gateway.client() as http:
        plain = await call(http, "fx__slow", {"text": "plain", "polls": 2}, capabilities={})
        assert plain["result"]["resultType"] == "complete"
        assert text_of(plain["result"]) == "slow: plain" and "taskId" not in plain["result"]
        # the gateway declared the extension upstream, got a task, and followed it to its end
        assert len((await seen(http))["created"]) == 1
        failing = await call(http, "fx__fails", {}, capabilities={})
        assert failing["result"]["isError"] is True and "fixture task broke" in text_of(failing["result"])


async def test_a_relayed_result_is_cut_as_a_plain_calls_is() -> None:
    async with (
        running_gateway(config(max_result_chars=20), factory=open_agent) as gateway,
        gateway.client() as http,
    ):
        created = await create(http, "fx__slow", {"text": "x" * 500, "polls": 1})
        done = await until(http, created["taskId"], "completed", "failed", "cancelled")
        plain = await call(http, "fx__slow", {"text": "x" * 500, "polls": 1}, capabilities={})
    assert done["status"] == "completed"
    assert done["result"]["content"] == plain["result"]["content"]
    assert "x" * 10 in text_of(done["result"]) and "x" * 30 not in text_of(done["result"])


async def test_a_cancel_reaches_the_servers_task(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "fx__hold", {})
        task_id = created["taskId"]
        assert (await get(http, task_id))["result"]["status"] == "working"
        assert "result" in await rpc(http, "tasks/cancel", {"taskId": task_id})
        done = await until(http, task_id, "cancelled", "failed", "completed")
        fixture = await seen(http)
    assert done["status"] == "cancelled", done
    assert fixture["cancelled"] == fixture["created"]  # the server's own task, cancelled there


async def test_a_task_that_fails_on_its_server_fails(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "fx__fails", {})
        done = await until(http, created["taskId"], "failed", "completed", "cancelled")
    assert done["status"] == "failed"
    assert done["error"] == {"code": -32000, "message": "the fixture task broke"}


async def test_the_servers_input_requests_are_answered_with_tasks_update(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "fx__asks", {})
        task_id = created["taskId"]
        waiting = await until(http, task_id, "input_required")
        request = waiting["inputRequests"]["name"]
        assert request["method"] == "elicitation/create" and request["params"]["message"] == "Your name?"
        answer = {"action": "accept", "content": {"name": "ada"}}
        updated = await rpc(http, "tasks/update", {"taskId": task_id, "inputResponses": {"name": answer}})
        assert "error" not in updated
        done = await until(http, task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed" and text_of(done["result"]) == "hello ada"


async def test_status_notifications_are_relayed(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "fx__slow", {"text": "heard", "polls": 5})
        heard = await listen_until_done(http, created["taskId"])
    assert heard[-1]["status"] == "completed" and text_of(heard[-1]["result"]) == "slow: heard"


async def test_another_callers_task_is_unknown() -> None:
    callers = {"alice": {"token": ALICE, "scopes": ["query"]}, "bob": {"token": BOB, "scopes": ["query"]}}
    async with (
        running_gateway(config(callers=callers), factory=open_agent) as gateway,
        gateway.client() as http,
    ):
        created = await create(http, "fx__hold", {}, token=ALICE)
        task_id = created["taskId"]
        theirs = await get(http, task_id, token=BOB)
        unknown = await get(http, "task_" + "x" * 32, token=BOB)
        assert theirs["error"] == unknown["error"] and theirs["error"]["code"] == -32602
        assert (await rpc(http, "tasks/cancel", {"taskId": task_id}, token=BOB))["error"]["code"] == -32602
        update = {
            "taskId": task_id,
            "inputResponses": {"name": {"action": "accept", "content": {"name": "x"}}},
        }
        assert (await rpc(http, "tasks/update", update, token=BOB))["error"]["code"] == -32602
        assert (await seen(http, token=ALICE))["cancelled"] == []
        assert (await get(http, task_id, token=ALICE))["result"]["status"] == "working"


async def test_arguments_are_checked_before_the_server_is_asked(gateway: Running) -> None:
    async with gateway.client() as http:
        wrong = await call(http, "fx__slow", {"polls": "many"})
        assert wrong["result"]["resultType"] == "complete" and wrong["result"]["isError"] is True
        assert "polls" in text_of(wrong["result"])
        assert (await seen(http))["created"] == []  # the tool never ran


async def test_a_server_killed_mid_task_fails_the_task_clearly(gateway: Running) -> None:
    async with gateway.client() as http:
        created = await create(http, "fx__hold", {})
        pid = (await seen(http))["pid"]
        os.kill(pid, signal.SIGKILL)
        done = await until(http, created["taskId"], "failed", "completed", "cancelled")
    assert done["status"] == "failed", done
    assert "server fx" in done["statusMessage"] and done["error"]["code"] == -32603


async def test_a_remote_server_that_lost_the_task_fails_it_and_an_outage_does_not() -> None:
    with http_fixture() as fixture:
        async with (
            running_gateway(config({"fx": {"url": fixture.url}}), factory=open_agent) as gateway,
            gateway.client() as http,
        ):
            created = await create(http, "fx__hold", {})
            task_id = created["taskId"]
            fixture.stop()
            away = await until(http, task_id, "failed", "completed", "cancelled", "working")
            # a remote server that does not answer may come back: the task is not given up
            assert away["status"] == "working"

            async def unreachable() -> bool:
                answer = (await get(http, task_id))["result"]
                return "cannot be reached" in answer.get("statusMessage", "")

            await eventually(unreachable, timeout=20)
            fixture.start()  # a new process on the same port: it never heard of the task
            done = await until(http, task_id, "failed", "completed", "cancelled")
    assert done["status"] == "failed"
    assert "no longer knows this task" in done["statusMessage"] and done["error"]["code"] == -32603


async def test_a_task_the_server_makes_of_a_plain_call_is_cancelled_when_the_call_times_out() -> None:
    async with (
        running_gateway(config(tool_timeout=1), factory=open_agent) as gateway,
        gateway.client() as http,
    ):
        answer = await call(http, "fx__hold", {}, capabilities={})
        assert answer["result"]["isError"] is True and "timed out" in text_of(answer["result"])
        fixture = await seen(http)
    assert len(fixture["created"]) == 1 and fixture["cancelled"] == fixture["created"]


async def test_a_task_the_server_makes_of_a_plain_call_that_needs_input_is_cancelled(
    gateway: Running,
) -> None:
    async with gateway.client() as http:
        answer = await call(http, "fx__asks", {}, capabilities={})
        assert answer["result"]["isError"] is True and "needs input" in text_of(answer["result"])
        fixture = await seen(http)
    assert len(fixture["created"]) == 1 and fixture["cancelled"] == fixture["created"]


async def test_a_server_without_the_extension_answers_the_call_itself() -> None:
    servers = {
        "fx": {"command": sys.executable, "args": [FIXTURE]},
        "plain": {"command": sys.executable, "args": [ECHO]},
    }
    async with running_gateway(config(servers), factory=open_agent) as gateway, gateway.client() as http:
        answer = await call(http, "plain__echo", {"text": "direct"})
    assert answer["result"]["resultType"] == "complete"
    assert text_of(answer["result"]) == "direct" and "taskId" not in answer["result"]


# ------------------------------------------------------------------------------------------------ replicas


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


class HttpFixture:
    """The fixture over Streamable HTTP in its own process, on one port (``restart`` keeps it)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        process = self.process = subprocess.Popen([sys.executable, FIXTURE, "http", str(self.port)])
        for _ in range(400):  # bounded: about 20 s
            if port_open(self.port) or process.poll() is not None:
                break
            time.sleep(0.05)
        assert process.poll() is None and port_open(self.port), "the HTTP fixture did not start"

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@contextmanager
def http_fixture() -> Iterator[HttpFixture]:
    fixture = HttpFixture()
    fixture.start()
    try:
        yield fixture
    finally:
        fixture.stop()


@asynccontextmanager
async def two_replicas(servers: dict[str, Any], state: str) -> AsyncIterator[tuple[Running, Running]]:
    async with (
        running_gateway(config(servers, state=state), factory=open_agent) as first,
        running_gateway(config(servers, state=state), factory=open_agent) as second,
    ):
        yield first, second


async def test_another_replica_forwards_to_the_same_remote_server(tmp_path: Path) -> None:
    with http_fixture() as fixture:
        async with (
            two_replicas({"fx": {"url": fixture.url}}, f"sqlite:///{tmp_path}/state.db") as (first, second),
            first.client() as a,
            second.client() as b,
        ):
            created = await create(a, "fx__asks", {})
            task_id = created["taskId"]
            waiting = await until(b, task_id, "input_required")
            assert "name" in waiting["inputRequests"]
            answer = {"action": "accept", "content": {"name": "bea"}}
            update = {"taskId": task_id, "inputResponses": {"name": answer}}
            assert "result" in await rpc(b, "tasks/update", update)
            done = await until(b, task_id, "completed", "failed", "cancelled")
            assert done["status"] == "completed" and text_of(done["result"]) == "hello bea"
            held = await create(a, "fx__hold", {})
            assert "result" in await rpc(b, "tasks/cancel", {"taskId": held["taskId"]})
            assert (await until(a, held["taskId"], "cancelled", "failed"))["status"] == "cancelled"


async def test_another_replica_of_a_stdio_server_answers_from_the_store(tmp_path: Path) -> None:
    servers = {"fx": {"command": sys.executable, "args": [FIXTURE]}}
    async with (
        two_replicas(servers, f"sqlite:///{tmp_path}/state.db") as (first, second),
        first.client() as a,
        second.client() as b,
    ):
        created = await create(a, "fx__slow", {"text": "kept", "polls": 3})
        done = await until(b, created["taskId"], "completed", "failed", "cancelled")
        assert done["status"] == "completed" and text_of(done["result"]) == "slow: kept"
        held = await create(a, "fx__hold", {})
        # the other replica's own child knows nothing of it: the cancel goes through the store
        assert "result" in await rpc(b, "tasks/cancel", {"taskId": held["taskId"]})
        assert (await until(b, held["taskId"], "cancelled", "failed"))["status"] == "cancelled"
        assert (await seen(a))["cancelled"] == [(await seen(a))["created"][-1]]
        asks = await create(a, "fx__asks", {})
        await until(b, asks["taskId"], "input_required")
        update = {"taskId": asks["taskId"], "inputResponses": {"name": {"action": "accept"}}}
        refused = await rpc(b, "tasks/update", update)
        assert refused["error"]["code"] == -32603 and "replica" in refused["error"]["message"]
