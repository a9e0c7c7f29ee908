"""Benchmark of the OpenAI-compatible provider; prints one JSON object.

- ``accumulator_us_per_chunk``: folding a 200-chunk stream with 4 parallel tool calls
  (interleaved by index) through the pure ``ChunkAccumulator`` and ``finish_turn``, no HTTP.
- ``sse_and_accumulator_us_per_chunk``: the same stream as SSE bytes through ``_sse`` first.
- ``e2e_streamed_ms``: one streamed completion of that stream against the fake model server
  (in a child process, so it does not share our GIL) over 127.0.0.1, through the real provider
  and one pooled ``httpx.AsyncClient`` as ``build_client`` makes it (so over the lean transport of
  ``providers/http/lean.py``); median and p90 of 50 calls after 3 warm-ups, and
  ``e2e_cpu_ms_per_call``: this process's CPU time per call (user + system) over those 50.

Run: ``.venv/bin/python bench/bench_providers.py``
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_agent.config import LLMConfig
from mcp_agent.messages import Message, ToolSpec
from mcp_agent.providers.base import ModelRequest
from mcp_agent.providers.factory import build_client
from mcp_agent.providers.http.answers import iter_sse
from mcp_agent.providers.openai import OpenAICompatProvider
from mcp_agent.providers.openai._wire import ChunkAccumulator, finish_turn
from tests.fakes.model_server import Reply, running_model_server, sse_event
from tests.fakes.openai_shapes import Call, openai_stream

TOOLS = tuple(
    ToolSpec(
        name=f"tool_{i}",
        description="x",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    for i in range(4)
)
REQUEST = ModelRequest(messages=[Message.system("sys"), Message.user("go")], tools=TOOLS)


def stream_of_200() -> list[dict[str, Any]]:
    """A stream of exactly 200 chunks: 4 parallel calls interleaved, 5-character fragments."""
    calls = [Call(f"tool_{i}", {"q": "x" * 200}) for i in range(4)]
    for size in range(3, 40):
        chunks = openai_stream(calls=calls, interleave=True, size=size, usage=(100, 50))
        if len(chunks) <= 200:
            break
    pad = 200 - len(chunks)
    role = chunks[0]
    return (
        [role]
        + [{**role, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": None}]}] * pad
        + chunks[1:]
    )


def _per_chunk(times: list[float], chunks: int) -> dict[str, float]:
    """Median and best µs per chunk (the best is steadier on a busy machine)."""
    return {"median": statistics.median(times) / chunks * 1e6, "best": min(times) / chunks * 1e6}


def bench_accumulator(chunks: list[dict[str, Any]], rounds: int = 300) -> dict[str, float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        acc = ChunkAccumulator()
        for chunk in chunks:
            acc.feed(chunk)
        turn = finish_turn(acc, REQUEST)
        times.append(time.perf_counter() - start)
    assert len(turn.tool_calls) == 4
    return _per_chunk(times, len(chunks))


def bench_sse(chunks: list[dict[str, Any]], rounds: int = 300) -> dict[str, float]:
    raw = "".join(sse_event(c) for c in chunks).encode() + b"data: [DONE]\n\n"
    pieces = [raw[i : i + 1024] for i in range(0, len(raw), 1024)]
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        acc = ChunkAccumulator()
        for event in iter_sse(pieces):
            if event.is_done:
                break
            acc.feed(json.loads(event.data))
        finish_turn(acc, REQUEST)
        times.append(time.perf_counter() - start)
    return _per_chunk(times, len(chunks))


def serve_forever() -> None:
    """Child process: the fake model server answering every request with the 200-chunk stream."""
    chunks = stream_of_200()
    with running_model_server() as server:
        server.handler = lambda request: Reply.sse(chunks)
        print(server.port, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


def bench_e2e(rounds: int = 50) -> dict[str, float]:
    """Streamed completions against the fake server in ANOTHER process (no shared GIL)."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())

        async def run() -> list[float]:
            times = []
            llm = LLMConfig(endpoint=f"http://127.0.0.1:{port}/v1", model="m")
            async with build_client(llm) as client:
                provider = OpenAICompatProvider(llm, client=client)
                for i in range(rounds + 3):
                    if i == 3:
                        cpu[0] = time.process_time()
                    start = time.perf_counter()
                    turn = await provider.complete(REQUEST)
                    if i >= 3:  # warm-up: connection, imports
                        times.append(time.perf_counter() - start)
                    assert len(turn.tool_calls) == 4
            cpu[0] = time.process_time() - cpu[0]
            return times

        cpu = [0.0]
        times = anyio.run(run)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=20)
    return {
        "median": statistics.median(times) * 1e3,
        "p90": statistics.quantiles(times, n=10)[-1] * 1e3,
        "best": min(times) * 1e3,
        "cpu": cpu[0] / rounds * 1e3,
    }


def main() -> None:
    chunks = stream_of_200()
    accumulator, sse, e2e = bench_accumulator(chunks), bench_sse(chunks), bench_e2e()
    print(
        json.dumps(
            {
                "benchmark": "providers",
                "chunks": len(chunks),
                "parallel_tool_calls": 4,
                "accumulator_us_per_chunk": round(accumulator["median"], 2),
                "accumulator_us_per_chunk_best": round(accumulator["best"], 2),
                "sse_and_accumulator_us_per_chunk": round(sse["median"], 2),
                "sse_and_accumulator_us_per_chunk_best": round(sse["best"], 2),
                "e2e_streamed_ms": round(e2e["median"], 2),
                "e2e_streamed_p90_ms": round(e2e["p90"], 2),
                "e2e_streamed_best_ms": round(e2e["best"], 2),
                "e2e_cpu_ms_per_call": round(e2e["cpu"], 3),
                "load_average_1m": round(os.getloadavg()[0], 2),
                "python": sys.version.split()[0],
            }
        )
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve_forever()
    else:
        main()
