"""The adversarial suite: a real gateway process (and a fake model server) to throw input at.

``gateway`` serves the bundled-style config with fixture tool servers (echo, slow), approvals
on ``write*`` tools and ``exposeTools``; tests talk to it over real sockets with sync clients
(hypothesis drives sync tests). After the suite, the outcome table is printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.model_server import FakeModelServer, running_model_server
from tests.gateway.e2e import SERVERS, rule_reply

from ._table import render

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Gateway:
    """A running ``mcp-agent serve`` process."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    config: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def assert_healthy(self, http: httpx.Client) -> None:
        """Alive, health answers, and a valid query still gets its answer."""
        assert self.alive(), self.log.read_text()[-3000:]
        assert http.get("/api/v1/health").status_code == 200
        answer = http.post("/api/v1/query", json={"query": "still there?"})
        assert answer.status_code == 200 and answer.json()["answer"] == "answer: still there?", answer.text


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(
    folder: Path,
    model_url: str,
    *,
    llm: dict[str, Any] | None = None,
    servers: dict[str, Any] | None = None,
    approvals: dict[str, Any] | None = None,
    **gateway: Any,
) -> Path:
    config = {
        "llm": {
            "endpoint": model_url,
            "model": "rule-model",
            "provider": "openai",
            "stream": False,
            "maxRetries": 0,
            **(llm or {}),
        },
        "limits": {"maxRounds": 4, "toolTimeoutSeconds": 10, "timeoutSeconds": 30},
        "approvals": approvals or {"require": ["*write*"], "timeoutSeconds": 1},
        "mcpServers": {
            "echo": {"command": sys.executable, "args": [str(SERVERS / "echo.py")]},
            **(servers or {}),
        },
        "gateway": {
            "description": "Adversarial target.",
            "exposeTools": True,
            "maxMcpSessions": 5000,
            **gateway,
        },
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def start_gateway(
    folder: Path,
    model_url: str,
    *,
    args: tuple[str, ...] = (),
    llm: dict[str, Any] | None = None,
    servers: dict[str, Any] | None = None,
    approvals: dict[str, Any] | None = None,
    **gateway: Any,
) -> Gateway:
    config = write_config(folder, model_url, llm=llm, servers=servers, approvals=approvals, **gateway)
    port = free_port()
    log = folder / "gateway.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port), *args],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            cwd=str(ROOT),
            env={**os.environ, "MCP_AGENT_STATE_DIR": str(folder / "state")},
        )
    running = Gateway(f"http://127.0.0.1:{port}", port, process, log, config)
    deadline = time.monotonic() + 30
    with httpx.Client(base_url=running.url, timeout=2) as http:
        while True:
            try:
                if http.get("/api/v1/health").status_code == 200:
                    return running
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                stop_gateway(running)
                raise AssertionError("the gateway did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.05)


def stop_gateway(gateway: Gateway) -> None:
    if gateway.process.poll() is None:
        gateway.process.send_signal(signal.SIGTERM)
        try:
            gateway.process.wait(15)
        except subprocess.TimeoutExpired:
            gateway.process.kill()
            gateway.process.wait()


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        server.handler = rule_reply
        yield server


@pytest.fixture(scope="module")
def gateway(model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    running = start_gateway(tmp_path_factory.mktemp("gateway"), model.base_url)
    try:
        yield running
    finally:
        stop_gateway(running)
    assert "Traceback" not in running.log.read_text(), running.log.read_text()[-5000:]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = render()
    if lines:
        terminalreporter.section("adversarial inputs: class -> tried -> outcomes")
        for line in lines:
            terminalreporter.write_line(line)
