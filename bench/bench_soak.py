"""Load and soak of a real gateway with a fault mix; prints one JSON object to stdout.

16 clients (by default) send queries for 60 s to an ``mcp-agent serve`` process, half over REST
and half over MCP (Streamable HTTP), while about 5 % of the work goes wrong on purpose:

- the model server answers 500 to 5 % of model calls (``maxRetries`` 1, so some runs end
  ``llm_error``);
- 5 % of queries call a tool whose server crashes mid-call (it is restarted with backoff, then
  given up on; its tools answer "temporarily unavailable");
- 5 % of clients leave in the middle of a query (the run is cancelled).

Every request must be answered or refused by design (a result with any termination reason, a
429 busy, a tool error): anything else (a 500, a dropped connection, a hang) is a violation.
Meanwhile a probe in a process of its own asks ``/api/v1/health`` ten times a second (latency
p50/p99/max, and the worst p99 of any 10 s window) and a sampler reads
the gateway's RSS and open descriptors once a second: ``drift`` compares the last tenth of the run
with the second tenth (the first is warm-up).

Each model call takes ``--model-ms`` (default 50, ±50 %), as a fast local model's would; with 0
the gateway is saturated by the benchmark's own clients on the same cores.

Run: ``.venv/bin/python bench/bench_soak.py [--seconds 60] [--clients 16] [--model-ms 50]``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.model_server import RecordedRequest, Reply, running_model_server  # noqa: E402
from tests.fakes.openai_shapes import Call, completion  # noqa: E402
from tests.gateway.e2e import rule_reply  # noqa: E402

SERVERS = ROOT / "tests" / "servers"
FAULT = 0.05
MODEL_SECONDS = [0.05]


def model_reply(request: RecordedRequest) -> Reply:
    """The e2e rules, plus ``crash`` (calls the crashing tool) and a 500 on 5 % of model calls;
    each model call takes ``--model-ms`` (±50 %)."""
    delay = MODEL_SECONDS[0] * random.uniform(0.5, 1.5)
    if request.path.endswith("/chat/completions"):
        if random.random() < FAULT:
            return Reply.json({"error": {"message": "overloaded (injected)"}}, status=500, delay=delay)
        messages = request.json["messages"]
        if messages[-1]["role"] == "user" and messages[-1]["content"] == "crash":
            calls = [Call("crashes__crash", {"code": 3}, id="crash")]
            return Reply.json(completion(content=None, calls=calls), delay=delay)
    return dataclasses.replace(rule_reply(request), delay=delay)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(folder: Path, model_url: str) -> Path:
    config = {
        "llm": {
            "endpoint": model_url,
            "model": "rule-model",
            "provider": "openai",
            "stream": False,
            "maxRetries": 1,
        },
        "limits": {"maxRounds": 4, "toolTimeoutSeconds": 10, "timeoutSeconds": 30},
        "mcpServers": {
            "echo": {"command": sys.executable, "args": [str(SERVERS / "echo.py")]},
            "slow": {"command": sys.executable, "args": [str(SERVERS / "slow.py")]},
            "crashes": {"command": sys.executable, "args": [str(SERVERS / "crashes.py")]},
        },
        "gateway": {"maxConcurrentQueries": 16, "maxQueuedQueries": 64, "queueTimeoutSeconds": 10},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Soak:
    def __init__(self, url: str, seconds: float, pid: int) -> None:
        self.url = url
        self.seconds = seconds
        self.process = psutil.Process(pid)
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.violations: list[str] = []
        self.health_ms: list[tuple[float, float]] = []
        self.resources: list[tuple[float, int, int]] = []
        self.start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def done(self) -> bool:
        return self.elapsed() >= self.seconds

    async def health(self) -> None:
        """Probe health from a process of its own, so the clients' load here does not skew it."""
        probe = await anyio.run_process(
            [sys.executable, __file__, "--probe", self.url, "--seconds", str(self.seconds)], check=False
        )
        for line in probe.stdout.decode().splitlines():
            at, ms, status = json.loads(line)
            if status == 200:
                self.health_ms.append((at, ms))
            else:
                self.violations.append(f"health: {status}")

    async def sample(self) -> None:
        while not self.done():
            with self.process.oneshot():
                self.resources.append(
                    (self.elapsed(), self.process.memory_info().rss, self.process.num_fds())
                )
            await anyio.sleep(1)

    def query_text(self) -> str:
        roll = random.random()
        if roll < FAULT:
            return "crash"
        if roll < 0.5:
            return f"echo soak {random.randrange(10**6)}"
        return f"plain {random.randrange(10**6)}"

    @staticmethod
    def kind(query: str) -> str:
        return "crash tool" if query == "crash" else query.split()[0]

    async def rest_client(self) -> None:
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
            while not self.done():
                if random.random() < FAULT:  # leave in the middle of a query
                    with anyio.move_on_after(random.uniform(0.05, 0.3)):
                        await http.post("/api/v1/query", json={"query": "sleep 5"})
                    self.outcomes["rest: client left"] += 1
                    continue
                query = self.query_text()
                try:
                    response = await http.post("/api/v1/query", json={"query": query})
                except httpx.HTTPError as exc:
                    self.violations.append(f"rest: {exc!r}")
                    continue
                if response.status_code == 200:
                    self.outcomes[f"rest {self.kind(query)}: {response.json()['termination_reason']}"] += 1
                elif response.status_code == 429:
                    self.outcomes["rest: busy"] += 1
                else:
                    self.violations.append(f"rest: {response.status_code} {response.text[:200]}")

    async def mcp_client(self) -> None:
        while not self.done():
            try:
                async with (
                    httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http,
                    streamable_http_client(f"{self.url}/mcp", http_client=http) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    for _ in range(20):
                        if self.done():
                            break
                        if random.random() < FAULT:  # leave in the middle: the session ends below
                            with anyio.move_on_after(random.uniform(0.05, 0.3)):
                                await session.call_tool("agent_query", {"query": "sleep 5"})
                            self.outcomes["mcp: client left"] += 1
                            break
                        query = self.query_text()
                        result = await session.call_tool("agent_query", {"query": query})
                        text = result.content[0].text if result.content else ""
                        if result.structured_content:
                            reason = result.structured_content["termination_reason"]
                            self.outcomes[f"mcp {self.kind(query)}: {reason}"] += 1
                        elif text.startswith("busy"):
                            self.outcomes["mcp: busy"] += 1
                        else:
                            self.violations.append(f"mcp: unexpected answer {text[:200]}")
            except Exception as exc:
                self.violations.append(f"mcp: {exc!r}")

    def report(self) -> dict[str, Any]:
        latencies = [ms for _, ms in self.health_ms]
        tenth = self.seconds / 10

        def window(low: float, high: float) -> tuple[float, float]:
            rows = [(rss, fds) for at, rss, fds in self.resources if low <= at < high]
            if not rows:
                return 0.0, 0.0
            return statistics.mean(r for r, _ in rows) / 2**20, statistics.mean(f for _, f in rows)

        early_rss, early_fds = window(tenth, 2 * tenth)
        late_rss, late_fds = window(9 * tenth, self.seconds + 1)
        answered = sum(self.outcomes.values())
        return {
            "seconds": self.seconds,
            "requests_answered_or_refused_by_design": answered,
            "violations": len(self.violations),
            "violation_samples": self.violations[:5],
            "outcomes": dict(self.outcomes.most_common()),
            "health": {
                "samples": len(latencies),
                "p50_ms": round(percentile(latencies, 0.5), 2),
                "p99_ms": round(percentile(latencies, 0.99), 2),
                "worst_10s_window_p99_ms": round(
                    max(
                        (
                            percentile([ms for at, ms in self.health_ms if start <= at < start + 10], 0.99)
                            for start in range(0, int(self.seconds), 10)
                        ),
                        default=0,
                    ),
                    2,
                ),
                "max_ms": round(max(latencies, default=0), 2),
            },
            "rss_mb": {
                "second_tenth": round(early_rss, 1),
                "last_tenth": round(late_rss, 1),
                "max": round(max((r for _, r, _ in self.resources), default=0) / 2**20, 1),
            },
            "open_fds": {
                "second_tenth": round(early_fds, 1),
                "last_tenth": round(late_fds, 1),
                "max": max((f for _, _, f in self.resources), default=0),
            },
        }


async def soak(url: str, pid: int, seconds: float, clients: int) -> dict[str, Any]:
    run = Soak(url, seconds, pid)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.health)
        tg.start_soon(run.sample)
        for index in range(clients):
            tg.start_soon(run.rest_client if index % 2 == 0 else run.mcp_client)
    return run.report()


