"""Loop overhead per round and memory over many runs, with a zero-latency model and in-process tools.

    .venv/bin/python bench/bench_loop.py            # prints one JSON object

- ``us_per_round``: CPU time of ``run()`` divided by its model calls (best of 5 batches; CPU
  time rather than wall time, so that other processes on a busy machine add less noise), for turns of 1 and 4 tool
  calls, without event sinks and with a RecordingSink-like sink (every event built). The model
  is a ScriptedProvider (no latency) and the tool a MemoryToolSource function returning at once,
  so this is the loop's own cost: guards, validation, fingerprints, dispatch, events.
- ``memory``: traced memory (tracemalloc, after gc) after 1,000 runs and after 10,000 runs of the
  same shape; no growth beyond noise means the loop keeps nothing per run.
"""

from __future__ import annotations

import gc
import json
import platform
import sys
import time
import tracemalloc
from typing import Any

import anyio

from mcp_agent.config import Limits
from mcp_agent.events import Event
from mcp_agent.loop.run import run
from mcp_agent.messages import ToolCall
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

TOOL_ROUNDS = 8  # tool rounds per run; one more model call answers
LIMITS = Limits()  # the defaults: 10 rounds, 50 calls, loop threshold 3, 16,000-char results...


class CountingSink:
    def __init__(self) -> None:
        self.count = 0

    def emit(self, event: Event) -> None:
        self.count += 1


def make_tools() -> MemoryToolSource:
    tools = MemoryToolSource()
    tools.add(
        "lookup",
        lambda key, n: f"value of {key} #{n}",
        parameters={
            "type": "object",
            "properties": {"key": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["key", "n"],
        },
    )
    return tools


def make_provider(calls_per_round: int, rounds: int = TOOL_ROUNDS) -> ScriptedProvider:
    script: list[Any] = []
    for r in range(rounds):
        calls = [ToolCall(f"c{r}_{k}", "lookup", {"key": f"k{k}", "n": r}) for k in range(calls_per_round)]
        script.append(tool_turn(*calls))
    script.append(text_turn("done"))
    return ScriptedProvider(script)


async def one_run(
    tools: MemoryToolSource, calls_per_round: int, sink: Any = None, rounds: int = TOOL_ROUNDS
) -> None:
    result = await run(
        "q", provider=make_provider(calls_per_round, rounds), tools=tools, limits=LIMITS, events=sink
    )
    assert result.termination_reason.value == "success", result.detail
    tools.calls.clear()


async def per_round(calls_per_round: int, with_sink: bool, runs: int, batches: int) -> float:
    """µs per model call: the best of ``batches`` batches (the machine may be busy)."""
    tools = make_tools()
    sink = CountingSink() if with_sink else None
    for _ in range(20):  # warm up (schema checker cache, imports)
        await one_run(tools, calls_per_round, sink)
    best = float("inf")
    for _ in range(batches):
        start = time.process_time()  # CPU time: the loop's own cost, less noise from other processes
        for _ in range(runs):
            await one_run(tools, calls_per_round, sink)
        best = min(best, time.process_time() - start)
    return best / (runs * (TOOL_ROUNDS + 1)) * 1e6


async def memory(first: int, total: int) -> dict[str, float]:
    tools = make_tools()
    for _ in range(50):
        await one_run(tools, 1, rounds=2)
    tracemalloc.start()
    for _ in range(first):
        await one_run(tools, 1, rounds=2)
    gc.collect()
    after_first = tracemalloc.get_traced_memory()[0]
    for _ in range(total - first):
        await one_run(tools, 1, rounds=2)
    gc.collect()
    after_total = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    growth = after_total - after_first
    return {
        f"after_{first}_runs_kib": round(after_first / 1024, 1),
        f"after_{total}_runs_kib": round(after_total / 1024, 1),
        "growth_kib": round(growth / 1024, 1),
        "growth_bytes_per_run": round(growth / (total - first), 2),
    }


async def main() -> dict[str, Any]:
    runs, batches = 100, 5
    timings = {
        "1_call": await per_round(1, False, runs, batches),
        "4_calls": await per_round(4, False, runs, batches),
        "1_call_with_events": await per_round(1, True, runs, batches),
        "4_calls_with_events": await per_round(4, True, runs, batches),
    }
    return {
        "benchmark": "loop",
        "us_per_round": {name: round(us, 1) for name, us in timings.items()},
        "runs_per_batch": runs,
        "batches": batches,
        "timing": "process CPU time, best batch",
        "model_calls_per_run": TOOL_ROUNDS + 1,
        "memory": await memory(1_000, 10_000),
        "python": platform.python_version(),
        "platform": sys.platform,
    }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main)))
