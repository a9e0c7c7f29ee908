"""A real gateway process for the browser tier: ``mcp-agent serve`` with the echo server behind
an approval rule (``echo__*``), a fake model on 127.0.0.1 answering by ``handler`` (the
gateway e2e rules by default), a SQLite state that ``seed`` run records are written into before
it starts, and a bearer token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

from mcp_agent.state import open_state
from mcp_agent.state.records import RunRecord
from tests.fakes.model_server import running_model_server
from tests.gateway.conftest import free_port
from tests.gateway.e2e import SERVERS, rule_reply

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "dashboard-test-token-0123456789"


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180  # a "does not hang" bound: a loaded machine starts slowly
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the gateway exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/api/v1/health", timeout=5).json().get("status") in ("ok", "degraded"):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the gateway did not become ready: {log.read_text()[-2000:]}")


async def _seed(url: str, records: Sequence[RunRecord]) -> None:
    state = await open_state(url)
    try:
        for record in records:
            await state.runs.begin(record)
            await state.runs.end(record)
    finally:
        await state.aclose()


@contextmanager
def gateway_process(config: Path, folder: Path, port: int) -> Iterator[str]:
    """``mcp-agent serve`` over ``config`` on ``port`` (state folder and log in ``folder``),
    yielding its URL once healthy; terminated (killed after 30 s) on exit."""
    log = folder / "gateway.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_AGENT_STATE_DIR": str(folder)}
    with open(log, "ab") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=str(ROOT),
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def serving(
    folder: Path,
    *,
    handler: Callable[[Any], Any] = rule_reply,
    limits: dict[str, Any] | None = None,
    seed: Sequence[RunRecord] = (),
) -> Iterator[str]:
    """The gateway's base URL while it runs (its files in ``folder``)."""
    state_url = f"sqlite:///{folder / 'state.db'}"
    if seed:  # in a thread of its own: Playwright's sync API keeps an event loop on this one
        with ThreadPoolExecutor(1) as pool:
            pool.submit(anyio.run, _seed, state_url, seed).result()
    with running_model_server() as model:
        model.handler = handler
        config = {
            "llm": {
                "endpoint": model.base_url,
                "model": "rule-model",
                "provider": "openai",
                "stream": False,
                "maxRetries": 0,
            },
            "mcpServers": {"echo": {"command": sys.executable, "args": [str(SERVERS / "echo.py")]}},
            "approvals": {"require": ["echo__*"], "timeoutSeconds": 600},
            "limits": {"timeoutSeconds": 600, "maxRounds": 4, **(limits or {})},
            "gateway": {"authToken": TOKEN},
            "state": {"url": state_url},
        }
        path = folder / "agent.json"
        path.write_text(json.dumps(config))
        with gateway_process(path, folder, free_port()) as url:
            yield url
