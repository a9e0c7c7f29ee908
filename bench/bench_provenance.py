"""The cost of provenance tracking and the policy check per tool call (target: at most 0.05 ms).

    .venv/bin/python bench/bench_provenance.py      # prints one JSON object

- ``per_call``: the work provenance adds to one tool call, timed alone on the loop's own
  values (CPU time, best of 5 batches of 20,000 calls): the trust decision
  (``ProvenancePolicy.provenance``, cached per tool definition), the tool message built with its
  provenance instead of without, the run's exposure updated from it (``latest_exposure``) and
  the policy check (``ProvenancePolicy.check``, after untrusted text, on a read-only and on a
  side-effect tool). ``added_us`` is with minus without: the figure the target is about.
- ``in_the_loop``: whole runs of ``run()`` (zero-latency model, in-process tools, 8 rounds of
  4 calls), CPU time per tool call with ``policy.mode`` off (provenance recorded, nothing
  checked) and enforce (every call checked after untrusted text; the tools are read-only, so
  none waits), alternated in one go. Their difference is the check's cost in the loop, within
  the machine's noise.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio

from mcp_agent.config import PolicyConfig
from mcp_agent.loop.provenance import Exposure, ProvenancePolicy, latest_exposure
from mcp_agent.loop.run import run
from mcp_agent.messages import Message, Provenance, ToolCall, ToolSpec
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

BATCH = 20_000
ROUNDS, CALLS = 8, 4


def best_us(work: Callable[[], None], n: int = BATCH, repeats: int = 5) -> float:
    """Best CPU time of ``repeats`` batches of ``n`` calls, in microseconds per call."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(n):
            work()
        best = min(best, time.process_time() - start)
    return best / n * 1e6


def per_call() -> dict[str, Any]:
    policy = ProvenancePolicy(PolicyConfig(mode="enforce"), {"web": None})
    fetch = ToolSpec(name="web__fetch", server="web", mcp_name="fetch", annotations={"openWorldHint": True})
    write = ToolSpec(name="fs__write", server="fs", mcp_name="write", annotations={"openWorldHint": False})
    read = ToolSpec(name="fs__read", server="fs", mcp_name="read", annotations={"readOnlyHint": True})
    call = ToolCall("c1", "web__fetch", {"url": "https://example.com"})
    text = "page text " * 200
    exposure = Exposure(Provenance("web", "web__fetch", "c0", False, "openWorldHint: true"), "page text")

    def without() -> None:
        Message.tool(call, text)

    def tracked() -> None:
        message = Message.tool(call, text, provenance=policy.provenance(call, fetch))
        latest_exposure((message,), exposure)
        policy.check(call, read, exposure)
        policy.check(call, write, exposure)

    base, full = best_us(without), best_us(tracked)
    return {
        "without_us": round(base, 3),
        "with_us": round(full, 3),
        "added_us": round(full - base, 3),
        "added_ms": round((full - base) / 1000, 5),
        "target_ms": 0.05,
        "met": (full - base) / 1000 <= 0.05,
    }


def _tools() -> MemoryToolSource:
    tools = MemoryToolSource()
    tools.add(
        "web__read",
        lambda n: f"page {n} " * 50,
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        server="web",
        annotations={"readOnlyHint": True},  # no openWorldHint: untrusted; read-only: never held
    )
    return tools


def _provider() -> ScriptedProvider:
    turns = [
        tool_turn(*(ToolCall(f"c{r}_{i}", "web__read", {"n": r * CALLS + i}) for i in range(CALLS)))
        for r in range(ROUNDS)
    ]
    return ScriptedProvider([*turns, text_turn("done")])


async def _runs(mode: str, n: int) -> float:
    policy = ProvenancePolicy(PolicyConfig.model_validate({"mode": mode}))
    tools = _tools()
    start = time.process_time()
    for _ in range(n):
        await run("q", provider=_provider(), tools=tools, policy=policy)
    return (time.process_time() - start) / (n * ROUNDS * CALLS) * 1e6


async def in_the_loop(runs: int = 40, repeats: int = 5) -> dict[str, Any]:
    best = {"off": float("inf"), "enforce": float("inf")}
    await _runs("off", 5)  # warm up
    for _ in range(repeats):  # alternated A/B in one go
        for mode in best:
            best[mode] = min(best[mode], await _runs(mode, runs))
    return {
        "us_per_tool_call_off": round(best["off"], 2),
        "us_per_tool_call_enforce": round(best["enforce"], 2),
        "check_added_us": round(best["enforce"] - best["off"], 2),
    }


def main() -> None:
    result = {
        "per_call": per_call(),
        "in_the_loop": anyio.run(in_the_loop),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
