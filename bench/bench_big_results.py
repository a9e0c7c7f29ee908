"""Benchmark of big tool results; prints one JSON object to stdout.

A stdio fixture server (``tests/servers/huge.py``) answers one call with a big result while a
ticker task wakes every millisecond; the longest gap between its wake-ups, less the millisecond,
is how long the event loop was blocked (``max_lag_ms``: health checks and every other call wait
that long). Each case runs in a fresh process so that ``peak_rss_mb`` (the process's peak
resident memory growth during the call) is its own. Cases (``bytes`` is the message's size):

- ``idle``: no call, the ticker alone: the noise floor of ``max_lag_ms`` on this machine.
- ``text``: one text part.
- ``parts``: tiny text parts (``{"type": "text", "text": "x"}``), about 310 000 per 8 MiB.
- ``rows``: a short text plus a ``structuredContent`` of tiny rows (``[[], [], ...]``): much
  JSON structure and no content parts.
- ``parts_62mb`` (with ``--huge``): the adversarial report's 62 MB, 2-million-part result.

``text_chars`` is the length of the text the model would read, after the default
``maxResultChars`` cut; ``error`` is set when the call failed (a message over the server's
``maxMessageBytes`` does).

Run: ``.venv/bin/python bench/bench_big_results.py [--mib 8] [--huge] [--max-message-bytes N]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from mcp_agent.config import StdioServerConfig
from mcp_agent.loop.guards import cut_text
from mcp_agent.tools.hub import open_tool_hub

SERVERS = Path(__file__).resolve().parent.parent / "tests" / "servers"
TICK_SECONDS = 0.001
MAX_RESULT_CHARS = 16_000
CASES = ("idle", "text", "parts", "rows")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _ticker(lags: list[float]) -> None:
    last = time.perf_counter()
    while True:
        await anyio.sleep(TICK_SECONDS)
        now = time.perf_counter()
        lags.append(now - last - TICK_SECONDS)
        last = now


async def run_case(case: str, size: int, cap: int | None) -> dict[str, Any]:
    options = {} if cap is None else {"max_message_bytes": cap}
    config = StdioServerConfig(command=sys.executable, args=[str(SERVERS / "huge.py")], **options)
    tool, arguments = {
        "text": ("huge__big", {"chars": size - 100}),
        "parts": ("huge__parts", {"bytes": size}),
        "parts_62mb": ("huge__parts", {"bytes": 62_000_000}),
        "rows": ("huge__rows", {"bytes": size}),
    }.get(case, ("", {}))
    async with open_tool_hub({"huge": config}) as hub:
        await hub.call_tool("huge__big", {"chars": 10})  # warm
        lags: list[float] = []
        rss_before = _peak_rss_mb()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_ticker, lags)
            await anyio.sleep(0.05)
            start = time.perf_counter()
            if tool:
                result = await hub.call_tool(tool, arguments, timeout=600)
                text, _ = cut_text(result.text, MAX_RESULT_CHARS)
                error = result.text[:300] if result.is_error else None
            else:
                await anyio.sleep(1.0)
                text, error = "", None
            elapsed = time.perf_counter() - start
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    return {
        "case": case,
        "bytes": size if case != "parts_62mb" else 62_000_000,
        "call_ms": round(elapsed * 1000),
        "max_lag_ms": round(max(lags) * 1000, 1),
        "peak_rss_mb": round(_peak_rss_mb() - rss_before, 1),
        "text_chars": len(text),
        "error": error,
    }


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=float, default=8.0, help="message size of the cases, MiB")
    parser.add_argument("--huge", action="store_true", help="also the 62 MB, 2-million-part case")
    parser.add_argument(
        "--max-message-bytes", type=int, help="the server's maxMessageBytes (default: the config default)"
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)
    options = parser.parse_args()
    size = int(options.mib * 1024 * 1024) - 1024  # just under the size, as a message at the cap
    if options.case:
        print(json.dumps(anyio.run(run_case, options.case, size, options.max_message_bytes)))
        sys.exit(0)
    results = []
    for case in (*CASES, *(("parts_62mb",) if options.huge else ())):
        cap = (
            []
            if options.max_message_bytes is None
            else ["--max-message-bytes", str(options.max_message_bytes)]
        )
        out = subprocess.run(
            [sys.executable, __file__, "--mib", str(options.mib), "--case", case, *cap],
            capture_output=True,
            text=True,
            check=True,
            env=os.environ,
        )
        results.append(json.loads(out.stdout))
    return {
        "benchmark": "big_results",
        "cpus": os.cpu_count(),
        "max_message_bytes": options.max_message_bytes,
        "cases": results,
    }


if __name__ == "__main__":
    print(json.dumps(main()))
