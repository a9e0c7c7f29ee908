"""``agent_query`` over Streamable HTTP against its floor, in one run; prints one JSON object.

Issue 22's measure: ``agent_query`` over HTTP, default SQLite state, one tool round, a
zero-latency model, next to a bare floor loop plus a bare MCP call, in the same run.

All real processes on 127.0.0.1:

- the fake model server (``bench_query.SERVER``: a tool call, then the answer after the result),
  answering at once, in a process of its own;
- ``mcp-agent serve`` with no ``state`` key (so the default SQLite store, in a temporary state
  folder), the model above and the stdio echo server of ``tests/servers/echo.py``;
- the echo server once more over Streamable HTTP, for the bare hop.

``ours``: one ``agent_query`` call through the gateway (a client of each era: ``legacy`` is
``ClientSession`` with the 2025-11-25 handshake, ``modern`` is ``mcp.Client`` speaking
2026-07-28). ``floor``: what the same work costs written by hand, over kept-alive connections —
the two Chat Completions requests and one ``ClientSession.call_tool`` to a stdio echo child (the
loop, as in ``bench_query.py``) — plus one ``tools/call`` of the same era over HTTP to the echo
server (the MCP hop a caller pays anyway). The two alternate in blocks, so both see the same
moments of a noisy machine.

Reported per era: p50/p90 in ms of each, ``ratio`` = ours / floor at p50 (issue 22's target:
≤ 1.3), and the gateway process's CPU time per query (user + system, from ``/proc``).

``--memory-state`` adds a third side, ``ours_memory``: a second gateway, the same but for
``state.url: memory://``, alternated with the other two, with its own ``ratio``. The difference
between the two ratios is what the default SQLite state (the conversation and the run record,
written before the answer) costs, read in one run.

Run: ``.venv/bin/python bench/bench_query_http.py [--runs N] [--memory-state]`` (N queries per
era and side, default 200).
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
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gateway import GatewayProcess, free_port  # noqa: E402
from bench.bench_passthrough import (  # noqa: E402
    cpu_seconds,
    legacy_caller,
    modern_caller,
    start_echo,
    summary,
)
from bench.bench_query import SERVER, TOOLS  # noqa: E402

ECHO = str(ROOT / "tests" / "servers" / "echo.py")
BLOCK = 10
"""Queries on one side before the other takes its turn."""
ANSWER = "The echo said: hello"

Step = Callable[[], Awaitable[None]]


def start_model() -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(ROOT), "plain"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, f"http://127.0.0.1:{int(child.stdout.readline())}/v1"


def gateway_config(folder: Path, model_url: str, *, state: str | None = None) -> Path:
    """The gateway's config in ``folder``: the default state, or ``state`` as ``state.url``."""
    config: dict[str, Any] = {
        "llm": {"endpoint": model_url, "model": "m", "stream": False, "maxRetries": 0},
        "mcpServers": {"echo": {"command": sys.executable, "args": [ECHO]}},
    }
    if state is not None:
        config["state"] = {"url": state}
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


