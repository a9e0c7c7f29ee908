"""The processes of the conformance tier: free ports, starting, waiting until ready, stopping.

Every process gets a free 127.0.0.1 port, its output goes to a log file in its folder, and it is
stopped by its pid (SIGTERM, then SIGKILL after 15 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start(name: str, argv: list[str], folder: Path, env: dict[str, str] | None = None) -> Process:
    log_path = folder / f"{name}.log"
    with log_path.open("wb") as log_file:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=str(ROOT),
            env={**os.environ, **(env or {})},
        )
    return Process(name, popen, log_path)


def _get(url: str) -> tuple[int, bytes] | None:
    """The status and body of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read()
    except (urllib.error.URLError, OSError):
        return None


def wait_until(process: Process, ready: Any) -> None:
    """Poll ``ready()`` until it is true, or fail naming the process's log (it ended, or 60 s)."""
    deadline = time.monotonic() + READY_SECONDS
    while not ready():
        if process.popen.poll() is not None or time.monotonic() > deadline:
            process.stop()
            raise RuntimeError(f"{process.name} did not get ready:\n{process.tail()}")
        time.sleep(0.05)


def servers_settled(port: int, count: int) -> bool:
    """Whether the gateway serves and each of its ``count`` tool servers is up or has failed: the
    gateway serves before its servers are up (fast start), and a client that lists the tools at
    once would see only ``agent_query``."""
    answer = _get(f"http://127.0.0.1:{port}/api/v1/health")
    if answer is None or answer[0] != 200:
        return False
    servers = json.loads(answer[1]).get("servers", [])
    return len(servers) >= count and all(server.get("status") in {"up", "failed"} for server in servers)


@contextlib.contextmanager
def fixture_http(folder: Path, fixture: Path) -> Iterator[str]:
    """The fixture server over Streamable HTTP; yields its MCP URL."""
    port = free_port()
    process = start("fixture", [sys.executable, str(fixture), "http", str(port)], folder)
    try:
        wait_until(process, lambda: _get(f"http://127.0.0.1:{port}/mcp") is not None)
        yield f"http://localhost:{port}/mcp"
    finally:
        process.stop()


@contextlib.contextmanager
def gateway(folder: Path, servers: dict[str, Any], *, expose: bool) -> Iterator[str]:
    """``mcp-agent serve`` over ``servers`` (a dead model endpoint: no scenario asks the model),
    once every server has settled; yields its MCP URL."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "conformance", "maxRetries": 0},
        "limits": {"maxRounds": 2, "toolTimeoutSeconds": 30, "timeoutSeconds": 60},
        "mcpServers": servers,
        "gateway": {"description": "Conformance target.", "exposeTools": expose},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    port = free_port()
    process = start(
        "gateway",
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(path), "--port", str(port)],
        folder,
        env={"MCP_AGENT_STATE_DIR": str(folder / "state")},
    )
    try:
        wait_until(process, lambda: servers_settled(port, len(servers)))
        yield f"http://localhost:{port}/mcp"
    finally:
        process.stop()
