"""Benchmark of a ``tools/call`` passed through the gateway (``exposeTools``) against the same call
made directly; prints one JSON object to stdout.

Set-up, all on 127.0.0.1 and all real processes: the echo server of ``tests/servers/echo.py``
serves Streamable HTTP on a port of its own; ``mcp-agent serve`` runs in front of it with
``exposeTools`` twice over, once as a remote server (``http__echo``) and once as a stdio child
(``pipe__echo``). One client (the SDK's, in this process) per path and protocol era makes the same
``echo`` call directly and through the gateway, alternating in blocks, so that both sides see the
same moments of a noisy machine:

- ``direct``: client → echo server (HTTP);
- ``via_http``: client → gateway → echo server (HTTP upstream);
- ``via_stdio``: client → gateway → echo child (stdio upstream);
- ``floor_httpx`` and ``floor_h11`` (the 2026-07-28 era only): client → a bare relay → echo server
  (``bench/_relay.py``: uvicorn and a kept-alive client, ``httpx2`` or one h11 connection, and no
  gateway logic at all): what any Python hop costs here, measured in the same run, so that the
  gateway's ratio can be read against the least a relay can do.

Eras: ``legacy`` is ``ClientSession`` with the 2025-11-25 handshake; ``modern`` is ``mcp.Client``
in its default ``auto`` mode (2026-07-28 against both the echo server and the gateway).

Reported per era: p50 and p90 in ms of each path, ``ratio`` = through the gateway (or the
relay) / direct at p50 (issue 22's target: ≤ 1.5 for ``via_http``), and the gateway's (or the
relay's) process CPU time per call (user + system, from ``/proc``): far less noisy than wall time
on a shared machine, and the figure to compare between two versions of the gateway.

Run: ``.venv/bin/python bench/bench_passthrough.py [--calls N] [--no-fast-calls]`` (N calls per
path and era, default 300; ``--no-fast-calls`` turns ``gateway.fastCalls`` off, so every call
takes the SDK's path: the same build with and without the lean path of ``fast_call.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gateway import GatewayProcess, free_port  # noqa: E402

ECHO = ROOT / "tests" / "servers" / "echo.py"
RELAY = ROOT / "bench" / "_relay.py"
BLOCK = 20
"""Calls per path before the next path takes its turn."""

Call = Callable[[str], Awaitable[str]]


def start_echo(port: int) -> subprocess.Popen[bytes]:
    return _started(
        [sys.executable, str(ECHO), "http", str(port)], f"http://127.0.0.1:{port}/mcp", "the echo server"
    )


def start_relay(mode: str, port: int, upstream: str) -> subprocess.Popen[bytes]:
    """The bare relay of ``bench/_relay.py`` on ``port``, once it answers."""
    return _started(
        [sys.executable, str(RELAY), mode, str(port), upstream], f"http://127.0.0.1:{port}/", "the relay"
    )


def _started(argv: list[str], probe: str, what: str) -> subprocess.Popen[bytes]:
    """``argv`` started, once ``probe`` answers (at most 60 s)."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(probe, timeout=1)
            return process
        except httpx.TransportError:
            if process.poll() is not None:
                break
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"bench_passthrough: {what} did not start")


def gateway_config(folder: Path, echo_port: int, *, fast_calls: bool = True) -> Path:
    config = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "none"},
        "mcpServers": {
            "http": {"url": f"http://127.0.0.1:{echo_port}/mcp"},
            "pipe": {"command": sys.executable, "args": [str(ECHO)]},
        },
        "gateway": {"exposeTools": True, "maxConcurrentQueries": 0, "fastCalls": fast_calls},
        "state": {"url": f"sqlite:///{folder / 'state.db'}"},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


