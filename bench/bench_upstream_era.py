"""Benchmark of the two protocol eras towards a tool server; prints one JSON object to stdout.

The v2 Python fixture server ``tests/servers/echo.py`` (the SDK's MCPServer, which speaks both
eras) is reached over stdio and over Streamable HTTP, once with ``protocol: "legacy"``
(``initialize``) and once with ``protocol: "auto"`` (it settles 2026-07-28), in the same run, the
cases interleaved over ``--rounds`` rounds. For each case:

- ``connect_ms``: from the start of the connection (spawn, for stdio) until its tools are listed
  (the handshake and ``tools/list``; the connection's own ``startup_ms``), median of the rounds;
- ``call_ms``: ``p50``/``p95``/``mean`` of ``--calls`` sequential ``echo`` calls, over every round;
- ``protocol_version``: what the connection spoke.

Two more stdio cases price the probe against servers of the handshake era (``tests/servers/
eras.py``): ``fallback_reject`` (the server answers ``server/discover`` with an error at once)
and ``fallback_ignore`` (it never answers: the probe waits ``discoverTimeoutSeconds``, 2 s by
default), each ``auto`` against ``legacy`` (``connect_ms`` only).

Run: ``.venv/bin/python bench/bench_upstream_era.py [--calls 100] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from mcp_agent.config import RemoteServerConfig, StdioServerConfig
from mcp_agent.tools.server.connection import ServerConnection

SERVERS = Path(__file__).resolve().parent.parent / "tests" / "servers"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    for _ in range(300):  # at most 30 s
        if process.poll() is not None:
            raise RuntimeError(f"the HTTP fixture server exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("the HTTP fixture server did not listen within 30 s")


async def _measure(config: StdioServerConfig | RemoteServerConfig, calls: int) -> dict[str, Any]:
    connection = ServerConnection("bench", config)
    async with anyio.create_task_group() as tg:
        await tg.start(connection.run)
        try:
            if connection.state != "up":
                raise RuntimeError(f"the server did not start: {connection.error}")
            times = []
            for index in range(calls):
                start = time.perf_counter()
                result = await connection.call("echo", {"text": f"call {index}"})
                times.append((time.perf_counter() - start) * 1000)
                if result.is_error:
                    raise RuntimeError(result.text)
            return {
                "connect_ms": connection.startup_ms,
                "calls_ms": times,
                "protocol_version": connection.protocol_version,
            }
        finally:
            connection.stop()


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    calls = sorted(t for run in runs for t in run["calls_ms"])
    out: dict[str, Any] = {
        "protocol_version": runs[-1]["protocol_version"],
        "connect_ms": round(statistics.median(run["connect_ms"] for run in runs), 1),
    }
    if calls:
        out["call_ms"] = {
            "p50": round(calls[len(calls) // 2], 3),
            "p95": round(calls[min(len(calls) - 1, int(len(calls) * 0.95))], 3),
            "mean": round(statistics.fmean(calls), 3),
        }
    return out


async def main(calls: int, rounds: int) -> dict[str, Any]:
    port = _free_port()
    http = subprocess.Popen(
        [sys.executable, str(SERVERS / "echo.py"), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, http)
        url = f"http://127.0.0.1:{port}/mcp"
        echo = [str(SERVERS / "echo.py")]
        cases: dict[str, tuple[StdioServerConfig | RemoteServerConfig, int]] = {}
        for protocol, label in (("legacy", "legacy"), ("auto", "2026")):
            cases[f"stdio_{label}"] = (
                StdioServerConfig(command=sys.executable, args=echo, protocol=protocol),
                calls,
            )
            cases[f"http_{label}"] = (RemoteServerConfig(url=url, protocol=protocol), calls)
        for mode in ("reject", "ignore"):
            args = [str(SERVERS / "eras.py"), "stdio", mode]
            for protocol in ("legacy", "auto"):
                config = StdioServerConfig(command=sys.executable, args=args, protocol=protocol)
                cases[f"fallback_{mode}_{protocol}"] = (config, 0)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
        for round_ in range(rounds):
            order = list(cases) if round_ % 2 == 0 else list(reversed(cases))
            for name in order:
                config, n = cases[name]
                runs[name].append(await _measure(config, n))
    finally:
        http.terminate()
        http.wait(10)
    return {
        "calls": calls,
        "rounds": rounds,
        "server": "tests/servers/echo.py (MCPServer, mcp 2.x: both eras)",
        "cases": {name: _summary(found) for name, found in runs.items()},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(anyio.run(main, options.calls, options.rounds), indent=2))
