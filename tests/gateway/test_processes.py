"""The gateway as a process: stdio serving (clean stdout) and graceful shutdown on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from mcp_agent.gateway.service import SHUTTING_DOWN
from tests.fakes.model_server import FakeModelServer, running_model_server

from .conftest import answer_of, eventually, free_port
from .e2e import rule_reply, write_config
from .test_mcp import connect

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        server.handler = rule_reply
        yield server


async def test_stdio_via_the_cli(model_server: FakeModelServer, tmp_path: Path) -> None:
    config = write_config(tmp_path, model_server.base_url, tmp_path / "slow.log")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_agent", "serve", "--stdio", "--config", str(config)],
        cwd=str(ROOT),
        env={"MCP_AGENT_STATE_DIR": str(tmp_path / "state")},  # the SDK passes only a safe few
    )
    with open(tmp_path / "stderr.txt", "w") as errlog, anyio.fail_after(30):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            [tool] = (await session.list_tools()).tools
            assert tool.name == "agent_query"
            seen: list[str | None] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append(message)

            result = await session.call_tool(
                "agent_query", {"query": "echo stdio"}, progress_callback=progress
            )
            assert answer_of(result) == "echo__echo said: stdio"
            await eventually(lambda: len(seen) == 4)


async def test_stdio_stdout_carries_only_protocol(model_server: FakeModelServer, tmp_path: Path) -> None:
    config = write_config(tmp_path, model_server.base_url, tmp_path / "slow.log")
    script = Path(__file__).with_name("_noisy_stdio.py")
    stderr = os.open(tmp_path / "stderr.txt", os.O_WRONLY | os.O_CREAT)
    lines: list[str] = []
    async with await anyio.open_process(
        [sys.executable, str(script), str(config)], stdin=-1, stdout=-1, stderr=stderr, cwd=str(ROOT)
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        buffer = b""

        async def send(message: dict[str, Any]) -> None:
            assert process.stdin is not None
            await process.stdin.send((json.dumps(message) + "\n").encode())

        async def until(request_id: int) -> dict[str, Any]:
            nonlocal buffer
            assert process.stdout is not None
            while True:
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    lines.append(line.decode())
                    message = json.loads(line)  # every line on stdout is JSON-RPC
                    assert message["jsonrpc"] == "2.0"
                    if message.get("id") == request_id:
                        return message
                buffer += await process.stdout.receive()

        with anyio.fail_after(30):
            await send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"},
                    },
                }
            )
            init = await until(1)
            assert init["result"]["protocolVersion"] == "2025-06-18"
            await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await send(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {
                        "name": "agent_query",
                        "arguments": {"query": "echo raw"},
                        "_meta": {"progressToken": "p"},
                    },
                }
            )
            answer = await until(2)
            assert answer["result"]["content"][0]["text"].startswith("echo__echo said: raw\n\n[session_id: ")
            await process.stdin.aclose()  # the client goes away: the gateway ends
            assert await process.wait() == 0
    os.close(stderr)
    assert any('"notifications/progress"' in line for line in lines)
    assert "stray" in (tmp_path / "stderr.txt").read_text()


async def test_stdio_answers_malformed_lines_and_logs_them(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    """Over stdio, a line that was no JSON-RPC message got no answer and no log line: the client
    waited forever."""
    config = write_config(tmp_path, model_server.base_url, tmp_path / "slow.log")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    lines = [
        json.dumps(init),
        "this is not json",
        '{"jsonrpc": "2.0", "id": 3}',
        '{"id": "four", "method": "ping"}',
        "[1, 2]",
        '{"jsonrpc": "2.0", "id": 6, "method": "ping"}',
    ]
    answers: list[dict[str, Any]] = []
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "wb") as errors_out, anyio.fail_after(30):
        async with await anyio.open_process(
            [sys.executable, "-m", "mcp_agent", "serve", "--stdio", "--config", str(config)],
            stdin=-1,
            stdout=-1,
            stderr=errors_out,
            cwd=str(ROOT),
            env={**os.environ, "MCP_AGENT_STATE_DIR": str(tmp_path / "state")},
        ) as process:
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send(("\n".join(lines) + "\n").encode())
            buffer = b""
            while not answers or answers[-1].get("id") != 6:  # the ping after the bad lines
                buffer += await process.stdout.receive()
                *complete, buffer = buffer.split(b"\n")
                answers.extend(json.loads(line) for line in complete)
            await process.stdin.aclose()
            assert await process.wait() == 0
    errors = [(answer["id"], answer["error"]["code"]) for answer in answers if "error" in answer]
    assert errors == [(None, -32700), (3, -32600), ("four", -32600), (None, -32600)]
    assert answers[-1] == {"jsonrpc": "2.0", "id": 6, "result": {}}  # the session goes on
    logged = stderr.read_text()
    assert "answered -32700 to a malformed line: this is not json" in logged
    assert logged.count("to a malformed line") == 4


async def test_sigterm_with_queries_in_flight(model_server: FakeModelServer, tmp_path: Path) -> None:
    record = tmp_path / "slow.log"
    config = write_config(tmp_path, model_server.base_url, record)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stderr = os.open(tmp_path / "stderr.txt", os.O_WRONLY | os.O_CREAT)
    process = await anyio.open_process(
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
        stdin=-1,
        stdout=-1,
        stderr=stderr,
        cwd=str(ROOT),
    )
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:

            async def healthy() -> bool:
                try:
                    return (await http.get("/api/v1/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(healthy, timeout=30)
            children = psutil.Process(process.pid).children(recursive=True)
            assert len(children) >= 2  # the slow and echo servers
            rest_answer: list[httpx.Response] = []
            mcp_answer: list[Any] = []

            async with anyio.create_task_group() as tg:

                async def rest() -> None:
                    rest_answer.append(await http.post("/api/v1/query", json={"query": "sleep 60"}))

                async def mcp() -> None:
                    async with connect(url, "sse", "legacy") as client:
                        mcp_answer.append(await client.call_tool("agent_query", {"query": "sleep 60"}))

                tg.start_soon(rest)
                tg.start_soon(mcp)
                await eventually(
                    lambda: record.exists() and record.read_text().count("started") == 2, timeout=20
                )
                process.send_signal(signal.SIGTERM)
                with anyio.fail_after(10):
                    assert await process.wait() == 0
        assert rest_answer[0].status_code == 200
        assert rest_answer[0].json()["termination_reason"] == "cancelled"
        assert mcp_answer[0].is_error
        # not "cancelled by the caller": nobody asked it to stop but the gateway's supervisor
        assert (
            mcp_answer[0]
            .content[0]
            .text.startswith(f"Agent terminated (cancelled): {SHUTTING_DOWN} (round 1)")
        )
        assert SHUTTING_DOWN in rest_answer[0].json()["error"]
        _, alive = psutil.wait_procs(children, timeout=5)
        assert alive == []
        assert record.read_text().count("cancelled") == 2  # both inner calls were cancelled on the server
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(stderr)
        if process.stdin is not None:
            await process.stdin.aclose()
        if process.stdout is not None:
            await process.stdout.aclose()


def test_no_stray_output_in_library_code() -> None:
    """No ``print(`` in the gateway's modules: stdout belongs to the protocol in stdio mode."""
    folder = ROOT / "mcp_agent" / "gateway"
    offenders = [str(path) for path in folder.rglob("*.py") if "print(" in path.read_text()]
    assert offenders == []
    assert os.path.exists(folder / "serve.py")
