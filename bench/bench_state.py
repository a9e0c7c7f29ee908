"""What keeping state costs: ``agent_query`` with a session per store, and a soak on SQLite.

Two measures, printed as one JSON object:

1. ``latency``: ``agent_query`` over Streamable HTTP continuing a conversation (``session_id``),
   with the state in memory and in each ``--state-url`` (default: a SQLite file in a temporary
   folder). Each store gets a gateway process of its own (``serve()`` with a zero-latency
   in-process model that answers at once, no tools, so the store's share stands out), and
   the stores take turns in blocks (A B A B …) so drift on the machine hits them alike, in
   ``--rounds`` rounds of fresh processes (the luck of one process does not decide). One
   client makes the calls one after another, over 16 conversations in turn. ``delta_p50_ms``
   is each store's p50 minus memory's (target: SQLite ≤ +1 ms, Redis ≤ +2 ms);
   ``gateway_cpu_ms_per_query`` is the gateway process's CPU time per call (user + system),
   which a busy machine does not skew the way it skews wall time.
2. ``at_cap``: in-process, each store holding ``--cap`` conversations of one owner at its caps
   (``sessions.maxSessions`` and ``maxSessionsPerOwner``, so each new conversation evicts the
   least recently used one): the median time to open a new conversation (``hold`` with a new id)
   next to the same store holding 10; and holding ``--cap`` of 8 owners at the total cap alone.
   About equal means eviction does not walk every session.
3. ``soak`` (SQLite only, ``--soak N``, default 2000): N session queries over REST (a new
   conversation every 20 turns) on one gateway whose state keeps at most ``--keep`` runs
   (``state.runs.maxCount``, default 200) and ``--max-sessions`` conversations
   (``sessions.maxSessions``, default 50); every 200 queries the database size (file + WAL) and
   the gateway's RSS are sampled. ``db_growth`` and ``rss_growth`` compare the last sample with
   the one at the middle: bounded means about 1.

Run: ``.venv/bin/python bench/bench_state.py [--calls 600] [--soak 2000] [--state-url URL ...]``
(``--state-url redis://127.0.0.1:6379/0`` adds a Redis row when a server runs there; ``--redis``
starts a ``redis-server`` of its own on a free loopback port, without persistence, and adds its
row). Scale-out (two gateways sharing Redis behind HAProxy) is ``bench/bench_scale.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gateway import GatewayProcess, free_port  # noqa: E402

CONVERSATIONS = 16
BLOCKS = 6


# ------------------------------------------------------------------------------------ the server side


class InstantModel:
    """A zero-latency Provider: answers every query at once, a short line."""

    async def complete(self, request: Any, on_delta: Any = None) -> Any:
        from mcp_agent.providers.fake import text_turn

        return text_turn(f"noted ({len(request.messages)} messages so far)")


def serve_main(url: str, port: int, keep: int, sessions: int) -> None:
    from contextlib import asynccontextmanager

    from mcp_agent.config import parse_config
    from mcp_agent.gateway.serve import serve
    from mcp_agent.loop.agent import Agent
    from mcp_agent.tools.memory import MemoryToolSource

    config = parse_config(
        {
            "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "instant"},
            "state": {"url": url, "runs": {"maxCount": keep}},
            "sessions": {"ttlSeconds": 600, "maxSessions": sessions},
            "gateway": {"maxConcurrentQueries": 64},
        }
    )

    @asynccontextmanager
    async def factory(config: Any, *, state: Any) -> Any:
        yield Agent(InstantModel(), MemoryToolSource(), config, state=state)  # type: ignore[arg-type]

    anyio.run(lambda: serve(config, port=port, factory=factory, handle_signals=True))


# ------------------------------------------------------------------------------------ the client side


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def start_gateway(url: str, keep: int = 10_000, sessions: int = 1000) -> GatewayProcess:
    """A gateway process serving with the state at ``url``; started, not waited for."""
    port = free_port()
    args = ["--serve", url, "--port", str(port), "--keep", str(keep), "--max-sessions", str(sessions)]
    return GatewayProcess([__file__, *args], port=port, quiet=True)


async def session_calls(base: str, calls: int) -> list[float]:
    """``calls`` agent_query calls over 16 conversations in turn; the seconds of each."""
    samples: list[float] = []
    async with streamable_http_client(f"{base}/mcp") as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        sessions: list[str] = []
        for _ in range(CONVERSATIONS):
            result = await client.call_tool("agent_query", {"query": "hello"})
            assert result.structured_content is not None, result
            sessions.append(result.structured_content["session_id"])
        for index in range(calls):
            arguments = {"query": f"question {index}", "session_id": sessions[index % CONVERSATIONS]}
            start = time.perf_counter()
            result = await client.call_tool("agent_query", arguments)
            samples.append(time.perf_counter() - start)
            if result.is_error:
                raise SystemExit(f"agent_query failed: {result.content}")
    return samples


def latency(urls: list[str], calls: int, rounds: int) -> dict[str, Any]:
    """``calls`` session queries per store, in ``rounds`` rounds of fresh gateway processes (two
    processes of one program differ by a few percent, by memory layout and hash seed: one round
    would lend one store's figure its process's luck)."""
    stores = list(dict.fromkeys(["memory://", *urls]))  # one gateway per store, each stopped
    samples: dict[str, list[float]] = {url: [] for url in stores}
    cpu: dict[str, float] = dict.fromkeys(stores, 0.0)
    for number in range(rounds):
        order = stores[number % len(stores) :] + stores[: number % len(stores)]  # which starts first rotates
        gateways = {url: start_gateway(url) for url in order}
        try:  # every gateway that started is stopped, also when another one did not start
            for gateway in gateways.values():
                gateway.wait_ready()
            for _ in range(BLOCKS):
                for url in stores:
                    process = psutil.Process(gateways[url].process.pid)
                    before = sum(process.cpu_times()[:2])
                    samples[url] += anyio.run(session_calls, gateways[url].url, calls // rounds // BLOCKS)
                    cpu[url] += sum(process.cpu_times()[:2]) - before
        finally:
            for gateway in gateways.values():
                gateway.stop(timeout=30)
    rows = {}
    memory_p50 = statistics.median(samples["memory://"]) * 1000
    for url, values in samples.items():
        p50 = statistics.median(values) * 1000
        rows[url.split("://")[0]] = {
            "url": url,
            "calls": len(values),
            "p50_ms": round(p50, 3),
            "p95_ms": round(percentile(values, 0.95) * 1000, 3),
            "delta_p50_ms": round(p50 - memory_p50, 3),
            "gateway_cpu_ms_per_query": round(
                cpu[url] * 1000 / (len(values) + rounds * BLOCKS * CONVERSATIONS), 3
            ),
        }
    return rows


def soak(folder: Path, queries: int, keep: int, sessions: int) -> dict[str, Any]:
    database = folder / "soak.db"
    gateway = start_gateway(f"sqlite:///{database}", keep=keep, sessions=sessions).wait_ready()
    process = psutil.Process(gateway.process.pid)
    samples: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        with httpx.Client(base_url=gateway.url, timeout=60) as http:
            session: str | None = None
            for index in range(1, queries + 1):
                if index % 20 == 1:
                    session = None  # a new conversation every 20 turns
                body: dict[str, Any] = {"query": f"soak question {index} " + "x" * 200}
                if session is not None:
                    body["session_id"] = session
                answer = http.post("/api/v1/query", json=body).json()
                if not answer.get("ok"):
                    raise SystemExit(f"query {index} failed: {answer}")
                session = answer["session_id"]
                if index % 200 == 0:
                    file, wal = database.stat().st_size, _size(Path(f"{database}-wal"))
                    samples.append(
                        {
                            "queries": index,
                            "db_bytes": file + wal,
                            "wal_bytes": wal,
                            "rss_bytes": process.memory_info().rss,
                        }
                    )
            runs = http.get("/api/v1/runs", params={"limit": 500}).json()["count"]
    finally:
        gateway.stop(timeout=30)
    middle, last = samples[len(samples) // 2], samples[-1]
    return {
        "queries": queries,
        "runs_kept": runs,
        "keep": keep,
        "max_sessions": sessions,
        "seconds": round(time.monotonic() - started, 1),
        "samples": samples,
        "db_growth": round(last["db_bytes"] / middle["db_bytes"], 3),
        "rss_growth": round(last["rss_bytes"] / middle["rss_bytes"], 3),
    }


async def _new_session_us(url: str, cap: int, opens: int, owners: int = 1) -> float:
    """The median time to open a new conversation in a store at its caps, holding ``cap``: of
    one owner at both caps, or of ``owners`` owners at the total cap alone (the owner holding
    the most loses its least recently used one)."""
    from mcp_agent.state import open_state
    from mcp_agent.state.records import StateLimits

    limits = StateLimits(max_sessions=cap, max_sessions_per_owner=cap if owners == 1 else 0)
    state = await open_state(url, limits=limits)
    try:
        for n in range(cap):
            async with state.sessions.hold(f"old-{cap}-{owners}-{n}", owner=f"o{n % owners}"):
                pass
        times = []
        for n in range(opens):
            start = time.perf_counter()
            async with state.sessions.hold(f"new-{cap}-{owners}-{n}", owner=f"o{n % owners}"):
                pass
            times.append(time.perf_counter() - start)
        return round(statistics.median(times) * 1e6, 1)
    finally:
        await state.aclose()


def at_cap(urls: list[str], cap: int, folder: Path) -> dict[str, Any]:
    found: dict[str, Any] = {"cap": cap}
    for index, url in enumerate(["memory://", *urls]):
        if url.startswith("sqlite"):  # a file of its own each time
            url = f"sqlite:///{folder}/at-cap-{index}-{{}}.db"
        small = anyio.run(_new_session_us, url.format("small"), 10, 200)
        large = anyio.run(_new_session_us, url.format("large"), cap, 200)
        owners = anyio.run(_new_session_us, url.format("owners"), cap, 200, 8)
        found[url.split(":")[0]] = {
            "us_at_10": small,
            f"us_at_{cap}": large,
            f"us_at_{cap}_8_owners": owners,
            "ratio": round(max(large, owners) / small, 2),
        }
    return found


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=600, help="session queries per store, all rounds")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of fresh gateway processes")
    parser.add_argument("--soak", type=int, default=2000)
    parser.add_argument(
        "--cap", type=int, default=2000, help="conversations held in the at_cap measure (0: skip)"
    )
    parser.add_argument("--keep", type=int, default=200, help="state.runs.maxCount in the soak")
    parser.add_argument("--max-sessions", type=int, default=50, help="sessions.maxSessions in the soak")
    parser.add_argument("--state-url", action="append", default=[], help="a store to compare with memory://")
    parser.add_argument("--redis", action="store_true", help="also a redis-server of its own on loopback")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_main(args.serve, args.port, args.keep, args.max_sessions)
        return
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        urls = args.state_url or [f"sqlite:///{folder}/bench.db"]
        if args.redis:
            if not shutil.which("redis-server"):
                raise SystemExit("--redis needs redis-server: sudo apt-get install -y redis-server")
            from tests.scale.infra import RedisServer

            redis = RedisServer(Path(folder), persist=False).start()
            stack.callback(redis.stop)
            urls.append(redis.url)
        report: dict[str, Any] = {"latency": latency(urls, args.calls, args.rounds)} if args.calls else {}
        if args.cap:
            report["at_cap"] = at_cap(urls, args.cap, Path(folder))
        if args.soak:
            report["soak"] = soak(Path(folder), args.soak, args.keep, args.max_sessions)
    report["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
