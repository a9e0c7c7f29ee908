"""Benchmark of the gateway's start with cached tool lists (issue 13); prints one JSON object.

Whole processes, as a launcher sees them:

- ``http``: ``mcp-agent serve`` (exposeTools on) from process start until a ``tools/list``
  over Streamable HTTP lists every tool of the configured servers;
- ``stdio``: ``mcp-agent serve --stdio`` from process start until ``initialize`` is answered.

Each with ``none`` (no tool servers: the floor), ``warm`` (8 Python SDK servers,
``tests/servers/echo.py``, whose lists are cached from an earlier run) and ``cold`` (the same 8
with an empty cache). Reported: median and p95 wall milliseconds over ``--runs`` runs, and
``warm / none`` (the target: at most 1.3).

Run: ``.venv/bin/python bench/bench_start.py [--runs N] [--servers N]``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
ECHO = str(ROOT / "tests" / "servers" / "echo.py")
DEADLINE = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(folder: Path, servers: int, port: int) -> Path:
    config = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "none"},
        "mcpServers": {f"s{i}": {"command": sys.executable, "args": [ECHO]} for i in range(servers)},
        "gateway": {"port": port, "exposeTools": True},
    }
    path = folder / f"agent-{servers}.json"
    path.write_text(json.dumps(config))
    return path


def env_for(state: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "MCP_AGENT_STATE_DIR": str(state)}


def _data(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return dict(json.loads(line[5:]))
    raise ValueError(f"no data in {response.text[:200]!r}")


def list_tools_http(client: httpx.Client, url: str) -> int:
    """One MCP session: initialize, then tools/list; the number of tools (-1: not up yet)."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    try:
        response = client.post(url, json=init, headers=headers)
    except httpx.TransportError:
        return -1
    if response.status_code != 200:
        return -1
    session = response.headers.get("mcp-session-id")
    if session:
        headers["mcp-session-id"] = session
    headers["mcp-protocol-version"] = "2025-11-25"
    client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    listed = _data(
        client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers)
    )
    return len(listed.get("result", {}).get("tools", []))


def run_http(config: Path, state: Path, port: int, expected: int) -> float:
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config)],
        env=env_for(state),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(timeout=10) as client:
            while time.perf_counter() - start < DEADLINE:
                if list_tools_http(client, f"http://127.0.0.1:{port}/mcp") >= expected:
                    return (time.perf_counter() - start) * 1000
                time.sleep(0.01)
        raise TimeoutError("the gateway did not list every tool")
    finally:
        process.terminate()
        process.wait(30)


def run_stdio(config: Path, state: Path) -> float:
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_agent", "serve", "--stdio", "--config", str(config)],
        env=env_for(state),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }
        process.stdin.write((json.dumps(init) + "\n").encode())
        process.stdin.flush()
        for line in process.stdout:
            message = json.loads(line)
            if message.get("id") == 1:
                return (time.perf_counter() - start) * 1000
        raise RuntimeError("stdout ended before initialize was answered")
    finally:
        process.stdin.close()
        process.terminate()
        process.wait(30)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--servers", type=int, default=8)
    args = parser.parse_args()
    results: dict[str, Any] = {"servers": args.servers, "runs": args.runs, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        warm_state = folder / "warm-state"
        for mode in ("http", "stdio"):
            cases: dict[str, list[float]] = {"none": [], "warm": [], "cold": []}
            for run in range(args.runs + 1):  # the first run warms the page cache and the tool cache
                for case in cases:
                    servers = 0 if case == "none" else args.servers
                    port = free_port()
                    config = write_config(folder, servers, port)
                    state = warm_state if case == "warm" else folder / f"cold-{mode}-{case}-{run}"
                    if mode == "http":
                        took = run_http(config, state, port, expected=1 + 2 * servers)
                    else:
                        took = run_stdio(config, state)
                    if run > 0:
                        cases[case].append(took)
            figures = {case: summary(samples) for case, samples in cases.items()}
            floor = figures["none"]["median_ms"]
            figures["warm_over_none"] = round(figures["warm"]["median_ms"] / floor, 2)
            figures["cold_over_none"] = round(figures["cold"]["median_ms"] / floor, 2)
            results[mode] = figures
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
