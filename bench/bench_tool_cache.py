"""Benchmark of a start that meets a hostile tool cache file (issue 20); prints one JSON object.

Each case writes the cache file of one lazy server (``tests/servers/gated.py``, two tools), then
runs ``mcp-agent tools --json`` (a whole process: it reads every cache file, and starts the
server when its cached list is not usable) and reports its wall milliseconds, its peak RSS
(``ru_maxrss`` of the child), its exit code, the tools it listed and whether it warned about the
file by name:

- ``warm``: the file as the server's own start wrote it (the baseline of a usable cache);
- ``cold``: no file (the baseline of a start that has to start the server: what each case below
  should cost once its file is refused);
- ``tools_1m``: a valid-looking entry (the right key) listing 1,000,000 tools (~45 MB);
- ``deep_100k``: ``[`` 100,000 deep (then ``]``);
- ``deep_900_in_schema``: a valid entry whose one tool's schema nests 900 levels (below
  Python's recursion limit, so the parser takes it);
- ``junk_64mb``: 64 MB of one JSON string;
- ``containers_4mb``: just under the size cap, ``[[],[],…]``: about 1.4 million empty lists;
- ``containers_100k``: as many empty lists as the container cap lets through, the most objects a
  file that is parsed can make the parser build.

Run: ``.venv/bin/python bench/bench_tool_cache.py`` (about a minute; two minutes more without the
caps, when the 1M-tool start is killed at its deadline).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GATED = str(ROOT / "tests" / "servers" / "gated.py")
DEADLINE = 120.0
CASES = (
    "warm",
    "cold",
    "tools_1m",
    "deep_100k",
    "deep_900_in_schema",
    "junk_64mb",
    "containers_4mb",
    "containers_100k",
)


def write_config(folder: Path) -> Path:
    (folder / "tools.txt").write_text("echo\nshout\n")
    env = {"GATED_TOOLS": str(folder / "tools.txt")}
    config = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "none"},
        "mcpServers": {"g": {"command": sys.executable, "args": [GATED], "env": env, "lazy": True}},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


def run_tools(config: Path, state: Path) -> dict[str, Any]:
    """One ``mcp-agent tools --json``: wall time, peak RSS, exit code, output."""
    env = {**os.environ, "MCP_AGENT_STATE_DIR": str(state)}
    argv = [sys.executable, "-m", "mcp_agent", "tools", "--config", str(config), "--json"]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=ROOT)
        deadline = time.monotonic() + DEADLINE
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.005)
        wall_ms = (time.perf_counter() - start) * 1000
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    tools: list[str] = []
    with contextlib.suppress(ValueError, KeyError, TypeError):
        tools = [tool["exposed_name"] for tool in json.loads(stdout)["tools"]]
    return {
        "wall_ms": round(wall_ms),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "exit": process.returncode,
        "tools": tools,
        "stderr": stderr,
    }


def write_case(name: str, path: Path, key: str) -> None:
    """Write the file of case ``name`` (in this process: see ``main``)."""
    from mcp_agent.tools.cache import CACHE_VERSION, MAX_CONTAINERS

    def entry(tools: str) -> str:
        return f'{{"version":{CACHE_VERSION},"server":"g","key":"{key}","capabilities":{{}},"tools":{tools}}}'

    if name == "cold":
        path.unlink()
        return
    with path.open("w") as file:
        if name == "tools_1m":
            tools = ",".join(f'{{"name":"t{i}","inputSchema":{{"type":"object"}}}}' for i in range(1_000_000))
            file.write(entry(f"[{tools}]"))
        elif name == "deep_100k":
            file.write("[" * 100_000 + "]" * 100_000)
        elif name == "deep_900_in_schema":
            deep = "[" * 900 + "]" * 900
            file.write(entry(f'[{{"name":"echo","inputSchema":{{"type":"object","default":{deep}}}}}]'))
        elif name == "junk_64mb":
            file.write('"' + "x" * (64 << 20) + '"')
        elif name == "containers_4mb":
            file.write("[" + ",".join(["[]"] * ((4 << 20) // 3 - 1)) + "]")
        elif name == "containers_100k":
            file.write("[" + ",".join(["[]"] * (MAX_CONTAINERS - 1)) + "]")


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--write":  # a child that writes one case's file
        sys.path.insert(0, str(ROOT))
        write_case(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
        return
    sys.path.insert(0, str(ROOT))
    from mcp_agent.config import load_config
    from mcp_agent.tools.cache import ToolCache, cache_key

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config_path = write_config(folder)
        key = cache_key(load_config(config_path).servers()["g"])
        for name in CASES:
            state = folder / f"state-{name}"
            warmed = run_tools(config_path, state)  # the server's own start writes the file
            assert warmed["exit"] == 0, warmed
            path = ToolCache.of_state_dir(state).path("g")
            if name != "warm":  # written by a child, so that this process stays small: a child's
                # ru_maxrss counts what it was forked with
                subprocess.run([sys.executable, __file__, "--write", name, str(path), key], check=True)
            size = path.stat().st_size if path.exists() else 0
            result = run_tools(config_path, state)
            result["file_bytes"] = size
            stderr = result.pop("stderr")
            result["warned_by_name"] = str(path) in stderr
            result["error"] = next((line for line in stderr.splitlines() if "Error" in line), None)
            results[name] = result
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
