"""A state store that fails under a running gateway: health says so, every route answers a
clear JSON error (never a 500, never "stopping" for good), the gateway recovers when the store
does, and one that can no longer serve exits non-zero for its supervisor to restart it.

Real gateway processes on a real small disk (a tmpfs, ``tests/small_disk.py``) that fills up;
in-process gateways (uvicorn on 127.0.0.1) on a SQLite file broken under them and on a real
Redis that goes away.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mcp_agent.config import AgentConfig, parse_config
from mcp_agent.exceptions import GatewayFailed
from mcp_agent.gateway.app import GatewayApp, create_app
from mcp_agent.gateway.serve import bind_socket, serve_app
from mcp_agent.loop.agent import Agent
from mcp_agent.state import State, StateLimits
from mcp_agent.state.memory import MemoryState
from tests.fakes.model_server import RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import completion
from tests.scale.infra import RedisServer
from tests.small_disk import SmallDisk, small_disk

from .conftest import HubLike, RuleModel, Tools, eventually, free_port

ROOT = Path(__file__).resolve().parents[2]
BOUND = 60.0
"""Seconds within which what a test waits for happens (a "does not hang" bound)."""


# --------------------------------------------------------------------------------------------
# real gateway processes on a disk that fills up


def answering(request: RecordedRequest) -> Reply:
    if not request.path.endswith("/chat/completions"):
        return Reply.json({"data": [{"id": "m"}], "object": "list"})
    return Reply.json(completion(content="fine"))


@pytest.fixture
def model() -> Iterator[Any]:
    with running_model_server() as server:
        server.handler = answering
        yield server


@dataclass
class Process:
    """``mcp-agent serve`` in a process of its own, its stderr in ``log``."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def serving(tmp_path: Path, model_url: str, state_url: str, **state: Any) -> Iterator[Process]:
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps(
            {
                "llm": {
                    "endpoint": model_url,
                    "model": "m",
                    "provider": "openai",
                    "stream": False,
                    "maxRetries": 0,
                },
                "state": {"url": state_url, "leaseSeconds": 1, **state},
            }
        )
    )
    port, log = free_port(), tmp_path / "gateway.log"
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        yield Process(proc, f"http://127.0.0.1:{port}", log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


async def health(http: httpx.AsyncClient) -> dict[str, Any]:
    try:
        response = await http.get("/api/v1/health")
    except httpx.TransportError:
        return {}
    body: dict[str, Any] = response.json()
    return body


async def ask(http: httpx.AsyncClient, text: str = "hello") -> httpx.Response:
    return await http.post("/api/v1/query", json={"query": text})


async def fill_until_the_store_fails(http: httpx.AsyncClient, disk: SmallDisk) -> None:
    """Fill the disk, then write (queries) until the store says it is full: the heartbeat's
    checkpoint fails first (the WAL reuses its space), writes once the WAL must grow."""
    disk.fill()
    with anyio.fail_after(BOUND):
        while (await health(http)).get("state", {}).get("ok") is not False:
            await ask(http)
            await anyio.sleep(0.05)


async def test_a_full_disk_shows_in_health_errors_clearly_and_the_gateway_recovers_when_space_is_back(
    tmp_path: Path, model: Any
) -> None:
    with (
        small_disk(tmp_path / "disk") as disk,
        serving(tmp_path, model.base_url, f"sqlite:///{disk.path}/state.db") as gw,
    ):
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
            await eventually(lambda: _status(http, "ok"), timeout=BOUND)
            for _ in range(20):
                assert (await ask(http)).json()["answer"] == "fine"
            await fill_until_the_store_fails(http, disk)
            said = await health(http)
            assert said["status"] == "degraded", said
            assert said["state"]["ok"] is False and "database or disk is full" in said["state"]["error"]
            assert any(reason.startswith("state store failing: ") for reason in said["reasons"])
            with anyio.fail_after(BOUND):  # writes fail once the WAL must grow: a clear error, not a 500
                while (response := await ask(http)).status_code == 200:
                    pass
            assert response.status_code == 503, response.text
            error = response.json()["error"]
            assert error["type"] == "state_error" and "database or disk is full" in error["message"]
            assert f"sqlite:///{disk.path}/state.db" in error["message"]  # the URL as configured
            assert (await http.get("/api/v1/tools")).status_code == 200  # what needs no store still works
            disk.free()
            await eventually(lambda: _status(http, "ok"), timeout=BOUND)
            assert (await health(http))["state"] == {"ok": True, "error": None, "failing_seconds": None}
            assert (await ask(http)).json()["answer"] == "fine"
            assert gw.proc.poll() is None
    assert "state store works again" in gw.stderr()


async def test_a_store_broken_past_max_outage_makes_the_gateway_exit_1(tmp_path: Path, model: Any) -> None:
    with (
        small_disk(tmp_path / "disk") as disk,
        serving(tmp_path, model.base_url, f"sqlite:///{disk.path}/state.db", maxOutageSeconds=2) as gw,
    ):
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
            await eventually(lambda: _status(http, "ok"), timeout=BOUND)
            for _ in range(20):
                await ask(http)
            await fill_until_the_store_fails(http, disk)
        code = await anyio.to_thread.run_sync(lambda: gw.proc.wait(timeout=BOUND))
        disk.free()
    assert code == 1, gw.stderr()
    said = gw.stderr()
    assert (
        "the gateway stopped: the state store has failed for" in said
        and "state.maxOutageSeconds is 2" in said
    )
    assert "database or disk is full" in said and "exiting 1, for a supervisor to restart it" in said


async def test_an_emptied_state_db_stops_the_next_start_naming_the_file(tmp_path: Path, model: Any) -> None:
    path = tmp_path / "data" / "state.db"
    with serving(tmp_path, model.base_url, f"sqlite:///{path}") as gw:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
            await eventually(lambda: _status(http, "ok"), timeout=BOUND)
            assert (await ask(http)).status_code == 200
        gw.proc.send_signal(signal.SIGTERM)
        assert await anyio.to_thread.run_sync(lambda: gw.proc.wait(timeout=BOUND)) == 0
    os.truncate(path, 0)
    with serving(tmp_path, model.base_url, f"sqlite:///{path}") as gw:
        code = await anyio.to_thread.run_sync(lambda: gw.proc.wait(timeout=BOUND))
    assert code == 2
    said = gw.stderr()
    assert f"state.url 'sqlite:///{path}' ({path}): the file is empty (0 bytes)" in said
    assert "delete it to start a fresh store" in said
    assert path.stat().st_size == 0  # untouched


async def _status(http: httpx.AsyncClient, wanted: str) -> bool:
    said = await health(http)
    return said.get("status") == wanted and said.get("state", {}).get("ok") is True


# --------------------------------------------------------------------------------------------
# in-process gateways


@dataclass
class Gateway:
    url: str
    app: GatewayApp
    failed: list[GatewayFailed] = field(default_factory=list)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=30)