def probe(url: str, seconds: float) -> None:
    """``--probe`` mode: GET health ten times a second; one JSON line each: [t, ms, status]."""
    start = time.monotonic()
    with httpx.Client(base_url=url, timeout=10) as http:
        while (at := time.monotonic() - start) < seconds:
            began = time.perf_counter()
            try:
                status = http.get("/api/v1/health").status_code
            except httpx.HTTPError as exc:
                status = repr(exc)
            print(json.dumps([at, (time.perf_counter() - began) * 1000, status]), flush=True)
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--model-ms", type=float, default=50, help="time one model call takes (±50 %%)")
    args = parser.parse_args()
    if args.probe:
        probe(args.probe, args.seconds)
        return
    MODEL_SECONDS[0] = args.model_ms / 1000
    random.seed(7)
    with tempfile.TemporaryDirectory() as folder, running_model_server() as model:
        model.handler = model_reply
        config = write_config(Path(folder), model.base_url)
        port = free_port()
        log = Path(folder) / "gateway.log"
        with log.open("wb") as errors:
            gateway = subprocess.Popen(
                [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=errors,
                cwd=str(ROOT),
                env={**os.environ, "MCP_AGENT_STATE_DIR": str(Path(folder) / "state")},
            )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/api/v1/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the gateway did not start:\n" + log.read_text()[-2000:])
                time.sleep(0.1)
            report = anyio.run(soak, url, gateway.pid, args.seconds, args.clients)
            report["gateway_log_tracebacks"] = log.read_text().count("Traceback")
        finally:
            gateway.send_signal(signal.SIGTERM)
            try:
                report_exit = gateway.wait(15)
            except subprocess.TimeoutExpired:
                gateway.kill()
                report_exit = -9
    report["gateway_exit_code"] = report_exit
    report["model_ms"] = args.model_ms
    report["clients"] = args.clients
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