def wait_servers_up(url: str, timeout: float = 60) -> None:
    """Wait until both tool servers behind the gateway are up (the model server never is)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = httpx.get(f"{url}/api/v1/health", timeout=2).json()
        if health.get("servers_up") == 2:
            return
        time.sleep(0.05)
    raise SystemExit(f"bench_passthrough: the tool servers did not come up: {health.get('servers')}")


@asynccontextmanager
async def legacy_caller(url: str, tool: str) -> AsyncIterator[Call]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()

        async def call(text: str) -> str:
            result = await session.call_tool(tool, {"text": text})
            return result.content[0].text  # type: ignore[union-attr]

        yield call


@asynccontextmanager
async def modern_caller(url: str, tool: str) -> AsyncIterator[Call]:
    async with Client(url) as client:

        async def call(text: str) -> str:
            result = await client.call_tool(tool, {"text": text})
            return result.content[0].text  # type: ignore[union-attr]

        yield call


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(ordered[len(ordered) // 2] * 1000, 2),
        "p90_ms": round(ordered[int(len(ordered) * 0.9)] * 1000, 2),
    }


async def measure(
    echo_url: str, gateway_url: str, gateway_pid: int, calls: int, floors: dict[str, tuple[str, int]]
) -> dict[str, Any]:
    """``floors``: the bare relays by path name, as (URL, pid): measured in the modern era."""
    results: dict[str, Any] = {}
    for era, caller in (("legacy", legacy_caller), ("modern", modern_caller)):
        paths = {
            "direct": (echo_url, "echo"),
            "via_http": (gateway_url, "http__echo"),
            "via_stdio": (gateway_url, "pipe__echo"),
        }
        pids = dict.fromkeys(paths, gateway_pid)
        if era == "modern":
            for name, (url, pid) in floors.items():
                paths[name], pids[name] = (url, "echo"), pid
        async with AsyncExitStack() as stack:
            callers = {name: await stack.enter_async_context(caller(*where)) for name, where in paths.items()}
            samples: dict[str, list[float]] = {name: [] for name in paths}
            cpu: dict[str, float] = dict.fromkeys(paths, 0.0)
            failures = 0
            for warm in range(BLOCK):  # connections, caches, the JIT of nothing: warm all paths first
                for call in callers.values():
                    await call(f"warm{warm}")
            for block in range(max(1, calls // BLOCK)):
                for name, call in callers.items():
                    cpu_before = cpu_seconds(pids[name])
                    for n in range(BLOCK):
                        text = f"{name}-{block}-{n}"
                        start = time.perf_counter()
                        answer = await call(text)
                        samples[name].append(time.perf_counter() - start)
                        failures += answer != text
                    cpu[name] += cpu_seconds(pids[name]) - cpu_before
        row = {name: summary(values) for name, values in samples.items()}
        direct = row["direct"]["p50_ms"]
        for name in paths:
            if name == "direct":
                continue
            what = "gateway" if name.startswith("via_") else "relay"
            row[name][f"{what}_cpu_ms_per_call"] = round(cpu[name] * 1000 / len(samples[name]), 2)
            row[name]["ratio"] = round(row[name]["p50_ms"] / direct, 2)
        row["failures"] = failures
        results[era] = row
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per path and era")
    parser.add_argument(
        "--no-fast-calls", action="store_true", help="gateway.fastCalls off: every call on the SDK's path"
    )
    args = parser.parse_args()
    echo_port, gateway_port = free_port(), free_port()
    echo = start_echo(echo_port)
    echo_url = f"http://127.0.0.1:{echo_port}/mcp"
    relays: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    try:
        for mode in ("httpx", "h11"):
            port = free_port()
            relays[f"floor_{mode}"] = (port, start_relay(mode, port, echo_url))
        with tempfile.TemporaryDirectory() as folder:
            config = gateway_config(Path(folder), echo_port, fast_calls=not args.no_fast_calls)
            gateway = GatewayProcess(
                ["-m", "mcp_agent", "serve", "--config", str(config), "--port", str(gateway_port)],
                port=gateway_port,
                quiet=True,
            )
            try:
                gateway.wait_ready()
                wait_servers_up(gateway.url)
                floors = {
                    name: (f"http://127.0.0.1:{port}/mcp", process.pid)
                    for name, (port, process) in relays.items()
                }
                results = anyio.run(
                    measure, echo_url, f"{gateway.url}/mcp", gateway.process.pid, args.calls, floors
                )
            finally:
                gateway.stop()
    finally:
        for process in [*(process for _, process in relays.values()), echo]:
            process.terminate()
            process.wait(timeout=10)
    print(
        json.dumps(
            {
                "benchmark": "passthrough",
                "calls_per_path": args.calls,
                "fast_calls": not args.no_fast_calls,
                "tool": "echo (tests/servers/echo.py): direct over HTTP, and through mcp-agent serve "
                "with exposeTools to the same server over HTTP and as a stdio child",
                "cpu_count": os.cpu_count(),
                "results": results,
            },
            indent=2,
        )
    )
    failed = sum(row["failures"] for row in results.values())
    if failed:
        sys.exit(f"bench_passthrough: {failed} calls did not get the expected answer")


if __name__ == "__main__":
    main()
