"""Running the agent for the tier: in-process (``open_agent``) or as the CLI a user runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from mcp_agent.assembly import open_agent
from mcp_agent.events import ModelCallEnded, RecordingSink, ToolCallEnded
from mcp_agent.loop.result import RunResult

from .servers import REAL, RealServer, free_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    """One run: its result and every event it emitted."""

    result: RunResult
    sink: RecordingSink

    @property
    def structured(self) -> dict[str, Any]:
        return self.result.to_structured()

    @property
    def model_calls(self) -> list[ModelCallEnded]:
        return self.sink.of(ModelCallEnded)

    @property
    def tool_calls(self) -> list[ToolCallEnded]:
        return self.sink.of(ToolCallEnded)


async def run_agent(config: Path, *questions: str, session_id: str | None = None) -> list[Outcome]:
    """Ask ``questions`` one after another on one Agent (one provider: what it learns, it keeps)."""
    outcomes = []
    async with open_agent(config) as agent:
        for question in questions:
            sink = RecordingSink()
            result = await agent.query(question, events=sink, session_id=session_id)
            outcomes.append(Outcome(result, sink))
    return outcomes


def cli(*args: str, config: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python -m mcp_agent ARGS --config CONFIG`` as a user runs it (from the repository root)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "mcp_agent", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        check=False,
    )


@contextmanager
def serving(config: Path, startup: float = 60) -> Iterator[str]:
    """``mcp-agent serve`` on a free port for the block; yields its base URL once health answers."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    log = config.with_name(f"serve-{port}.log")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup
        while True:
            assert process.poll() is None, f"serve exited:\n{log.read_text(errors='replace')[-3000:]}"
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"serve did not answer health within {startup:g} s"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def query_json(question: str, config: Path) -> tuple[int, dict[str, Any], str]:
    """``mcp-agent query --json``: exit code, the structured result, stderr."""
    done = cli("query", question, "--json", "--quiet", config=config)
    try:
        data = json.loads(done.stdout)
    except ValueError as exc:
        raise AssertionError(
            f"query --json printed no JSON ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        ) from exc
    return done.returncode, data, done.stderr


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages", []) if m.get("role") == "tool"]


def assistant_calls(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c for m in body.get("messages", []) if m.get("role") == "assistant" for c in m.get("tool_calls") or []
    ]


def cap_of(body: dict[str, Any]) -> int | None:
    value = body.get("max_tokens", body.get("max_completion_tokens"))
    return value if isinstance(value, int) else None


def offered(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


def names(calls: Sequence[Any]) -> list[str]:
    return [c.name for c in calls]


def run_bench(
    script: str, server: RealServer, args: Sequence[str], *, timeout: float, figures: str
) -> dict[str, Any]:
    """``bench/SCRIPT --endpoint … --model … ARGS`` against ``server``: its one JSON object, also
    kept (with the server's name and the wall time) in ``.real/logs/FIGURES.json``."""
    started = time.monotonic()
    argv = [
        sys.executable,
        str(ROOT / "bench" / script),
        "--endpoint",
        server.base_url,
        "--model",
        server.model_id,
    ]
    done = subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n{server.name}:\n{server.log_tail()}"
    result: dict[str, Any] = json.loads(done.stdout)  # ONE object: anything else on stdout fails here
    (REAL / "logs").mkdir(parents=True, exist_ok=True)
    kept = {"server": server.name, "wall_seconds": round(seconds, 1), **result}
    (REAL / "logs" / f"{figures}.json").write_text(json.dumps(kept, indent=2) + "\n")
    return result
