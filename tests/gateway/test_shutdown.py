"""A SIGTERM with thousands of open MCP sessions and streams (a real process) ends cleanly: exit 0,
every stream ended by the gateway's own drain, not by uvicorn's backstop. How long it takes is
printed (``-s``), not asserted: on a loaded machine it is the machine's time, not the gateway's."""

from __future__ import annotations

import json
import logging
import resource
import signal
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest

from tests.fakes.model_server import running_model_server

from .conftest import eventually, free_port
from .e2e import rule_reply

ROOT = Path(__file__).resolve().parents[2]
SSE_SESSIONS = 1000
HTTP_SESSIONS = 1000
HTTP_STREAMS = 300
INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
).encode()


def _request(port: int, head: str, body: bytes = b"") -> bytes:
    return f"{head}\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


async def _until(stream: anyio.abc.SocketStream, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        data += await stream.receive()
    return data


@pytest.fixture
def many_descriptors() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = SSE_SESSIONS + HTTP_SESSIONS + HTTP_STREAMS + 500
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.fail(f"this test needs {wanted} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


async def test_sigterm_with_thousands_of_sessions_and_streams(tmp_path: Path, many_descriptors: None) -> None:
    config = tmp_path / "agent.json"
    streams: list[anyio.abc.SocketStream] = []
    with running_model_server() as model:
        model.handler = rule_reply
        config.write_text(
            json.dumps(
                {
                    "llm": {"endpoint": model.base_url, "model": "rule-model", "provider": "openai"},
                    "gateway": {"maxMcpSessions": 5000, "readTimeoutSeconds": 60},
                }
            )
        )
        port = free_port()
        stderr = open(tmp_path / "stderr.txt", "w")  # noqa: SIM115 (closed below)
        process = await anyio.open_process(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
            stdout=-1,
            stderr=stderr,
            cwd=str(ROOT),
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:

                async def healthy() -> bool:
                    try:
                        return (await http.get("/api/v1/health")).status_code == 200
                    except httpx.TransportError:
                        return False

                await eventually(healthy, timeout=30)

            async def open_sse() -> None:
                stream = await anyio.connect_tcp("127.0.0.1", port)
                streams.append(stream)
                await stream.send(_request(port, "GET /sse HTTP/1.1\r\nAccept: text/event-stream"))
                await _until(stream, b"session_id=")

            session_ids: list[str] = []

            async def open_http() -> None:
                stream = await anyio.connect_tcp("127.0.0.1", port)
                streams.append(stream)
                head = (
                    "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n"
                    "Accept: application/json, text/event-stream"
                )
                await stream.send(_request(port, head, INIT))
                answer = await _until(stream, b'"result"')
                for line in answer.split(b"\r\n"):
                    if line.lower().startswith(b"mcp-session-id:"):
                        session_ids.append(line.split(b":", 1)[1].strip().decode())

            async def open_stream(session_id: str) -> None:
                stream = await anyio.connect_tcp("127.0.0.1", port)
                streams.append(stream)
                head = f"GET /mcp HTTP/1.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session_id}"
                await stream.send(_request(port, head))
                await _until(stream, b"200")

            with anyio.fail_after(240):
                for opener, count in ((open_sse, SSE_SESSIONS), (open_http, HTTP_SESSIONS)):
                    for start in range(0, count, 100):
                        async with anyio.create_task_group() as tg:
                            for _ in range(min(100, count - start)):
                                tg.start_soon(opener)
                async with anyio.create_task_group() as tg:
                    for session_id in session_ids[:HTTP_STREAMS]:
                        tg.start_soon(open_stream, session_id)
            assert len(session_ids) == HTTP_SESSIONS

            began = time.monotonic()
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(60):  # a "does not hang" bound (the clean end is checked below)
                code = await process.wait()
            took = time.monotonic() - began
            assert code == 0
            print(f"shutdown took {took:.2f} s with {len(streams)} connections")
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            for stream in streams:
                await stream.aclose()
            stderr.close()
            if process.stdout is not None:
                await process.stdout.aclose()
    logged = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in logged
    # the drain ended every stream itself: uvicorn's backstop (GRACEFUL_SECONDS) cancelled nothing
    assert "graceful shutdown exceeded" not in logged, logged[-2000:]


async def test_uvicorns_backstop_waits_for_the_drain(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A drain that takes longer than uvicorn's backstop (running queries get
    ``QUERY_CANCEL_SECONDS``; a busy machine is slow) still ends every stream itself: the
    backstop starts counting only after the drain."""
    from mcp_agent.gateway import serve as serve_module
    from mcp_agent.gateway.app import GatewayApp

    from .conftest import running_gateway

    caplog.set_level(logging.INFO)
    monkeypatch.setattr(serve_module, "GRACEFUL_SECONDS", 0.05)
    original = GatewayApp.shutdown

    async def slow_shutdown(self: GatewayApp, **kwargs: float) -> None:
        await anyio.sleep(1.0)  # longer than the backstop above
        await original(self, **kwargs)

    monkeypatch.setattr(GatewayApp, "shutdown", slow_shutdown)
    async with running_gateway() as running:
        stream = await anyio.connect_tcp("127.0.0.1", running.port)
        await stream.send(_request(running.port, "GET /sse HTTP/1.1\r\nAccept: text/event-stream"))
        await _until(stream, b"session_id=")
    # running_gateway returned: the server stopped; the stream was ended by the drain
    with anyio.fail_after(10):
        rest = b""
        try:
            while True:
                rest += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass
    await stream.aclose()
    assert "graceful shutdown exceeded" not in caplog.text
    assert "closed 1 open streams" in caplog.text
