"""Benchmark of scale-out: one gateway vs two sharing Redis behind HAProxy; prints one JSON object.

16 clients at once (``--clients``), each with its own MCP connection (``--stateless`` Streamable
HTTP through HAProxy, round-robin) and its own conversations of ``--turns`` calls, against one
gateway and against two gateways, both sharing one ``redis-server`` on loopback: errors,
queries/s, latency, and the CPU each process spent per query (the gateways, Redis, HAProxy, and
this process: the clients). ``cores_busy`` is all that CPU over the wall time: on a machine of N
cores, a figure near N says the cores, not a lock or a Redis round trip, bound the throughput.
``machine_cores_busy`` counts every process of the machine (other work on it shows there).

Set-up: each gateway runs in its own process (``--serve`` mode of this script: the real app under
uvicorn, a zero-latency in-process model that calls one in-memory ``echo`` tool and then answers,
the state in Redis), so a query is two model turns, one tool call, the conversation loaded and
saved, the run recorded and its events shared with the other gateway. The clients are the MCP
SDK's, in this process. Debian's ``redis-server`` and ``haproxy`` are needed (``sudo apt-get
install -y redis-server haproxy``); each runs on a free loopback port with its files in a
temporary folder. What a store costs one query is ``bench/bench_state.py --redis``.

Run: ``.venv/bin/python bench/bench_scale.py [--clients 16] [--calls 40] [--turns 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gateway import EchoOnceModel, GatewayProcess, free_port  # noqa: E402
from tests.scale.infra import INSTALL, HAProxy, RedisServer  # noqa: E402

# ------------------------------------------------------------------------------------ the server side


class Tools:
    """An in-memory ``echo`` tool with the ToolHub's ``status`` (health asks it)."""

    def __init__(self) -> None:
        from mcp_agent.tools.memory import MemoryToolSource

        async def echo(text: str) -> str:
            return text

        self.source = MemoryToolSource()
        schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        self.source.add("echo", echo, description="Echo the text.", parameters=schema, server="mem")

    def list_tools(self) -> Any:
        return self.source.list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any], *, timeout: float | None = None) -> Any:
        return await self.source.call_tool(name, arguments, timeout=timeout)

    def status(self) -> list[dict[str, Any]]:
        return [{"name": "mem", "status": "up", "error": None, "tool_count": 1}]


def serve(port: int, state_url: str) -> None:
    """One gateway process: the real app, the zero-latency model, the state at ``state_url``."""
    import logging

    from mcp_agent.config import parse_config
    from mcp_agent.gateway.app import create_app
    from mcp_agent.gateway.serve import bind_socket, serve_app
    from mcp_agent.loop.agent import Agent
    from mcp_agent.state import open_agent_state

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "zero"},
            "limits": {"maxRounds": 4},
            "state": {"url": state_url},
            "gateway": {"maxConcurrentQueries": 64, "maxQueuedQueries": 256},
        },
        environ={},
    )

    async def main() -> None:
        state = await open_agent_state(config, default=None)
        try:

            @asynccontextmanager
            async def factory(config: Any) -> AsyncIterator[Any]:
                yield Agent(EchoOnceModel("echo"), Tools(), config, state=state)  # type: ignore[arg-type]

            app = create_app(config, factory=factory, bind_host="127.0.0.1", stateless=True, state=state)
            await serve_app(app, bind_socket("127.0.0.1", port))
        finally:
            await state.aclose()

    anyio.run(main)


def start_gateway(name: str, state_url: str) -> GatewayProcess:
    """A ``--serve`` process of this script, started, not waited for (HAProxy reads its ``name``
    and ``port``)."""
    port = free_port()
    args = [__file__, "--serve", str(port), "--state-url", state_url]
    return GatewayProcess(args, port=port, name=name)


# ------------------------------------------------------------------------------------ the client side


