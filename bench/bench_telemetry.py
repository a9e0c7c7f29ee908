"""Benchmark of tracing's cost; prints one JSON object to stdout.

1. ``agent_query`` latency over HTTP (Streamable HTTP, the SDK's ``ClientSession``, one client,
   calls one after another), the gateway with tracing **off** (no TracerProvider) and **on** (an
   SDK TracerProvider with the in-memory exporter, holding the last ``KEPT_SPANS`` spans, behind
   the ``BatchSpanProcessor`` the gateway installs itself for OTLP; ``--processor simple`` exports
   every span on the request path instead). The gateway runs in a process of its own
   (``--serve`` mode of this script) with a zero-latency model (one ``echo__echo`` call, then the
   answer) and the stdio echo server of ``tests/servers/echo.py`` behind the real ToolHub: one
   query is two model turns and one stdio tool call, so a traced query makes the MCP SDK's server
   span, ``invoke_agent``, two ``chat``, one ``execute_tool`` and the SDK's ``MCP send`` span.
   A third gateway, **sdk**, has the same provider but ``telemetry.enabled`` false: only the MCP
   SDK's own two spans are made, which shows how much of the cost is the SDK's and how much ours.
   The gateways run at once and the client takes them in turn in blocks of ``BLOCK`` calls (which
   goes first rotates), so the load of a shared machine falls on all alike while each block runs
   with its gateway's caches warm (``latencies`` says why not call by call). The figures to read
   pool every call of every round: p50 and p95 per mode, and the paired estimate, the median of
   (a traced block's median − the untraced block's of the same turn), which cancels most of the
   drift of a busy machine. Per-round figures show the spread. Target: on ≤ +5 % of off at p50.
2. The same run in-process (scripted model, in-memory tool, no HTTP), traced and not, alternating:
   the tracing cost per run without the noise of sockets and processes.
3. The SDK's floor: one run's hooks (``RunTrace`` with the SDK, the spans of the HTTP case) in a
   tight loop, next to the bare SDK calls that make the same four spans with the same
   attributes: what our plumbing adds to what the SDK costs anyway.
4. The no-op cost per run without the SDK: in a process where ``opentelemetry.sdk`` cannot be
   imported, the hooks one run calls (``start_trace``, two model calls with their notes, one
   tool call, the end), timed in a loop, next to an in-process ``Agent.query`` of the same shape
   (scripted model, in-memory tool) for scale.

Run: ``.venv/bin/python bench/bench_telemetry.py [--calls N] [--rounds R] [--processor batch|simple]`` (defaults 200 calls per
round, 3 rounds per mode).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gateway import EchoOnceModel, GatewayProcess, free_port  # noqa: E402

MODES = ("off", "on", "sdk")
"""off: no TracerProvider; on: traced into memory; sdk: the same provider, ``telemetry.enabled``
false, so only the MCP SDK's own spans are made (what the SDK costs by itself)."""


# ------------------------------------------------------------------------------------ the gateway process


KEPT_SPANS = 1000
"""Finished spans the traced gateways' in-memory exporter holds (older ones are let go)."""

PROCESSORS = ("batch", "simple")
"""batch: ``BatchSpanProcessor``, what the gateway installs itself for OTLP (spans are handed to a
worker thread when they end); simple: ``SimpleSpanProcessor``, every span exported on the request
path as it ends (the SDK's processor for debugging and tests)."""


def serve(port: int, mode: str, processor: str) -> None:
    """The gateway, traced into memory when ``mode`` is ``on``; prints the span count at exit."""
    import logging

    from mcp_agent.config import parse_config
    from mcp_agent.gateway.serve import serve as serve_gateway
    from mcp_agent.loop.agent import Agent
    from mcp_agent.tools.hub import open_tool_hub

    exporter = None
    if mode in ("on", "sdk"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        class CountedSpans(InMemorySpanExporter):
            """The in-memory exporter holding the last ``KEPT_SPANS`` spans (the SDK's ``max_spans``),
            counting all of them. A real exporter lets go of what it sent; holding every span of
            the run would make each garbage collection walk them all, a cost that grows with the
            run and that no deployment has."""

            total = 0

            def export(self, spans: Any) -> Any:
                self.total += len(spans)
                return super().export(spans)

        exporter = CountedSpans(max_spans=KEPT_SPANS)
        provider = TracerProvider()
        kind = BatchSpanProcessor if processor == "batch" else SimpleSpanProcessor
        provider.add_span_processor(kind(exporter))
        trace.set_tracer_provider(provider)

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "zero"},
            "limits": {"maxRounds": 4},
            "mcpServers": {
                "echo": {"command": sys.executable, "args": [str(ROOT / "tests" / "servers" / "echo.py")]}
            },
            "gateway": {"maxConcurrentQueries": 0},
            "telemetry": {"enabled": mode != "sdk"},
        },
        environ={},
    )

    @asynccontextmanager
    async def factory(config: Any) -> AsyncIterator[Agent]:
        async with open_tool_hub(config.servers()) as hub:
            yield Agent(EchoOnceModel(), hub, config)

    anyio.run(partial(serve_gateway, config, host="127.0.0.1", port=port, factory=factory))
    if exporter is not None:
        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        print(json.dumps({"spans": exporter.total}), flush=True)


