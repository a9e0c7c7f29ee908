"""Benchmark of the gateway; prints one JSON object to stdout.

``agent_query`` latency (p50/p99 per call) and throughput (calls/s) at 1, 16 and 64 concurrent
clients, over Streamable HTTP and over SSE, next to a bare ``tools/call`` of the inner echo tool
through the same transport (``exposeTools``) as the floor.

Set-up: the gateway runs in its own process (uvicorn on 127.0.0.1, ``--serve`` mode of this
script) with a zero-latency in-process model (one ``echo__echo`` call, then the answer) and the
stdio echo server of ``tests/servers/echo.py`` behind the real ToolHub; so one ``agent_query``
is two model turns, one stdio tool call and the run's bookkeeping. The clients are the SDK's
(``ClientSession`` with the 2025 handshake) in this process; each client connects once, then
makes its calls one after another. Both processes share this machine's cores, so the figures
include the clients' own cost.

Run: ``.venv/bin/python bench/bench_gateway.py [--calls N]`` (N calls per level and kind, default 192).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gateway import EchoOnceModel, GatewayProcess, free_port  # noqa: E402

LEVELS = (1, 16, 64)
TRANSPORTS = ("http", "sse")


# ------------------------------------------------------------------------------------ the server side


def serve(port: int) -> None:
    """The gateway process: real ToolHub with the stdio echo server, the zero-latency model."""
    import logging

    from mcp_agent.config import parse_config
    from mcp_agent.gateway.serve import serve as serve_gateway
    from mcp_agent.loop.agent import Agent
    from mcp_agent.tools.hub import open_tool_hub

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "zero"},
            "limits": {"maxRounds": 4},
            "mcpServers": {
                "echo": {"command": sys.executable, "args": [str(ROOT / "tests" / "servers" / "echo.py")]}
            },
            "gateway": {"exposeTools": True, "maxConcurrentQueries": 0},
        },
        environ={},
    )

    @asynccontextmanager
    async def factory(config: Any) -> AsyncIterator[Agent]:
        async with open_tool_hub(config.servers()) as hub:
            yield Agent(EchoOnceModel(), hub, config)

    anyio.run(partial(serve_gateway, config, host="127.0.0.1", port=port, factory=factory))


# ------------------------------------------------------------------------------------ the client side


@asynccontextmanager
async def session(url: str, transport: str) -> AsyncIterator[ClientSession]:
    if transport == "sse":
        async with sse_client(f"{url}/sse", timeout=60) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s
    else:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            yield s


async def level(url: str, transport: str, clients: int, calls: int, kind: str) -> dict[str, Any]:
    per_client = max(1, calls // clients)
    samples: list[float] = []
    failures = 0

    async def one(index: int, ready: anyio.Event, go: anyio.Event, connected: list[int]) -> None:
        nonlocal failures
        async with session(url, transport) as s:
            connected.append(index)
            if len(connected) == clients:
                ready.set()
            await go.wait()
            for n in range(per_client):
                start = time.perf_counter()
                if kind == "agent_query":
                    result = await s.call_tool("agent_query", {"query": f"c{index}-{n}"})
                    ok = result.structured_content["answer"] == f"echo: c{index}-{n}"  # type: ignore[index]
                else:
                    result = await s.call_tool("echo__echo", {"text": f"c{index}-{n}"})
                    ok = result.content[0].text == f"c{index}-{n}"  # type: ignore[union-attr]
                samples.append(time.perf_counter() - start)
                failures += not ok

    ready, go, connected = anyio.Event(), anyio.Event(), []
    async with anyio.create_task_group() as tg:
        for index in range(clients):
            tg.start_soon(one, index, ready, go, connected)
        await ready.wait()
        started = time.perf_counter()
        go.set()
    wall = time.perf_counter() - started
    ordered = sorted(samples)
    return {
        "clients": clients,
        "calls": len(samples),
        "failures": failures,
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
        "throughput_per_s": round(len(samples) / wall, 1),
    }


async def measure(url: str, calls: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for transport in TRANSPORTS:
        results[transport] = {}
        for clients in LEVELS:
            row = {}
            for kind in ("agent_query", "tools_call"):
                await level(url, transport, clients, min(calls, 32), kind)  # warm-up
                row[kind] = await level(url, transport, clients, calls, kind)
            results[transport][str(clients)] = row
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=192, help="calls per level and kind")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    port = free_port()
    gateway = GatewayProcess([__file__, "--serve", str(port)], port=port)
    try:
        gateway.wait_ready()
        results = anyio.run(measure, gateway.url, args.calls)
    finally:
        exit_code = gateway.stop()
    print(
        json.dumps(
            {
                "benchmark": "gateway",
                "calls_per_level": args.calls,
                "model": "zero-latency in-process (1 tool call + answer)",
                "tool": "stdio echo (tests/servers/echo.py) via ToolHub",
                "client": "mcp ClientSession (2025-11-25 handshake), one session per client",
                "cpu_count": os.cpu_count(),
                "results": results,
                "gateway_exit_code_after_sigterm": exit_code,
            },
            indent=2,
        )
    )
    failed = sum(
        kind["failures"] for level in results.values() for kinds in level.values() for kind in kinds.values()
    )
    if failed:  # figures of calls that went wrong measure nothing: say so loudly
        sys.exit(f"bench_gateway: {failed} calls did not get the expected answer")


if __name__ == "__main__":
    main()
