"""Benchmark of the tool-server runtime; prints one JSON object to stdout.

- ``startup``: seconds from ``open_tool_hub`` to every tool listed, for 1 and for 8 copies of a
  fixture server (median of a few rounds). ``ratio_8_to_1`` near 1 means the start-up is
  concurrent; near 8 would mean one after another. Three kinds of server: ``sdk`` (the SDK's
  MCPServer: ~0.8 s of CPU to import ``mcp``, so 8 of them are bound by the machine's cores and
  the floor is about 8 / cpus), ``raw`` (a hand-written JSON-RPC server, ~35 ms, also CPU-bound)
  and ``raw_slow_start`` (the same, waiting 0.5 s before it serves, as a server that loads
  something first: the case where concurrency shows plainly).
- ``call``: median and p90 of one ``ToolHub.call_tool`` to the stdio ``echo`` tool, next to the
  SDK's bare ``ClientSession.call_tool`` over the SDK's ``stdio_client`` on the same server; the
  difference is our overhead (repair filter, our transport, routing, result conversion).

Run: ``.venv/bin/python bench/bench_tools.py [--calls N] [--rounds N]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from mcp_agent.config import RemoteServerConfig, StdioServerConfig
from mcp_agent.tools.hub import open_tool_hub

SERVERS = Path(__file__).resolve().parent.parent / "tests" / "servers"
KINDS: dict[str, tuple[str, dict[str, str]]] = {
    "sdk": ("echo.py", {}),
    "raw": ("paged.py", {}),
    "raw_slow_start": ("paged.py", {"RAW_START_DELAY": "0.5"}),
}


def _config(script: str, env: dict[str, str] | None = None) -> StdioServerConfig:
    return StdioServerConfig(command=sys.executable, args=[str(SERVERS / script)], env=env or {})


async def _startup_seconds(script: str, env: dict[str, str], count: int) -> float:
    servers: dict[str, StdioServerConfig | RemoteServerConfig] = {
        f"s{i}": _config(script, env) for i in range(count)
    }
    start = time.perf_counter()
    async with open_tool_hub(servers) as hub:
        elapsed = time.perf_counter() - start
        failed = [s.name for s in hub.status() if s.status != "up"]
        if failed:
            raise RuntimeError(f"servers did not start: {failed}")
    return elapsed


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_us": round(statistics.median(ordered) * 1e6, 1),
        "p90_us": round(ordered[int(len(ordered) * 0.9) - 1] * 1e6, 1),
    }


async def _hub_calls(calls: int) -> list[float]:
    samples = []
    async with open_tool_hub({"echo": _config("echo.py")}) as hub:
        for _ in range(20):
            await hub.call_tool("echo__echo", {"text": "warm"})
        for i in range(calls):
            start = time.perf_counter()
            result = await hub.call_tool("echo__echo", {"text": f"hello {i}"})
            samples.append(time.perf_counter() - start)
            assert not result.is_error
    return samples


async def _sdk_calls(calls: int) -> list[float]:
    samples = []
    params = StdioServerParameters(command=sys.executable, args=[str(SERVERS / "echo.py")])
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            for _ in range(20):
                await session.call_tool("echo", {"text": "warm"})
            for i in range(calls):
                start = time.perf_counter()
                result = await session.call_tool("echo", {"text": f"hello {i}"})
                samples.append(time.perf_counter() - start)
                assert not result.is_error
    return samples


async def main(calls: int, rounds: int) -> dict[str, Any]:
    startup: dict[str, Any] = {}
    for kind, (script, env) in KINDS.items():
        one = statistics.median([await _startup_seconds(script, env, 1) for _ in range(rounds)])
        eight = statistics.median([await _startup_seconds(script, env, 8) for _ in range(rounds)])
        startup[kind] = {
            "one_server_s": round(one, 3),
            "eight_servers_s": round(eight, 3),
            "ratio_8_to_1": round(eight / one, 2),
        }
    hub = _summary(await _hub_calls(calls))
    sdk = _summary(await _sdk_calls(calls))
    return {
        "benchmark": "tools",
        "cpus": os.cpu_count(),
        "startup": startup,
        "call": {
            "calls": calls,
            "tool_hub": hub,
            "sdk_client_session": sdk,
            "overhead_median_us": round(hub["median_us"] - sdk["median_us"], 1),
            "overhead_p90_us": round(hub["p90_us"] - sdk["p90_us"], 1),
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(anyio.run(main, options.calls, options.rounds)))
