"""Restarts of a real gateway process on the default SQLite state (no ``state`` key in agent.json):
a conversation goes on after SIGTERM and after SIGKILL, the run history survives, and a run
killed in flight is recorded ``terminal_error`` with its pending approval expired for good."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.state import INTERRUPTED
from tests.fakes.model_server import RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion

from .conftest import eventually, free_port

ROOT = Path(__file__).resolve().parents[2]
ECHO = ROOT / "tests" / "servers" / "echo.py"


def remembering(request: RecordedRequest) -> Reply:
    """``echo X`` calls the echo tool; anything else is answered with every user message so far."""
    if not request.path.endswith("/chat/completions"):
        return Reply.json({"data": [{"id": "m"}], "object": "list"})
    messages = request.json["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    if messages[-1]["role"] == "user" and users[-1].startswith("echo "):
        return Reply.json(
            completion(content=None, calls=[Call("echo__echo", {"text": users[-1][5:]}, id="c1")])
        )
    return Reply.json(completion(content="I heard: " + " | ".join(users)))


def write_config(folder: Path, model_url: str, **more: Any) -> Path:
    """The config of these tests (echo needs an approval), with ``more`` top-level keys."""
    path = folder / "agent.json"
    config: dict[str, Any] = {
        "llm": {"endpoint": model_url, "model": "m", "provider": "openai", "stream": False, "maxRetries": 0},
        "mcpServers": {"echo": {"command": sys.executable, "args": [str(ECHO)]}},
        "approvals": {"require": ["echo__*"], "timeoutSeconds": 600},
        "limits": {"timeoutSeconds": 600},
        **more,
    }
    path.write_text(json.dumps(config))
    return path


class Gateway:
    def __init__(self, process: anyio.abc.Process, http: httpx.AsyncClient) -> None:
        self.process = process
        self.http = http

    async def query(self, text: str, session_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"query": text}
        if session_id is not None:
            body["session_id"] = session_id
        response = await self.http.post("/api/v1/query", json=body)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    async def stop(self, how: signal.Signals) -> None:
        self.process.send_signal(how)
        with anyio.fail_after(30):
            await self.process.wait()


@asynccontextmanager
async def gateway(config: Path, state_dir: Path, log: Path) -> AsyncIterator[Gateway]:
    port = free_port()
    env = {**os.environ, "MCP_AGENT_STATE_DIR": str(state_dir), "PYTHONPATH": str(ROOT)}
    with open(log, "a") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
            stdout=-1,
            stderr=stderr,
            cwd=str(ROOT),
            env=env,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:

            async def ready() -> bool:
                try:
                    response = await http.get("/api/v1/health")
                except httpx.TransportError:
                    return False
                return response.json().get("status") in ("ok", "degraded")

            await eventually(ready, timeout=60)
            yield Gateway(process, http)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


@pytest.fixture
def model() -> Any:
    with running_model_server() as server:
        server.handler = remembering
        yield server


async def test_a_conversation_goes_on_after_a_restart_and_after_sigkill(tmp_path: Path, model: Any) -> None:
    config, state, log = write_config(tmp_path, model.base_url), tmp_path / "state", tmp_path / "log.txt"
    async with gateway(config, state, log) as first:
        started = await first.query("my name is Ada")
        session_id = started["session_id"]
        await first.stop(signal.SIGTERM)
    assert (state / "state.db").exists()
    async with gateway(config, state, log) as second:
        answer = await second.query("who am I?", session_id)
        assert answer["answer"] == "I heard: my name is Ada | who am I?"
        await second.stop(signal.SIGKILL)
    async with gateway(config, state, log) as third:
        answer = await third.query("and again?", session_id)
        assert answer["answer"] == "I heard: my name is Ada | who am I? | and again?"
        runs = (await third.http.get("/api/v1/runs")).json()["runs"]
        assert [run["query"] for run in runs] == ["and again?", "who am I?", "my name is Ada"]
        assert {run["session_id"] for run in runs} == {session_id}
        assert all(run["termination_reason"] == "success" for run in runs)
        sessions = (await third.http.get("/api/v1/sessions")).json()["sessions"]
        assert [(s["id"], s["runs"], s["busy"]) for s in sessions] == [(session_id, 3, False)]


async def test_a_run_killed_in_flight_is_recorded_and_its_approval_expires(
    tmp_path: Path, model: Any
) -> None:
    config, state, log = write_config(tmp_path, model.base_url), tmp_path / "state", tmp_path / "log.txt"
    async with gateway(config, state, log) as first:
        session_id = (await first.query("hello"))["session_id"]
        pending: list[dict[str, Any]] = []

        async def ask() -> None:
            with contextlib.suppress(httpx.TransportError):  # the gateway is killed under it
                await first.http.post(
                    "/api/v1/query", json={"query": "echo danger", "session_id": session_id}
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)

            async def waiting() -> bool:
                pending[:] = (await first.http.get("/api/v1/approvals")).json()["pending"]
                return bool(pending)

            await eventually(waiting, timeout=60)
            [approval] = pending
            run = (await first.http.get(f"/api/v1/runs/{approval['run_id']}")).json()
            assert run["termination_reason"] is None and run["query"] == "echo danger"  # in flight
            await first.stop(signal.SIGKILL)
    async with gateway(config, state, log) as second:
        run = (await second.http.get(f"/api/v1/runs/{approval['run_id']}")).json()
        assert (run["termination_reason"], run["detail"]) == ("terminal_error", INTERRUPTED)
        assert run["ended"] is not None and run["session_id"] == session_id
        assert (await second.http.get("/api/v1/approvals")).json()["pending"] == []
        late = await second.http.post(f"/api/v1/approvals/{approval['id']}", json={"approved": True})
        assert late.status_code == 404  # expired: never applied later
        failed = (await second.http.get("/api/v1/runs", params={"reason": "terminal_error"})).json()["runs"]
        assert [r["id"] for r in failed] == [approval["run_id"]]
        answer = await second.query("still there?", session_id)  # the session's lock went with the process
        assert answer["answer"] == "I heard: hello | still there?"
    assert "a gateway restart interrupted 1 run (recorded as terminal_error)" in log.read_text()


async def test_serve_stateless_keeps_conversations_in_memory(tmp_path: Path, model: Any) -> None:
    config, state, log = write_config(tmp_path, model.base_url), tmp_path / "state", tmp_path / "log.txt"
    port = free_port()
    env = {**os.environ, "MCP_AGENT_STATE_DIR": str(state), "PYTHONPATH": str(ROOT)}
    with open(log, "a") as stderr:
        process = await anyio.open_process(
            [
                sys.executable,
                "-m",
                "mcp_agent",
                "serve",
                "--stateless",
                "--config",
                str(config),
                "--port",
                str(port),
            ],
            stdout=-1,
            stderr=stderr,
            cwd=str(ROOT),
            env=env,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:

            async def ready() -> bool:
                try:
                    return (await http.get("/api/v1/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(ready, timeout=60)
            assert (await http.post("/api/v1/query", json={"query": "hi"})).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            await process.wait()
        await process.aclose()
    assert not (state / "state.db").exists()


@pytest.mark.parametrize("bad", ["directory", "garbage"])
async def test_serve_refuses_a_state_it_cannot_use_and_leaves_it_alone(tmp_path: Path, bad: str) -> None:
    target = tmp_path / "state.db"
    if bad == "directory":
        target.mkdir()
    else:
        target.write_bytes(b"not a database\n" * 1000)
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps(
            {
                "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"},
                "state": {"url": "sqlite:///state.db"},
            }
        )
    )
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(free_port())],
            check=False,
            cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "state.url 'sqlite:///" in stderr and str(target) in stderr  # relative to agent.json's folder
    if bad == "garbage":
        assert target.read_bytes() == b"not a database\n" * 1000
    else:
        assert target.is_dir() and not any(target.iterdir())
