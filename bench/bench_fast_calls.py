"""The lean path of a 2026-07-28 ``tools/call`` (``gateway/mcp/fast_call.py``) on and off, in one
run; prints one JSON object to stdout.

``bench_passthrough.py`` measures one gateway against the direct call; on a shared machine two of
its runs, minutes apart, differ more than the two builds do. This runs two ``mcp-agent serve``
processes at once in front of the same echo server (``tests/servers/echo.py``, over HTTP and as a
stdio child of each), one with ``gateway.fastCalls`` on and one with it off, and alternates the
same calls between them in blocks, so that both see the same moments of the machine. Reported per
era and upstream: p50/p90 in ms and the gateway's CPU ms per call (user + system, ``/proc``), for
``on`` and ``off``. The 2025-era (``legacy``) rows are the control: they never take the lean path.

Run: ``.venv/bin/python bench/bench_fast_calls.py [--calls N]`` (N calls per path, default 400).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gateway import GatewayProcess, free_port  # noqa: E402
from bench.bench_passthrough import (  # noqa: E402
    BLOCK,
    cpu_seconds,
    gateway_config,
    legacy_caller,
    modern_caller,
    start_echo,
    summary,
    wait_servers_up,
)


async def measure(gateways: dict[str, GatewayProcess], calls: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for era, caller in (("legacy", legacy_caller), ("modern", modern_caller)):
        async with AsyncExitStack() as stack:
            paths = {
                (fast, tool): await stack.enter_async_context(caller(f"{gateway.url}/mcp", tool))
                for fast, gateway in gateways.items()
                for tool in ("http__echo", "pipe__echo")
            }
            samples: dict[Any, list[float]] = {path: [] for path in paths}
            cpu: dict[Any, float] = dict.fromkeys(paths, 0.0)
            for warm in range(BLOCK):
                for call in paths.values():
                    await call(f"warm{warm}")
            for block in range(max(1, calls // BLOCK)):
                for (fast, tool), call in paths.items():
                    pid = gateways[fast].process.pid
                    before = cpu_seconds(pid)
                    for n in range(BLOCK):
                        text = f"{fast}-{tool}-{block}-{n}"
                        start = time.perf_counter()
                        if await call(text) != text:
                            raise SystemExit(f"bench_fast_calls: a wrong answer from {fast} {tool}")
                        samples[fast, tool].append(time.perf_counter() - start)
                    cpu[fast, tool] += cpu_seconds(pid) - before
        for (fast, tool), values in samples.items():
            row = summary(values)
            row["gateway_cpu_ms_per_call"] = round(cpu[fast, tool] * 1000 / len(values), 3)
            results.setdefault(era, {}).setdefault("via_http" if tool == "http__echo" else "via_stdio", {})[
                fast
            ] = row
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per gateway, upstream and era")
    args = parser.parse_args()
    echo_port = free_port()
    echo = start_echo(echo_port)
    gateways: dict[str, GatewayProcess] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for fast in ("on", "off"):
                where = Path(folder) / fast
                where.mkdir()
                config = gateway_config(where, echo_port, fast_calls=fast == "on")
                port = free_port()
                gateways[fast] = GatewayProcess(
                    ["-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
                    port=port,
                    quiet=True,
                )
            for gateway in gateways.values():
                gateway.wait_ready()
                wait_servers_up(gateway.url)
            results = anyio.run(measure, gateways, args.calls)
    finally:
        for gateway in gateways.values():
            gateway.stop()
        echo.terminate()
        echo.wait(timeout=10)
    print(
        json.dumps(
            {
                "benchmark": "fast_calls",
                "calls_per_path": args.calls,
                "cpu_count": os.cpu_count(),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
