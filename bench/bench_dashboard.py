"""Benchmark of the dashboard's first paint with 1,000 stored runs; prints one JSON object.

Fills a SQLite state with ``--runs`` finished run records (each with a small timeline: two model
calls and a tool call, as a real echo run has), serves a real gateway on it (``mcp-agent serve``,
a model endpoint that does not answer and no tool servers: the page only reads), and opens the
dashboard ``--repeat`` times in a fresh headless Chromium page each, reading from the
Performance API:

- ``first_paint_ms`` and ``first_contentful_paint_ms``: the browser's ``paint`` entries (the
  target: FCP ≤ 300 ms with 1,000 stored runs);
- ``runs_rendered_ms``: the page's own ``runs-rendered`` mark, set when the first page of the
  run list (50 rows, from ``GET /api/v1/runs``) is in the document;
- ``load_event_ms``: ``loadEventEnd`` of the navigation.

Each is reported as median and max over the repeats. Chromium is Debian's ``chromium`` (or
Playwright's own build); Playwright for Python is needed (``pip install playwright``).

Run: ``.venv/bin/python bench/bench_dashboard.py [--runs 1000] [--repeat 15]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._gateway import GatewayProcess, free_port  # noqa: E402
from mcp_agent.messages import Usage  # noqa: E402
from mcp_agent.state import open_state  # noqa: E402
from mcp_agent.state.records import RunRecord  # noqa: E402

REASONS = ["success"] * 8 + ["max_rounds", "llm_error"]


def _record(i: int, now: float) -> RunRecord:
    started = now - 3600 * 24 + i * (3600 * 24 / 1000)
    elapsed = 200.0 + (i * 37) % 1800
    timeline = (
        {
            "kind": "model",
            "round": 1,
            "start_ms": 1.0,
            "ms": elapsed * 0.3,
            "ok": True,
            "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140},
            "model": "m",
            "finish_reason": "tool_calls",
            "tool_calls": ["echo__echo"],
            "error": "",
        },
        {
            "kind": "tool",
            "round": 1,
            "call_id": f"c{i}",
            "name": "echo__echo",
            "start_ms": elapsed * 0.31,
            "ms": elapsed * 0.3,
            "tool_ms": elapsed * 0.3,
            "arguments": json.dumps({"text": f"run {i}"}),
            "verdict": "run",
            "ok": True,
            "error": "",
            "preview": f"run {i}",
        },
        {
            "kind": "model",
            "round": 2,
            "start_ms": elapsed * 0.62,
            "ms": elapsed * 0.38,
            "ok": True,
            "usage": {"prompt_tokens": 160, "completion_tokens": 30, "total_tokens": 190},
            "model": "m",
            "finish_reason": "stop",
            "tool_calls": [],
            "error": "",
        },
    )
    return RunRecord(
        f"run{i:06d}",
        caller="local",
        query=f"echo run number {i} " + "some words " * 8,
        started=started,
        ended=started + elapsed / 1000,
        termination_reason=REASONS[i % len(REASONS)],
        answer=f"echo__echo said: run {i}",
        usage=Usage(280, 50, 330),
        rounds=2,
        elapsed_ms=elapsed,
        tool_calls=({"name": "echo__echo", "ok": True, "ms": elapsed * 0.3},),
        model="m",
        timeline=timeline,
    )


async def _fill(path: Path, runs: int) -> None:
    state = await open_state(f"sqlite:///{path}")
    try:
        now = time.time()
        for i in range(runs):
            record = _record(i, now)
            await state.runs.begin(record)
            await state.runs.end(record)
    finally:
        await state.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "state.db"
        anyio.run(_fill, db, args.runs)
        config = {
            "llm": {"endpoint": f"http://127.0.0.1:{free_port()}/v1", "model": "m", "provider": "openai"},
            "mcpServers": {},
            "state": {"url": f"sqlite:///{db}"},
        }
        (folder / "agent.json").write_text(json.dumps(config))
        port = free_port()
        gateway = GatewayProcess(
            ["-m", "mcp_agent", "serve", "--config", str(folder / "agent.json"), "--port", str(port)],
            port=port,
            env={**os.environ, "MCP_AGENT_STATE_DIR": tmp},
            quiet=True,
            cwd=ROOT,
        )
        url = gateway.url + "/"
        try:
            gateway.wait_ready()
            results: dict[str, list[float]] = {"fp": [], "fcp": [], "runs": [], "load": []}
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=shutil.which("chromium"), headless=True, args=["--no-sandbox"]
                )
                for attempt in range(args.repeat + 1):
                    page = browser.new_page()
                    page.goto(url)
                    page.wait_for_function(
                        "performance.getEntriesByName('runs-rendered').length > 0", timeout=60_000
                    )
                    figures: dict[str, Any] = page.evaluate(
                        """() => {
                          const paint = Object.fromEntries(performance.getEntriesByType('paint').map(e => [e.name, e.startTime]));
                          const nav = performance.getEntriesByType('navigation')[0];
                          return { fp: paint['first-paint'], fcp: paint['first-contentful-paint'],
                                   runs: performance.getEntriesByName('runs-rendered')[0].startTime,
                                   load: nav.loadEventEnd, rows: document.querySelectorAll('#runs tr.run').length };
                        }"""
                    )
                    page.close()
                    if attempt == 0:  # warm-up: the first page of a fresh browser
                        continue
                    for key in results:
                        results[key].append(float(figures[key]))
                browser.close()
        finally:
            gateway.stop(timeout=30)

    def summary(values: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(values), 1), "max": round(max(values), 1)}

    print(
        json.dumps(
            {
                "bench": "dashboard",
                "stored_runs": args.runs,
                "first_page_rows": figures["rows"],
                "repeats": args.repeat,
                "first_paint_ms": summary(results["fp"]),
                "first_contentful_paint_ms": summary(results["fcp"]),
                "runs_rendered_ms": summary(results["runs"]),
                "load_event_ms": summary(results["load"]),
                "target_fcp_ms": 300,
                "chromium": subprocess.run(
                    ["chromium", "--version"], capture_output=True, text=True
                ).stdout.strip(),
                "cpus": os.cpu_count(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
