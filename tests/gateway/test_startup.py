"""Start-up as a newcomer meets it: ``mcp-agent serve`` with no model server running still
serves, says at once which endpoint it could not reach and how to start one, shows it in health,
and ``agent_query`` answers with that error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
from mcp import Client

from mcp_agent.config import parse_config
from mcp_agent.events import ModelCallEnded
from mcp_agent.gateway.lifespan import probe_model_server, watch_model_server
from mcp_agent.gateway.service import GatewayService
from tests.fakes.model_server import RecordedRequest, Reply, running_model_server

from .conftest import eventually, free_port

ROOT = Path(__file__).resolve().parents[2]
ECHO = str(ROOT / "tests" / "servers" / "echo.py")


def _config(tmp_path: Path, endpoint: str, port: int) -> Path:
    path = tmp_path / "agent.json"
    path.write_text(
        json.dumps(
            {
                "llm": {"endpoint": endpoint, "model": "qwen3:8b", "maxRetries": 0},
                "mcpServers": {"echo": {"command": sys.executable, "args": [ECHO]}},
                "gateway": {"port": port},
            }
        )
    )
    return path


async def test_serve_without_a_model_server_says_so_and_still_answers(tmp_path: Path) -> None:
    dead, port = free_port(), free_port()
    config = _config(tmp_path, f"http://127.0.0.1:{dead}/v1", port)
    stderr = open(tmp_path / "stderr.txt", "w+")  # noqa: SIM115 - read back below
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**os.environ},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base) as http:

            async def model_checked() -> bool:
                try:
                    body = (await http.get("/api/v1/health")).json()
                except httpx.HTTPError:
                    return False
                return body.get("model_server", {}).get("reachable") is False and body["status"] == "degraded"

            await eventually(model_checked, timeout=30)
            answer = await http.get("/api/v1/health")
            health = answer.json()
            assert answer.status_code == 200 and health["reasons"] == ["model server unreachable"]  # serving
            assert f"127.0.0.1:{dead}" in health["model_server"]["error"]
            assert "start a model server" in health["model_server"]["error"]

        with anyio.fail_after(30):
            async with Client(f"{base}/mcp") as client:
                result = await client.call_tool("agent_query", {"query": "hello?"})
        assert result.is_error
        text = result.content[0].text
        assert text.startswith("Agent terminated (llm_error)")  # not running yet: a later retry helps
        assert f"127.0.0.1:{dead}" in text and "(retrying may help)" in text
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        stderr.seek(0)
        log = stderr.read()
        stderr.close()
        assert process.stdout is not None
        out = process.stdout.read()
        process.stdout.close()
    assert f"mcp-agent: serving http://127.0.0.1:{port}" in log
    assert "model server:" in log and f"127.0.0.1:{dead}" in log
    assert out == b""  # stdout stays clean


async def test_probe_finds_the_model_or_says_it_is_missing() -> None:
    def models(request: RecordedRequest) -> Reply:
        return Reply.json({"object": "list", "data": [{"id": "qwen3:8b"}, {"id": "llama3.2:latest"}]})

    with running_model_server() as server:
        server.handler = models
        for model, present in (("qwen3:8b", True), ("llama3.2", True), ("mistral", False)):
            service = GatewayService(parse_config({"llm": {"endpoint": server.base_url, "model": model}}))
            await probe_model_server(service)
            assert service.model_server["reachable"] is True
            assert service.model_server["model_present"] is present
            assert (service.model_server["error"] is None) is present


async def test_probe_reports_a_server_that_does_not_answer() -> None:
    with running_model_server() as server:
        server.enqueue(Reply.json({"data": []}, delay=5))
        service = GatewayService(parse_config({"llm": {"endpoint": server.base_url}}))
        await probe_model_server(service, timeout=0.5)
    assert service.model_server["reachable"] is False
    assert "did not answer within 0.5 s" in service.model_server["error"]


def _models(request: RecordedRequest) -> Reply:
    return Reply.json({"object": "list", "data": [{"id": "qwen3:8b"}]})


async def test_health_notices_a_model_server_that_died_after_a_failed_model_call() -> None:
    """Probed at start-up, then at once after a model call fails (the interval is an hour here)."""
    async with anyio.create_task_group() as tg:
        with running_model_server() as server:
            server.handler = _models
            service = GatewayService(
                parse_config({"llm": {"endpoint": server.base_url, "model": "qwen3:8b"}})
            )
            tg.start_soon(lambda: watch_model_server(service, interval=3600))
            service.state = "ready"  # (serving; no agent is needed for what health says of the model)
            await eventually(lambda: service.model_server["reachable"] is True)
            assert service.health() == ("ok", [])
        # the server is gone; a run's failed model call is what tells the watcher
        assert service.model_server["reachable"] is True
        service.model_failures.emit(ModelCallEnded(run_id="r", round=1, ok=False, error="refused"))
        await eventually(lambda: service.model_server["reachable"] is False)
        assert "No model server is listening" in str(service.model_server["error"])
        assert service.health() == ("degraded", ["model server unreachable"])
        tg.cancel_scope.cancel()


async def test_health_reprobes_the_model_server_periodically() -> None:
    async with anyio.create_task_group() as tg:
        with running_model_server() as server:
            server.handler = _models
            service = GatewayService(
                parse_config({"llm": {"endpoint": server.base_url, "model": "qwen3:8b"}})
            )
            tg.start_soon(lambda: watch_model_server(service, interval=0.05))
            await eventually(lambda: service.model_server["reachable"] is True)
            probes = len(server.requests)
            await eventually(lambda: len(server.requests) > probes)  # probed again, unasked
        await eventually(lambda: service.model_server["reachable"] is False)
        tg.cancel_scope.cancel()


async def test_accepted_connections_have_tcp_nodelay() -> None:
    """The pre-bound listening socket says TCP, so asyncio sets TCP_NODELAY on every accepted
    connection; without it each small SSE write waited ~40 ms for a delayed ACK."""
    import asyncio
    import socket

    from mcp_agent.gateway.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    assert sock.proto == socket.IPPROTO_TCP
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            conn = transport.get_extra_info("socket")
            accepted.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    try:
        port = sock.getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        with anyio.fail_after(10):
            assert await accepted != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