def config_for(state_url: str, **state: Any) -> AgentConfig:
    return parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
            "approvals": {"require": ["write_file"], "timeoutSeconds": 30},
            "state": {"url": state_url, "leaseSeconds": 1, **state},
        },
        environ={},
    )


def agent_on_the_state() -> Any:
    """An Agent factory that keeps its conversations in the gateway's state (as the real one)."""
    hub = HubLike(Tools().source)

    @asynccontextmanager
    async def factory(config: AgentConfig, state: State) -> AsyncIterator[Agent]:
        yield Agent(RuleModel(), hub, config, state=state)

    return factory


@asynccontextmanager
async def gateway(
    config: AgentConfig, *, state: State | None = None, factory: Any = None
) -> AsyncIterator[Gateway]:
    app = create_app(config, factory=factory or agent_on_the_state(), state=state)
    sock = bind_socket("127.0.0.1", 0)
    stop, ready = anyio.Event(), anyio.Event()
    running = Gateway(f"http://127.0.0.1:{sock.getsockname()[1]}", app)

    async def serve() -> None:
        try:
            await serve_app(app, sock, stop=stop, handle_signals=False, on_ready=lambda h, p: ready.set())
        except GatewayFailed as exc:
            running.failed.append(exc)
            ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        with anyio.fail_after(BOUND):
            await ready.wait()
            await app.service.ready.wait()
        try:
            yield running
        finally:
            stop.set()


ROUTES = [
    ("GET", "/api/v1/sessions"),
    ("GET", "/api/v1/approvals"),
    ("GET", "/api/v1/runs"),
    ("GET", "/api/v1/runs/nope"),
    ("DELETE", "/api/v1/sessions/nope"),
    ("POST", "/api/v1/approvals/nope"),
    ("POST", "/api/v1/query"),
]


async def every_route_answers_clearly(http: httpx.AsyncClient, said: str) -> set[int]:
    """Each route that touches the store answers 2xx/404 or a JSON ``state_error`` 503 naming
    ``said``: never a 500. The statuses seen."""
    seen = set()
    for method, path in ROUTES:
        body = {"approved": True} if "approvals/" in path else {"query": "hello"} if "query" in path else None
        response = await http.request(method, path, json=body)
        seen.add(response.status_code)
        assert response.status_code in (200, 404, 503), (path, response.status_code, response.text)
        if response.status_code == 503:
            error = response.json()["error"]
            assert error["type"] == "state_error" and said in error["message"], (path, error)
    return seen


