"""Chromium for the browser tier (``make test-browser``): Playwright for Python driving the
Debian ``chromium`` (or Playwright's own build). Without it the tests say how to install it and
skip; with ``CI=true`` they fail instead."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

INSTALL = (
    "the browser tests need Playwright for Python and Chromium: "
    "`.venv/bin/pip install playwright` and `apt-get install -y chromium` "
    "(or `.venv/bin/playwright install chromium`)"
)


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}: {INSTALL}")
    pytest.skip(f"{why}: {INSTALL}")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        except Exception as exc:  # no Playwright build either
            _missing(f"Chromium could not be started ({str(exc).splitlines()[0]})")
        yield launched
        launched.close()


ROOT = Path(__file__).resolve().parents[2]


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
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
