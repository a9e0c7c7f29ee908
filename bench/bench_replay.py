"""Replay time of a 10-round recording (issue 13 target: at most 50 ms).

    .venv/bin/python bench/bench_replay.py          # prints one JSON object

A run of 10 rounds (9 tool rounds of 2 calls each, then the answer; ``maxRounds`` 10) is
recorded with ``Agent(record=...)`` over a ScriptedProvider and a MemoryToolSource, whose
results are 2,000 characters each, so the later model requests carry a real transcript. Then
``replay(path)`` runs it again: reading and checking the file, building the Agent, the loop,
every request compared with the recorded one and every event checked. ``replay_ms`` is wall
time (median and best of 20 replays, after one warm-up that pays the imports); ``file_bytes``
is the recording's size.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from mcp_agent.config import AgentConfig
from mcp_agent.loop.agent import Agent
from mcp_agent.messages import ToolCall
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.replay import replay
from mcp_agent.tools.memory import MemoryToolSource

ROUNDS = 10
REPEATS = 20


def make_tools() -> MemoryToolSource:
    tools = MemoryToolSource()
    tools.add(
        "lookup",
        lambda key, n: f"value of {key} #{n}: " + "x" * 2000,
        parameters={
            "type": "object",
            "properties": {"key": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["key", "n"],
        },
    )
    return tools


def make_provider() -> ScriptedProvider:
    script: list[Any] = []
    for r in range(ROUNDS - 1):
        script.append(
            tool_turn(*(ToolCall(f"c{r}_{i}", "lookup", {"key": f"k{i}", "n": r}) for i in range(2)))
        )
    script.append(text_turn("done"))
    return ScriptedProvider(script)


async def record(path: Path) -> None:
    config = AgentConfig.model_validate({"limits": {"maxRounds": ROUNDS}})
    agent = Agent(make_provider(), make_tools(), config, record=path)
    result = await agent.query("look up everything")
    assert result.ok and result.rounds == ROUNDS, (result.termination_reason, result.rounds)


async def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.jsonl"
        await record(path)
        warm = await replay(path)
        assert warm.identical, warm.describe()
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            report = await replay(path)
            times.append((time.perf_counter() - start) * 1000)
            assert report.identical
        return {
            "bench": "replay",
            "rounds": ROUNDS,
            "model_calls": report.model_calls,
            "tool_calls": report.tool_calls,
            "file_bytes": path.stat().st_size,
            "replay_ms": {"median": round(statistics.median(times), 2), "best": round(min(times), 2)},
            "target_ms": 50,
            "python": platform.python_version(),
            "platform": sys.platform,
        }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main), indent=2))