@asynccontextmanager
async def mcp(url: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def conversation(session: ClientSession, tag: str, calls: int, samples: list[float]) -> int:
    """``calls`` agent_query calls in one conversation; the number that went wrong."""
    failures = 0
    session_id: str | None = None
    for n in range(calls):
        arguments: dict[str, Any] = {"query": f"{tag}-{n}"}
        if session_id is not None:
            arguments["session_id"] = session_id
        start = time.perf_counter()
        try:
            result = await session.call_tool("agent_query", arguments)
        except Exception:
            failures += 1
            continue
        samples.append(time.perf_counter() - start)
        structured = result.structured_content or {}
        if result.is_error or structured.get("answer") != f"echo: {tag}-{n}":
            failures += 1
        session_id = structured.get("session_id") or session_id
    return failures


def summary(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


async def many_clients(url: str, clients: int, calls: int, turns: int) -> dict[str, Any]:
    samples: list[float] = []
    failures = 0
    ready, go = anyio.Event(), anyio.Event()
    connected: list[int] = []

    async def client(index: int) -> None:
        nonlocal failures
        async with mcp(url) as session:
            await conversation(session, f"w{index}", 3, [])  # warm: the connection and the paths
            connected.append(index)
            if len(connected) == clients:
                ready.set()
            await go.wait()
            for number in range(max(calls // turns, 1)):
                failures += await conversation(session, f"c{index}-{number}", turns, samples)

    async with anyio.create_task_group() as tg:
        for index in range(clients):
            tg.start_soon(client, index)
        await ready.wait()
        started = time.perf_counter()
        cpu_before = cpu_of_all()
        go.set()
    wall = time.perf_counter() - started
    cpu_after = cpu_of_all()
    return {"wall_s": wall, "samples": samples, "failures": failures, "cpu": (cpu_before, cpu_after)}


# ------------------------------------------------------------------------------------ CPU accounting

WATCHED: dict[str, list[int]] = {}
"""Process ids whose CPU time is counted, by role (``gateway``, ``redis``, ``haproxy``)."""


def cpu_seconds(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def cpu_of_all() -> dict[str, float]:
    found = {role: sum(cpu_seconds(pid) for pid in pids) for role, pids in WATCHED.items()}
    found["clients"] = cpu_seconds(os.getpid())
    machine = psutil.cpu_times()
    found["machine"] = machine.user + machine.system + getattr(machine, "nice", 0.0)
    return found


def scale_row(name: str, measured: dict[str, Any]) -> dict[str, Any]:
    before, after = measured["cpu"]
    queries = len(measured["samples"])
    cpu = {role: after[role] - before.get(role, 0.0) for role in after}
    machine = cpu.pop("machine")
    total = sum(cpu.values())
    return {
        "setup": name,
        "queries": queries,
        "errors": measured["failures"],
        "wall_s": round(measured["wall_s"], 2),
        "queries_per_s": round(queries / measured["wall_s"], 1),
        **summary(measured["samples"]),
        "cpu_ms_per_query": {role: round(seconds * 1000 / queries, 3) for role, seconds in cpu.items()},
        "cpu_ms_per_query_total": round(total * 1000 / queries, 3),
        "cores_busy": round(total / measured["wall_s"], 2),
        "machine_cores_busy": round(machine / measured["wall_s"], 2),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="clients at once")
    parser.add_argument("--calls", type=int, default=40, help="calls per client")
    parser.add_argument("--turns", type=int, default=10, help="calls per conversation")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--state-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.state_url)
        return

    missing = [
        b for b in ("redis-server", "haproxy") if not (shutil.which(b) or os.path.exists(f"/usr/sbin/{b}"))
    ]
    if missing:
        print(json.dumps({"benchmark": "scale", "skipped": f"{', '.join(missing)} missing: {INSTALL}"}))
        return
    out: dict[str, Any] = {
        "benchmark": "scale",
        "cpu_count": os.cpu_count(),
        "model": "zero-latency in-process (1 in-memory echo call + answer)",
        "client": "mcp ClientSession over Streamable HTTP (--stateless gateways), one conversation per client",
    }
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp, ExitStack() as stack:
        folder = Path(tmp)
        redis = RedisServer(folder, persist=False).start()
        stack.callback(redis.stop)
        out["versions"] = {
            "redis-server": subprocess.run(
                [redis.binary, "--version"], capture_output=True, text=True
            ).stdout.split()[2],
        }

        # one gateway vs two, both sharing Redis, behind HAProxy
        rows = []
        for replicas in (1, 2):
            redis.command("FLUSHALL")
            gateways = [start_gateway(name, redis.url) for name in "ab"[:replicas]]
            balancer = HAProxy(folder / f"haproxy-{replicas}", gateways)  # type: ignore[arg-type]
            try:
                for gateway in gateways:
                    gateway.wait_ready()
                balancer.start()
                WATCHED.clear()
                WATCHED["gateways"] = [g.process.pid for g in gateways]
                WATCHED["redis"] = [redis.process.pid] if redis.process is not None else []
                WATCHED["haproxy"] = [balancer.process.pid] if balancer.process is not None else []
                measured = anyio.run(
                    partial(many_clients, balancer.url, args.clients, args.calls, args.turns)
                )
                rows.append(
                    scale_row(f"{replicas} gateway{'s' if replicas > 1 else ''} + redis + haproxy", measured)
                )
            finally:
                balancer.stop()
                for gateway in gateways:
                    gateway.stop()
        out.update(
            clients=args.clients, calls_per_client=args.calls, turns_per_conversation=args.turns, setups=rows
        )
    print(json.dumps(out, indent=2))
    errors = sum(row["errors"] for row in rows)
    if errors:
        sys.exit(f"bench_scale: {errors} calls did not get the expected answer")


if __name__ == "__main__":
    main()
