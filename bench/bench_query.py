"""One whole query, ours against the same work written by hand.

``agent.query`` with one tool round — two model calls to a fake model server over HTTP on
127.0.0.1 and one call to a stdio echo tool server — next to the floor: the same two
Chat Completions requests and one ``ClientSession.call_tool``, by hand, over the same kind of
kept-alive connections. The fake model server runs in its own process, so its CPU is not ours.

    .venv/bin/python bench/bench_query.py [--runs 200] [--stream]

Prints one JSON object: medians and p90s in ms, and ``ratio`` = ours / floor (target ≤ 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_agent.assembly import open_agent  # noqa: E402
from mcp_agent.config import parse_config  # noqa: E402

ECHO = str(ROOT / "tests" / "servers" / "echo.py")

# The fake model server, in a child process: a tool call first, then an answer after the result.
SERVER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.fakes.model_server import Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion, openai_stream
stream = sys.argv[2] == "stream"

def reply(request):
    if not request.path.endswith("/chat/completions"):  # a gateway asks for its models
        return Reply.json({"object": "list", "data": [{"id": "m"}]})
    messages = request.json["messages"]
    if messages[-1]["role"] == "tool":
        kw = dict(content="The echo said: " + messages[-1]["content"], usage=(60, 8))
    else:
        kw = dict(calls=[Call("echo__echo", {"text": "hello"}, id="call_1")], usage=(50, 10))
    return Reply.sse(openai_stream(**kw)) if stream else Reply.json(completion(**kw))

with running_model_server() as server:
    server.handler = reply
    print(server.port, flush=True)
    sys.stdin.read()
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(samples) * 1000, 3),
        "p90_ms": round(percentile(samples, 0.9) * 1000, 3),
        "min_ms": round(min(samples) * 1000, 3),
    }


async def ours(base_url: str, runs: int, stream: bool) -> list[float]:
    config = parse_config(
        {
            "llm": {"endpoint": base_url, "model": "m", "stream": stream, "maxRetries": 0},
            "mcpServers": {"echo": {"command": sys.executable, "args": [ECHO]}},
        }
    )
    samples = []
    async with open_agent(config) as agent:
        for i in range(runs + 10):
            start = time.perf_counter()
            result = await agent.query("say hello")
            elapsed = time.perf_counter() - start
            assert result.answer == "The echo said: hello", result
            if i >= 10:  # warm-up
                samples.append(elapsed)
    return samples


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "echo__echo",
            "description": "Return the text unchanged.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
]
"""The echo tool as the gateway offers it to the model."""


async def floor(base_url: str, runs: int, stream: bool) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=[ECHO])
    samples = []
    with open(os.devnull, "w") as errlog:
        async with (
            httpx.AsyncClient(base_url=base_url, trust_env=False) as http,
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()

            async def chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
                body = {"model": "m", "messages": messages, "tools": TOOLS, "stream": stream}
                if not stream:
                    response = await http.post("/chat/completions", json=body)
                    return response.json()["choices"][0]["message"]  # type: ignore[no-any-return]
                content, calls = "", {}
                async with http.stream("POST", "/chat/completions", json=body) as response:
                    async for line in response.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        chunk = json.loads(line[6:])
                        for choice in chunk.get("choices") or []:
                            delta = choice.get("delta") or {}
                            content += delta.get("content") or ""
                            for part in delta.get("tool_calls") or []:
                                slot = calls.setdefault(
                                    part["index"], {"id": "", "name": "", "arguments": ""}
                                )
                                slot["id"] = slot["id"] or part.get("id", "")
                                function = part.get("function") or {}
                                slot["name"] = slot["name"] or function.get("name", "")
                                slot["arguments"] += function.get("arguments") or ""
                message: dict[str, Any] = {"role": "assistant", "content": content}
                if calls:
                    message["tool_calls"] = [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in calls.values()
                    ]
                return message

            for i in range(runs + 10):
                start = time.perf_counter()
                messages: list[dict[str, Any]] = [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "say hello"},
                ]
                first = await chat(messages)
                call = first["tool_calls"][0]
                result = await session.call_tool("echo", json.loads(call["function"]["arguments"]))
                messages += [
                    first,
                    {"role": "tool", "tool_call_id": call["id"], "content": result.content[0].text},  # type: ignore[union-attr]
                ]
                answer = await chat(messages)
                elapsed = time.perf_counter() - start
                assert answer["content"] == "The echo said: hello", answer
                if i >= 10:
                    samples.append(elapsed)
    return samples


async def main(runs: int, stream: bool) -> dict[str, Any]:
    child = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(ROOT), "stream" if stream else "plain"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        base_url = f"http://127.0.0.1:{port}/v1"
        # alternate, so that drift in machine load hits both alike
        ours_samples, floor_samples = [], []
        for _ in range(2):
            floor_samples += await floor(base_url, runs // 2, stream)
            ours_samples += await ours(base_url, runs // 2, stream)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)
    mine, base = summary(ours_samples), summary(floor_samples)
    return {
        "benchmark": "one query with one tool round: agent.query vs the same work by hand",
        "stream": stream,
        "runs": len(ours_samples),
        "ours": mine,
        "floor": base,
        "ratio_median": round(mine["median_ms"] / base["median_ms"], 3),
        "overhead_median_ms": round(mine["median_ms"] - base["median_ms"], 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    print(json.dumps(anyio.run(main, args.runs, args.stream), indent=2))
