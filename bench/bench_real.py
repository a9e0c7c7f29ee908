"""The real-server targets of issue 10, against the tier's real servers; prints JSON.

Needs the build of ``make test-real`` (``.real/``: llama-cpp-python, llama-server, the 135M
model); without it, it says so and exits 0. Temperature 0; the figures are:

- ``wasted_stream_requests``: a 4-round streamed run against llama-cpp-python
  (chatml-function-calling), which cannot stream tool calls: streamed requests with tools that
  came back empty (target <= 1), once identified (the agent knows the server) and once behind a
  proxy that hides what it is (the agent learns from the first empty stream). The recording proxy names the tool in ``tool_choice`` on the
  requests that are not streamed, so every round calls a tool (a 135M model seldom does alone).
- ``overhead``: runs of the whole path (call -> tool -> result -> answer) against llama-server
  --jinja: total time minus the model server's own time, as a share of the total (target <= 2 %).
  The server's time is measured at the proxy (chat requests only, request in to last byte out);
  llama-server's own ``timings`` (prompt + generation, which leave out its HTTP and template work)
  are shown beside it. Tool calls count as the gateway's time. ``loop_own_ms`` is the run's time
  outside its model calls and tool calls as the loop itself measures them.
- ``estimate``: prompt tokens the agent reports when the server reports none (streamed runs
  against llama-cpp-python) against the server's own count of the same requests (sent again,
  not streamed, ``max_tokens: 1``) (target: within 15 %).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.real._run import run_agent
from tests.real.conftest import agent_config, echo_server, system_server
from tests.real.proxy import (
    empty_stream,
    name_the_tool_when_plain,
    prefill_when_required,
    recording_proxy,
)
from tests.real.servers import REAL, RealServer, llama_cpp_python, llama_server, load_build

RUNS = 3


async def wasted_requests(server: RealServer, folder: Path, *, anonymous: bool) -> dict[str, Any]:
    """``anonymous``: the proxy hides which server it is (the agent must learn from an empty
    stream); else the agent identifies llama-cpp-python and knows from the start."""
    with recording_proxy(server.url, name_the_tool_when_plain, anonymous=anonymous) as proxy:
        config = agent_config(
            folder / f"wasted-{anonymous}",
            proxy.base_url,
            server.model_id,
            llm={"stream": True, "capabilities": {"toolChoice": True}},
            limits={"maxRounds": 4, "loopThreshold": 0},
        )
        [run] = await run_agent(config, "Echo the word pineapple.")
        chats = proxy.chats
    wasted = sum(1 for e in chats if empty_stream(e))
    return {
        "rounds": run.result.rounds,
        "termination_reason": run.result.termination_reason.value,
        "model_requests": len(chats),
        "wasted_stream_requests": wasted,
        "wasted_seconds": round(sum(e.server_ms for e in chats if empty_stream(e)) / 1000, 2),
        "target": "<= 1",
        "met": wasted <= 1,
    }


async def overhead(server: RealServer, folder: Path) -> dict[str, Any]:
    rows = []
    for i in range(RUNS):
        with recording_proxy(server.url, prefill_when_required) as proxy:
            config = agent_config(
                folder / f"overhead{i}",
                proxy.base_url,
                server.model_id,
                servers={"echo": echo_server(), "system": system_server()},
                llm={"stream": True, "toolChoice": "required"},
            )
            [run] = await run_agent(config, "Use the echo tool to echo the word pineapple.")
            chats = proxy.chats
        total = run.result.elapsed_ms
        at_proxy = sum(e.server_ms for e in chats)  # the chat requests only: not the start-up probes
        model_ms = sum(event.ms for event in run.model_calls)
        timings = [e.timings() or {} for e in chats]
        own = sum(float(t.get("prompt_ms", 0)) + float(t.get("predicted_ms", 0)) for t in timings)
        tools = sum(event.ms for event in run.tool_calls)
        rows.append(
            {
                "total_ms": round(total, 1),
                "model_server_ms": round(at_proxy, 1),
                "llama_server_timings_ms": round(own, 1),
                "tool_ms": round(tools, 1),
                "rounds": run.result.rounds,
                "overhead_pct": round(100 * (total - at_proxy) / total, 2),
                "overhead_vs_timings_pct": round(100 * (total - own) / total, 2),
                "overhead_without_tools_pct": round(100 * (total - at_proxy - tools) / total, 2),
                "loop_own_ms": round(total - model_ms - tools, 1),
            }
        )
    worst = max(row["overhead_pct"] for row in rows)
    return {"runs": rows, "overhead_pct_worst": worst, "target": "<= 2 %", "met": worst <= 2}


async def real_prompt_tokens(server: RealServer, body: dict[str, Any]) -> int:
    again = {**body, "stream": False, "max_tokens": 1}
    again.pop("stream_options", None)
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
        response = await client.post(f"{server.base_url}/chat/completions", json=again)
    response.raise_for_status()
    return int(response.json()["usage"]["prompt_tokens"])


async def estimate(servers: dict[str, RealServer], folder: Path) -> dict[str, Any]:
    cases = [
        ("fc, no tools", "fc", {}, "Say hello in five words."),
        ("fc, echo tool", "fc", {"echo": echo_server()}, "Echo the word pineapple."),
        ("template, echo tool (dropped)", "template", {"echo": echo_server()}, "Echo the word pineapple."),
        ("template, no tools", "template", {}, "What is the capital of France?"),
    ]
    rows = []
    for label, which, tools, question in cases:
        server = servers[which]
        with recording_proxy(server.url) as proxy:
            config = agent_config(
                folder / f"estimate-{len(rows)}", proxy.base_url, server.model_id, servers=tools
            )
            [run] = await run_agent(config, question)
            chats: list[Any] = proxy.chats
        usage = run.result.usage
        sent = [e.sent_json for e in chats if e.status == 200]
        real = 0
        for body in sent:
            real += await real_prompt_tokens(server, body)
        rows.append(
            {
                "case": label,
                "estimated": usage.estimated,
                "reported_prompt_tokens": usage.prompt_tokens,
                "real_prompt_tokens": real,
                "error_pct": round(100 * (usage.prompt_tokens - real) / real, 1) if real else None,
            }
        )
    measured = [abs(row["error_pct"]) for row in rows if row["estimated"] and row["error_pct"] is not None]
    worst = max(measured) if measured else None
    return {
        "runs": rows,
        "worst_error_pct": worst,
        "target": "within 15 %",
        "met": worst is not None and worst <= 15,
    }


async def main() -> dict[str, Any]:
    try:
        build = load_build()
    except AssertionError as exc:
        return {"skipped": str(exc)}
    logs = REAL / "logs" / "bench"
    out: dict[str, Any] = {"pins": build.pins, "build_seconds": build.build_seconds}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["MCP_AGENT_STATE_DIR"] = str(folder / "state")  # no lesson from an earlier run
        with llama_cpp_python(build, logs, chat_format="chatml-function-calling") as fc:
            out["wasted_stream_requests"] = {
                "identified": await wasted_requests(fc, folder, anonymous=False),
                "unidentified": await wasted_requests(fc, folder, anonymous=True),
            }
            with llama_cpp_python(build, logs) as template:
                out["estimate"] = await estimate({"fc": fc, "template": template}, folder)
        with llama_server(build, logs) as jinja:
            out["overhead"] = await overhead(jinja, folder)
    return out


if __name__ == "__main__":
    print(json.dumps(anyio.run(main), indent=2))