@asynccontextmanager
async def floor_loop(model_url: str) -> AsyncIterator[Step]:
    """The loop by hand: two Chat Completions requests around one stdio ``call_tool``."""
    with open(os.devnull, "w") as errlog:
        async with (
            httpx.AsyncClient(base_url=model_url, trust_env=False) as http,
            stdio_client(StdioServerParameters(command=sys.executable, args=[ECHO]), errlog=errlog) as (
                read,
                write,
            ),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()

            async def chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
                body = {"model": "m", "messages": messages, "tools": TOOLS, "stream": False}
                response = await http.post("/chat/completions", json=body)
                return response.json()["choices"][0]["message"]  # type: ignore[no-any-return]

            async def step() -> None:
                messages: list[dict[str, Any]] = [{"role": "user", "content": "say hello"}]
                first = await chat(messages)
                call = first["tool_calls"][0]
                result = await session.call_tool("echo", json.loads(call["function"]["arguments"]))
                text = result.content[0].text  # type: ignore[union-attr]
                messages += [first, {"role": "tool", "tool_call_id": call["id"], "content": text}]
                answer = await chat(messages)
                assert answer["content"] == ANSWER, answer

            yield step


async def measure(
    model_url: str, echo_url: str, gateways: dict[str, tuple[str, int]], runs: int
) -> dict[str, Any]:
    """``gateways``: (URL, pid) by side name (``ours``, and ``ours_memory`` when asked for)."""
    results: dict[str, Any] = {}
    async with floor_loop(model_url) as loop:
        for era, caller in (("legacy", legacy_caller), ("modern", modern_caller)):
            async with caller(echo_url, "echo") as hop, AsyncExitStack() as stack:

                async def floor() -> None:
                    await loop()
                    assert await hop("hello") == "hello"

                sides: dict[str, Step] = {"floor": floor}
                for name, (url, _) in gateways.items():
                    sides[name] = await stack.enter_async_context(_agent_query(url, era))
                samples: dict[str, list[float]] = {name: [] for name in sides}
                cpu = dict.fromkeys(gateways, 0.0)
                for _ in range(BLOCK):  # warm every path first
                    for step in sides.values():
                        await step()
                for _ in range(max(1, runs // BLOCK)):
                    for name, step in sides.items():
                        pid = gateways[name][1] if name in gateways else None
                        before = cpu_seconds(pid) if pid is not None else 0.0
                        for _ in range(BLOCK):
                            start = time.perf_counter()
                            await step()
                            samples[name].append(time.perf_counter() - start)
                        if pid is not None:
                            cpu[name] += cpu_seconds(pid) - before
            row: dict[str, Any] = {name: summary(values) for name, values in samples.items()}
            for name in gateways:
                row[name]["gateway_cpu_ms_per_query"] = round(cpu[name] * 1000 / len(samples[name]), 2)
            row["ratio"] = round(row["ours"]["p50_ms"] / row["floor"]["p50_ms"], 2)
            if "ours_memory" in gateways:
                row["ratio_memory_state"] = round(row["ours_memory"]["p50_ms"] / row["floor"]["p50_ms"], 2)
            results[era] = row
    return results


@asynccontextmanager
async def _agent_query(url: str, era: str) -> AsyncIterator[Step]:
    """One ``agent_query`` per step, by a client of ``era``, checked for the model's answer."""
    import mcp

    if era == "legacy":
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def legacy() -> None:
                result = await session.call_tool("agent_query", {"query": "say hello"})
                assert ANSWER in result.content[0].text, result  # type: ignore[union-attr]

            yield legacy
        return
    async with mcp.Client(url) as client:

        async def modern() -> None:
            result = await client.call_tool("agent_query", {"query": "say hello"})
            assert ANSWER in result.content[0].text, result  # type: ignore[union-attr]

        yield modern


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="queries per era and side")
    parser.add_argument(
        "--memory-state",
        action="store_true",
        help="a third side: the same gateway with state.url memory:// (what the SQLite state costs)",
    )
    args = parser.parse_args()
    model, model_url = start_model()
    echo_port = free_port()
    echo = start_echo(echo_port)
    try:
        with tempfile.TemporaryDirectory() as folder, ExitStack() as running:
            states = {"ours": None, **({"ours_memory": "memory://"} if args.memory_state else {})}
            gateways: dict[str, tuple[str, int]] = {}
            for name, state in states.items():
                home = Path(folder) / name
                home.mkdir()
                port, config = free_port(), gateway_config(home, model_url, state=state)
                gateway = GatewayProcess(
                    ["-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
                    port=port,
                    env={**os.environ, "MCP_AGENT_STATE_DIR": str(home / "state")},
                    quiet=True,
                )
                running.callback(gateway.stop)
                gateway.wait_ready(all_up=True)
                gateways[name] = (f"{gateway.url}/mcp", gateway.process.pid)
            results = anyio.run(measure, model_url, f"http://127.0.0.1:{echo_port}/mcp", gateways, args.runs)
    finally:
        echo.terminate()
        echo.wait(timeout=10)
        assert model.stdin is not None
        model.stdin.close()
        model.wait(timeout=10)
    print(
        json.dumps(
            {
                "benchmark": "agent_query over Streamable HTTP (default SQLite state) vs the loop by hand + one MCP hop",
                "runs_per_side": args.runs,
                "memory_state_side": args.memory_state,
                **results,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