async def test_a_state_db_emptied_under_the_gateway_shows_in_health_and_no_route_answers_500(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    async with gateway(config_for(f"sqlite:///{path}")) as gw, gw.client() as http:
        for _ in range(3):
            assert (await ask(http, "echo hi")).status_code == 200
        assert (await health(http))["state"]["ok"] is True
        os.truncate(path, 0)
        await eventually(lambda: _failing(http), timeout=BOUND)
        said = await health(http)
        assert said["status"] == "degraded"
        assert f"the database file {path} was emptied (truncated to 0 bytes)" in said["state"]["error"]
        seen = await every_route_answers_clearly(http, f"state.url 'sqlite:///{path}'")
        assert 503 in seen
        assert (await http.get("/api/v1/tools")).status_code == 200
        assert gw.app.service.state == "ready" and not gw.failed


async def test_redis_gone_under_the_gateway_shows_in_health_errors_clearly_and_recovers(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path, persist=False).start()
    try:
        async with gateway(config_for(server.url)) as gw, gw.client() as http:
            assert (await ask(http, "echo hi")).status_code == 200
            server.stop()
            await eventually(lambda: _failing(http), timeout=BOUND)
            said = await health(http)
            assert said["status"] == "degraded" and "Redis failed" in said["state"]["error"]
            seen = await every_route_answers_clearly(http, f"state.url {server.url}: Redis failed")
            assert 503 in seen
            server.start()
            await eventually(lambda: _status(http, "ok"), timeout=BOUND)
            assert (await ask(http, "echo again")).status_code == 200
            assert (await http.get("/api/v1/sessions")).status_code == 200
            assert not gw.failed
    finally:
        server.stop()


async def _failing(http: httpx.AsyncClient) -> bool:
    return (await health(http)).get("state", {}).get("ok") is False


class RelayThatBreaks(MemoryState):
    """A memory state whose ``events.relay`` (a task of the service's own) fails once started:
    the service cannot go on as it should."""

    class Events:
        async def relay(self, sink: Any, **_: Any) -> None:
            await anyio.sleep(0.2)
            raise RuntimeError("the relay broke")

        def emit(self, event: Any) -> None:
            pass

        async def listening(self) -> None:
            pass

    def __init__(self) -> None:
        super().__init__(StateLimits())
        self._events = self.Events()

    @property
    def events(self) -> Any:
        return self._events


class BeatThatBreaks(MemoryState):
    """A memory state whose heartbeat fails with what no backend should raise, until ``mended``."""

    def __init__(self) -> None:
        super().__init__(StateLimits(lease_seconds=1))
        self.mended = False

    async def beat(self) -> None:
        if not self.mended:
            raise RuntimeError("a bug in a backend")
        await super().beat()


async def test_the_heartbeat_never_ends_the_service_whatever_the_store_raises(tmp_path: Path) -> None:
    state = BeatThatBreaks()
    async with gateway(config_for("memory://"), state=state) as gw, gw.client() as http:
        await eventually(lambda: _failing(http), timeout=BOUND)
        assert (await health(http))["state"]["error"] == "a bug in a backend"
        assert (await ask(http, "echo hi")).status_code == 200  # still serving
        state.mended = True
        await eventually(lambda: _status(http, "ok"), timeout=BOUND)
        assert gw.app.service.state == "ready" and not gw.failed


async def test_a_gateway_whose_service_ends_on_an_error_stops_and_says_so(tmp_path: Path) -> None:
    config = config_for("memory://")
    async with gateway(config, state=RelayThatBreaks()) as gw:
        with anyio.fail_after(BOUND):
            await gw.app.service.gave_up.wait()
            while not gw.failed:
                await anyio.sleep(0.05)
    [failed] = gw.failed
    assert "its service ended: RuntimeError: the relay broke" in str(failed)


async def test_a_store_that_keeps_failing_ends_the_gateway_after_max_outage(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, persist=False).start()
    try:
        async with gateway(config_for(server.url, maxOutageSeconds=1)) as gw:
            server.stop()
            with anyio.fail_after(BOUND):
                await gw.app.service.gave_up.wait()
                while not gw.failed:
                    await anyio.sleep(0.05)
        [failed] = gw.failed
        assert "the state store has failed for" in str(failed) and "Redis failed" in str(failed)
    finally:
        server.stop()


async def test_a_stdio_gateway_whose_store_stays_broken_exits_1(tmp_path: Path, model: Any) -> None:
    server = RedisServer(tmp_path, persist=False).start()
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps(
            {
                "llm": {"endpoint": model.base_url, "model": "m", "provider": "openai", "maxRetries": 0},
                "state": {"url": server.url, "leaseSeconds": 1, "maxOutageSeconds": 1},
            }
        )
    )
    log = tmp_path / "stdio.log"
    try:
        with open(log, "wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "mcp_agent", "serve", "--stdio", "--config", str(config)],
                stdin=subprocess.PIPE,  # kept open: only the store ends it
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        try:
            await eventually(
                lambda: b"mcp-agent:replica:" in server.command("KEYS", "*"), timeout=BOUND
            )  # it is up
            server.stop()
            code = await anyio.to_thread.run_sync(lambda: proc.wait(timeout=BOUND))
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            assert proc.stdin is not None
            proc.stdin.close()
    finally:
        server.stop()
    said = log.read_text(errors="replace")
    assert code == 1, said
    assert "the gateway stopped: the state store has failed for" in said and "Redis failed" in said
    assert "exiting 1, for its client to start it again" in said