def start_gateway(mode: str, processor: str) -> GatewayProcess:
    """The gateway of ``mode``, serving with its echo server up (no ``OTEL_*`` variables)."""
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    args = [__file__, "--serve", str(port), "--mode", mode, "--processor", processor]
    return GatewayProcess(args, port=port, env=env, capture_stdout=True).wait_ready(all_up=True)


def stop_gateway(gateway: GatewayProcess) -> dict[str, Any]:
    """Stop the gateway; the last JSON line it printed (the span count), or ``{}``."""
    gateway.stop(timeout=30)
    lines = [line for line in gateway.stdout.splitlines() if line.startswith("{")]
    found: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    return found


# ------------------------------------------------------------------------------------ the client


@asynccontextmanager
async def session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        yield s


BLOCK = 50
"""Calls in a row to one gateway before the client turns to the next (see ``latencies``)."""


async def latencies(
    urls: dict[str, str], calls: int, warmup: int
) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """``calls`` agent_query calls to each gateway, in blocks of ``BLOCK`` calls in a row.

    The gateways take turns block by block (which goes first rotates), so drift on a shared
    machine falls on all alike, while each block runs with its gateway's caches warm, as a
    gateway serving its callers does. Calling the gateways in turn call by call instead makes
    every call start in caches the other gateways just filled, which with three gateways slowed
    every mode by a millisecond or more at p50.

    Returns the samples per mode, each block's median per mode, and the failed calls."""
    samples: dict[str, list[float]] = {mode: [] for mode in urls}
    blocks: dict[str, list[float]] = {mode: [] for mode in urls}
    failures = 0
    async with session(urls["off"]) as off, session(urls["on"]) as on, session(urls["sdk"]) as sdk:
        sessions = {"off": off, "on": on, "sdk": sdk}
        for mode in MODES:
            for _ in range(warmup):
                await sessions[mode].call_tool("agent_query", {"query": "warm up"})
        for cycle in range(max(calls // BLOCK, 1)):
            for mode in MODES[cycle % 3 :] + MODES[: cycle % 3]:  # which goes first rotates
                block: list[float] = []
                for n in range(BLOCK):
                    start = time.perf_counter()
                    result = await sessions[mode].call_tool("agent_query", {"query": f"q{n}"})
                    block.append(time.perf_counter() - start)
                    content = result.structured_content
                    failures += content is None or content["answer"] != f"echo: q{n}"
                samples[mode] += block
                blocks[mode].append(statistics.median(block))
    return samples, blocks, failures


def percentile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def http_rounds(calls: int, rounds: int, warmup: int, processor: str, same: bool = False) -> dict[str, Any]:
    """``rounds`` rounds, each with three fresh gateways (``same``: all three untraced, an A/A
    run that shows the noise floor: two processes of one program differ by a few percent, by
    their memory layout and hash seed, so the figures need many rounds of fresh processes)."""
    rows: list[dict[str, Any]] = []
    pooled: dict[str, list[float]] = {mode: [] for mode in MODES}
    pooled_blocks: dict[str, list[float]] = {mode: [] for mode in MODES}
    spans = 0
    for number in range(rounds):
        servers: dict[str, GatewayProcess] = {}
        try:  # a gateway that started is stopped, also when another one did not start
            for mode in MODES[number % 3 :] + MODES[: number % 3]:  # which starts first rotates
                servers[mode] = start_gateway(mode if not same else "off", processor)
            urls = {mode: server.url for mode, server in servers.items()}
            samples, blocks, failures = anyio.run(latencies, urls, calls, warmup)
        finally:
            for mode, server in servers.items():
                found = stop_gateway(server)
                spans = found.get("spans", spans) if mode == "on" else spans
        row: dict[str, Any] = {"calls_per_mode": len(samples["off"]), "failures": failures}
        for mode in MODES:
            pooled[mode].extend(samples[mode])
            pooled_blocks[mode].extend(blocks[mode])
            ordered = sorted(samples[mode])
            row[f"p50_ms_{mode}"] = round(statistics.median(ordered) * 1000, 3)
            row[f"p95_ms_{mode}"] = round(percentile(ordered, 0.95) * 1000, 3)
        row["p50_overhead_pct"] = round((row["p50_ms_on"] / row["p50_ms_off"] - 1) * 100, 2)
        rows.append(row)

    # every call, all rounds pooled (the blocks take turns, so every mode saw the same load)
    summary: dict[str, Any] = {}
    for mode in MODES:
        ordered = sorted(pooled[mode])
        summary[f"p50_ms_{mode}"] = round(statistics.median(ordered) * 1000, 3)
        summary[f"p95_ms_{mode}"] = round(percentile(ordered, 0.95) * 1000, 3)
    off = summary["p50_ms_off"]
    summary["p50_overhead_pct"] = round((summary["p50_ms_on"] / off - 1) * 100, 2)
    summary["p95_overhead_pct"] = round((summary["p95_ms_on"] / summary["p95_ms_off"] - 1) * 100, 2)
    # of that, the MCP SDK's own two spans (server span of agent_query, client span of the tool call)
    summary["sdk_spans_only_p50_overhead_pct"] = round((summary["p50_ms_sdk"] / off - 1) * 100, 2)
    # the paired estimate: each traced block against the untraced block of the same turn
    for mode in ("on", "sdk"):
        deltas = [b - a for a, b in zip(pooled_blocks["off"], pooled_blocks[mode], strict=True)]
        summary[f"paired_block_delta_ms_{mode}"] = round(statistics.median(deltas) * 1000, 3)
    summary["paired_overhead_pct"] = round(summary["paired_block_delta_ms_on"] / off * 100, 2)
    summary["p50_overhead_pct_by_round"] = [row["p50_overhead_pct"] for row in rows]
    summary["spans_per_query"] = round(spans / (len(pooled["on"]) // rounds + warmup), 2)
    return {"rounds": rows, **summary, "target_p50_overhead_pct": 5.0}


IN_PROCESS = r"""
import json, statistics, sys, time
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from mcp_agent.config import parse_config
from mcp_agent.loop.agent import Agent
from mcp_agent.messages import ToolCall, Usage
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.tools.memory import MemoryToolSource

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
N = int(sys.argv[1])
tools = MemoryToolSource()
async def echo(text: str) -> str:
    return text
tools.add("echo", echo, parameters={"type": "object", "properties": {"text": {"type": "string"}}})
call = ToolCall("c1", "echo", {"text": "hi"})

def config(enabled):
    return parse_config({"llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"},
                         "telemetry": {"enabled": enabled}}, environ={})

async def main():
    agents = {}
    for mode, enabled in (("off", False), ("on", True)):
        agents[mode] = (ScriptedProvider(), Agent(ScriptedProvider(), tools, config(enabled)))
        provider_, agent = agents[mode]
        agent.provider = provider_
    times = {"off": [], "on": []}
    for n in range(N + 200):
        for mode in (("off", "on") if n % 2 == 0 else ("on", "off")):
            provider_, agent = agents[mode]
            provider_.add(tool_turn(call, usage=Usage(1, 1, 2)), text_turn("hi", usage=Usage(1, 1, 2)))
            start = time.perf_counter()
            assert (await agent.query("hi")).ok
            if n >= 200:
                times[mode].append(time.perf_counter() - start)
        if n % 500 == 0:
            exporter.clear()
    return {f"run_us_{mode}": round(statistics.median(values) * 1e6, 1) for mode, values in times.items()}

found = anyio.run(main)
found["delta_us"] = round(found["run_us_on"] - found["run_us_off"], 1)
print(json.dumps(found))
"""


def in_process(runs: int) -> dict[str, Any]:
    return _python(IN_PROCESS, runs)


# ------------------------------------------------------------------------------------ the SDK's floor


FLOOR = r"""
import json, statistics, sys, time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, set_span_in_context
from mcp_agent.messages import Message, ToolCall, ToolSpec, Turn, Usage
from mcp_agent.telemetry.base import TraceSettings, note_tool_transport
from mcp_agent.telemetry.setup import start_trace

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
N = int(sys.argv[1])
settings = TraceSettings(request_model="m", endpoint="http://127.0.0.1:9/v1", agent_description="Answers.")
messages = [Message.user("hi")]
call = ToolCall("c1", "echo__echo", {"text": "hi"})
spec = ToolSpec(name="echo__echo", description="Echo the text back", server="echo", mcp_name="echo")
turns = [Turn(tool_calls=(call,), usage=Usage(1, 1, 2), finish_reason="tool_calls", model="m"),
         Turn(content="hi", usage=Usage(1, 1, 2), finish_reason="stop", model="m")]

def ours():
    run = start_trace(run_id="a81cf8936b3f105a", query="hi", settings=settings)
    for number, turn in enumerate(turns, 1):
        span = run.model_call(messages, round=number)
        with span.current():
            span.notes.called(api="openai", url="http://127.0.0.1:9/v1/chat/completions", model="m", stream=False)
        span.ended(turn)
        if number == 1:
            tool = run.tool_call(call, spec, round=1)
            with tool.current():
                note_tool_transport(transport="pipe", protocol_version="2025-11-25")
            tool.ended(verdict="run", ok=True, is_error=False, text="hi", ms=1.0)
    run.ended(reason="success", ok=True, rounds=2, tool_calls=1, usage=Usage(2, 2, 4))

tracer = trace.get_tracer("floor")
ours()
finished = list(exporter.get_finished_spans())  # the same spans, attributes and all
exporter.clear()

def bare():
    # the SDK calls alone for the spans ``ours`` makes: same names, kinds, parents, attributes
    run = tracer.start_span("invoke_agent mcp_agent", kind=SpanKind.INTERNAL, attributes=RUN_START)
    parent = set_span_in_context(run)
    for name in ("chat m", "execute_tool echo__echo", "chat m"):
        span = tracer.start_span(name, context=parent, kind=KIND[name], attributes=START[name])
        span.set_attributes(END[name])
        span.end()
    run.set_attributes(RUN_END)
    run.end()

def split(span, started):
    attributes = dict(span.attributes)
    return ({k: v for k, v in attributes.items() if k in started}, {k: v for k, v in attributes.items() if k not in started})

STARTED = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.agent.name", "gen_ai.agent.description",
           "gen_ai.request.model", "mcp_agent.run.id", "server.address", "server.port", "mcp_agent.round",
           "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type", "gen_ai.tool.description",
           "mcp_agent.tool.server", "mcp_agent.tool.mcp_name"}
START, END, KIND = {}, {}, {}
for s in finished:
    START[s.name], END[s.name] = split(s, STARTED)
    KIND[s.name] = s.kind
RUN_START, RUN_END = START.pop("invoke_agent mcp_agent"), END.pop("invoke_agent mcp_agent")

def timed(fn):
    for _ in range(2000):
        fn()
    exporter.clear()
    times = []
    for n in range(N):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if n % 1000 == 0:
            exporter.clear()
    return round(statistics.median(times) * 1e6, 1)

found = {"spans": len(finished), "attributes": sum(len(s.attributes) for s in finished),
         "ours_us": timed(ours), "bare_sdk_us": timed(bare)}
found["ours_over_bare"] = round(found["ours_us"] / found["bare_sdk_us"], 2)
print(json.dumps(found))
"""


def sdk_floor(iterations: int) -> dict[str, Any]:
    return _python(FLOOR, iterations)


# ------------------------------------------------------------------------------------ the no-op cost


NOOP = r"""
import json, sys, time
sys.modules["opentelemetry.sdk"] = None  # a process without the SDK: the API alone
import anyio
from mcp_agent.config import parse_config
from mcp_agent.loop.agent import Agent
from mcp_agent.messages import Message, ToolCall, Usage
from mcp_agent.providers.fake import ScriptedProvider, text_turn, tool_turn
from mcp_agent.telemetry.base import NO_TRACE, TraceSettings, note_tool_transport
from mcp_agent.telemetry.setup import start_trace
from mcp_agent.tools.memory import MemoryToolSource

N = int(sys.argv[1])
settings = TraceSettings(request_model="m", endpoint="http://127.0.0.1:9/v1")
messages = [Message.user("hi")]
call = ToolCall("c1", "echo", {"text": "hi"})

def hooks():
    trace = start_trace(run_id="r", session_id="s", query="hi", settings=settings)
    assert trace is NO_TRACE
    for _ in range(2):
        span = trace.model_call(messages, round=1)
        with span.current():
            span.notes.called(api="openai", url="http://127.0.0.1:9/v1/chat/completions", model="m", stream=True)
        span.ended(None, error="x")
    tool = trace.tool_call(call, None, round=1)
    with tool.current():
        note_tool_transport(transport="pipe")
    tool.event("approval_requested", {"mcp_agent.approval.id": "a"})
    tool.ended(verdict="run", ok=True, is_error=False, text="hi", ms=1.0)
    trace.ended(reason="success", ok=True, usage=Usage(1, 1, 2))

for _ in range(1000):
    hooks()
start = time.perf_counter()
for _ in range(N):
    hooks()
hooks_us = (time.perf_counter() - start) / N * 1e6

config = parse_config({"llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"}}, environ={})
tools = MemoryToolSource()
async def echo(text: str) -> str:
    return text
tools.add("echo", echo, parameters={"type": "object", "properties": {"text": {"type": "string"}}})

async def runs(count):
    provider = ScriptedProvider()
    agent = Agent(provider, tools, config)
    for _ in range(count):
        provider.add(tool_turn(call, usage=Usage(1, 1, 2)), text_turn("hi", usage=Usage(1, 1, 2)))
        result = await agent.query("hi")
        assert result.ok
anyio.run(runs, 200)
runs_n = max(200, N // 10)
start = time.perf_counter()
anyio.run(runs, runs_n)
run_us = (time.perf_counter() - start) / runs_n * 1e6
print(json.dumps({"sdk_importable": False, "hooks_us_per_run": round(hooks_us, 2),
                  "in_process_run_us": round(run_us, 1),
                  "hooks_share_of_run_pct": round(hooks_us / run_us * 100, 2)}))
"""


def noop_cost(iterations: int) -> dict[str, Any]:
    return _python(NOOP, iterations)


def _python(code: str, count: int) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code, str(count)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_telemetry: a measurement failed:\n{done.stderr}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--calls", type=int, default=150, help="measured agent_query calls per round and mode"
    )
    parser.add_argument("--rounds", type=int, default=12, help="rounds, each with three fresh gateways")
    parser.add_argument(
        "--same", action="store_true", help="A/A: all three gateways untraced (the benchmark's noise floor)"
    )
    parser.add_argument("--warmup", type=int, default=30, help="unmeasured calls at the start of each round")
    parser.add_argument("--noop-iterations", type=int, default=20000, help="loops of the no-op hooks")
    parser.add_argument("--in-process-runs", type=int, default=2000, help="in-process runs per mode")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, default="off", help=argparse.SUPPRESS)
    parser.add_argument(
        "--processor",
        choices=PROCESSORS,
        default="batch",
        help="span processor of the traced gateways: batch (the gateway's own for OTLP, default) or simple",
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.mode, args.processor)
        return
    http = http_rounds(args.calls, args.rounds, args.warmup, args.processor, args.same)
    local = in_process(args.in_process_runs)
    noop = noop_cost(args.noop_iterations)
    floor = sdk_floor(args.noop_iterations)
    print(
        json.dumps(
            {
                "benchmark": "telemetry",
                "cpu_count": os.cpu_count(),
                "agent_query_http": {
                    "client": "mcp ClientSession over Streamable HTTP, one client, sequential calls",
                    "model": "zero-latency in-process (1 tool call + answer)",
                    "tool": "stdio echo (tests/servers/echo.py) via ToolHub",
                    "on": "untraced (--same: an A/A run)"
                    if args.same
                    else f"SDK TracerProvider, {args.processor} span processor, InMemorySpanExporter",
                    **http,
                },
                "in_process_run": {
                    "what": "Agent.query, scripted model (1 tool call + answer), in-memory tool; median",
                    **local,
                },
                "noop_without_sdk": noop,
                "sdk_floor": {
                    "what": "one run's 4 spans in a loop: our hooks, and the SDK calls alone for the same spans",
                    **floor,
                },
            },
            indent=2,
        )
    )
    failed = sum(row["failures"] for row in http["rounds"])
    if failed:
        sys.exit(f"bench_telemetry: {failed} calls did not get the expected answer")


if __name__ == "__main__":
    main()
