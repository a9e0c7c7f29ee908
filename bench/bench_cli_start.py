"""Benchmark of the CLI's start-up, whole processes; prints one JSON object to stdout.

Each case is run ``--runs`` times (after one warm-up run, so the files are in the page cache)
and reported as the median and p95 wall time in milliseconds, with the median CPU time (user +
system, of the process and its children: steadier than wall time on a busy shared machine),
next to a bare ``python -c pass`` (the interpreter's own floor on this machine):

- ``help``: ``mcp-agent --help`` (the target: at most 150 ms median on a 2-core machine);
- ``version``: ``mcp-agent --version`` (the same target);
- ``import``: ``python -c "import mcp_agent"``;
- ``tools_json``: ``mcp-agent tools --json`` on the bundled ``agent.json``, for information: it
  starts every bundled tool server and lists its tools, so its time is the servers' start-up;
  an instant answer needs the tool-list cache of issue 13.

The commands run as the console script does (``from mcp_agent.cli.main import main``), with this
checkout first on ``sys.path``. ``-X importtime`` shows where the time goes:
``python -X importtime -m mcp_agent --help 2>&1 >/dev/null | sort -t'|' -k2 -n | tail``.

Run: ``.venv/bin/python bench/bench_cli_start.py [--runs N] [--tools-runs N]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = "import sys; from mcp_agent.cli.main import main; sys.exit(main())"
"""What the installed ``mcp-agent`` script runs."""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", CONSOLE_SCRIPT, *args]


CASES: dict[str, list[str]] = {
    "python_floor": [sys.executable, "-c", "pass"],
    "help": _cli("--help"),
    "version": _cli("--version"),
    "import": [sys.executable, "-c", "import mcp_agent"],
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _once(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time of one run, in seconds."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=300)
    elapsed, used = time.perf_counter() - start, _cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{command[2:]} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed, used


def _summary(samples: list[tuple[float, float]]) -> dict[str, Any]:
    wall = sorted(elapsed for elapsed, _ in samples)
    p95 = wall[min(len(wall) - 1, max(0, round(len(wall) * 0.95) - 1))]
    return {
        "runs": len(wall),
        "median_ms": round(statistics.median(wall) * 1000, 1),
        "p95_ms": round(p95 * 1000, 1),
        "min_ms": round(wall[0] * 1000, 1),
        "cpu_median_ms": round(statistics.median(cpu for _, cpu in samples) * 1000, 1),
    }


def measure(command: list[str], runs: int, env: dict[str, str]) -> dict[str, Any]:
    _once(command, env)  # warm-up: the page cache, the .pyc files
    return _summary([_once(command, env) for _ in range(runs)])


def main(runs: int, tools_runs: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    results = {name: measure(command, runs, env) for name, command in CASES.items()}
    if tools_runs:
        tools = _cli("tools", "--json", "--config", str(ROOT / "agent.json"))
        results["tools_json"] = measure(tools, tools_runs, env)
    return {
        "benchmark": "cli_start",
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": sys.version.split()[0],
        "target_ms": 150,
        **results,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tools-runs", type=int, default=5, help="runs of tools --json (0: skip it)")
    options = parser.parse_args()
    print(json.dumps(main(options.runs, options.tools_runs)))
