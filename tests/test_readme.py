"""README.md stays true: its two commands exist, and its Python client example runs as written
against a real gateway (the fake model server stands in for Ollama)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.fakes.model_server import running_model_server
from tests.gateway.conftest import free_port
from tests.gateway.e2e import rule_reply

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_two_commands_are_make_targets():
    section = README.split("## Two commands", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^(make \w+)", section, flags=re.M)
    assert commands == ["make run", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^run:", makefile, flags=re.M) and re.search(r"^test:", makefile, flags=re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_python_client_example_runs(tmp_path):
    snippet = re.search(r"```python\n(import anyio\nfrom mcp import Client.*?)```", README, re.S)
    assert snippet, "the README shows how to call agent_query from Python"
    port = free_port()
    code = snippet.group(1).replace("127.0.0.1:8765", f"127.0.0.1:{port}")
    with running_model_server() as server:
        server.handler = rule_reply
        config = tmp_path / "agent.json"
        config.write_text(
            json.dumps(
                {
                    "llm": {"endpoint": server.base_url, "model": "rule-model", "stream": False},
                    "mcpServers": {"echo": {"command": sys.executable, "args": [str(ROOT / "tests/servers/echo.py")]}},
                    "gateway": {"port": port},
                }
            )
        )
        gateway = subprocess.Popen(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config)],
            cwd=ROOT,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/api/v1/health").json()["status"] == "ok":
                        break
                except (httpx.HTTPError, ValueError):
                    pass
                time.sleep(0.2)
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        finally:
            gateway.terminate()
            gateway.wait(timeout=20)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["answer: Is anything listening on port 8765?", "success answer: How full is the root disk?"]
    assert lines[2] == "" and lines[3].startswith("[session_id: ")  # the text's last line: the conversation id
