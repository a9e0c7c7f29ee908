"""Start-up loads only what it uses: ``import mcp_agent``, ``--help`` and ``--version`` load no
third-party package at all, ``tools`` loads neither the gateway nor the agent loop, and on a warm
tool cache not even the MCP SDK.

Behavioural checks on fresh interpreters (what ``sys.modules`` holds afterwards), not timings:
``bench/bench_cli_start.py`` measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "mcp",
    "mcp_types",
    "httpx",
    "pydantic",
    "pydantic_core",
    "anyio",
    "starlette",
    "uvicorn",
    "jsonschema",
)
"""Packages that cost start-up time (the MCP SDK alone is about a second)."""

REPORT = """
import json, sys
def report(code):
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in HEAVY or name.startswith("mcp_agent."))
    sys.__stderr__.write("\\nLOADED " + json.dumps({"code": code, "loaded": loaded}) + "\\n")
HEAVY = set(%r)
"""


def _loaded(body: str, *, env: dict[str, str] | None = None) -> tuple[int, list[str], str, str]:
    """Run ``body`` in a fresh interpreter that calls ``report(code)``; what it had loaded."""
    done = subprocess.run(
        [sys.executable, "-c", REPORT % (HEAVY,) + body],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    head, _, line = done.stderr.rpartition("\nLOADED ")
    assert line, f"no report (exit {done.returncode}):\n{done.stderr}"
    report = json.loads(line)
    return report["code"], report["loaded"], done.stdout, head


def _cli(*args: str) -> str:
    return (
        "from mcp_agent.cli.main import main\n"
        "try:\n"
        f"    code = main({list(args)!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "report(code)\n"
    )


def test_import_mcp_agent_loads_no_third_party_package() -> None:
    _, loaded, _, _ = _loaded("import mcp_agent\nassert mcp_agent.__version__\nreport(0)\n")
    assert loaded == ["mcp_agent._version"]  # one line: the version string


def test_a_public_name_loads_what_it_needs_and_no_more() -> None:
    _, loaded, _, _ = _loaded("from mcp_agent import ConfigError, Message\nreport(0)\n")
    assert not {name.split(".")[0] for name in loaded} & set(HEAVY)
    _, loaded, _, _ = _loaded("from mcp_agent import ToolHub\nreport(0)\n")
    assert "mcp" in loaded  # a name that needs the SDK loads it


@pytest.mark.parametrize("option", ["--help", "--version"])
def test_help_and_version_load_nothing_heavy(option: str) -> None:
    code, loaded, out, _ = _loaded(_cli(option))
    assert code == 0 and ("usage: mcp-agent" in out if option == "--help" else out == "mcp-agent 0.1.0\n")
    heavy = sorted({name.split(".")[0] for name in loaded} & set(HEAVY))
    assert heavy == [], f"{option} loaded {heavy}"
    ours = [name for name in loaded if name.startswith("mcp_agent.")]
    allowed = {
        "mcp_agent._version",
        "mcp_agent.cli",
        "mcp_agent.cli.main",
        "mcp_agent.telemetry",
        "mcp_agent.telemetry.logs",
        "mcp_agent._redact",
        "mcp_agent._plural",  # one pure function, no imports
    }
    assert set(ours) <= allowed, ours


def test_help_of_a_command_loads_nothing_heavy() -> None:
    code, loaded, out, _ = _loaded(_cli("query", "--help"))
    assert code == 0 and "--session" in out
    assert not {name.split(".")[0] for name in loaded} & set(HEAVY)


def _tools_config(tmp_path: Path, servers: dict[str, object]) -> Path:
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps({"llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"}, "mcpServers": servers})
    )
    return config


def test_tools_on_a_warm_cache_loads_no_mcp_sdk_nor_the_hub(tmp_path: Path) -> None:
    echo = {"command": sys.executable, "args": [str(ROOT / "tests" / "servers" / "echo.py")]}
    config = _tools_config(tmp_path, {"echo": echo, "off": {**echo, "disabled": True}})
    env = {"MCP_AGENT_STATE_DIR": str(tmp_path / "state")}
    # a cold cache: the hub starts the server (and caches its list)
    code, loaded, out, _ = _loaded(_cli("tools", "--json", "--config", str(config)), env=env)
    assert code == 0 and "mcp_agent.tools.hub" in loaded and "mcp" in loaded
    started = json.loads(out)
    # warm: the same tools, read from the cache alone
    code, loaded, out, _ = _loaded(_cli("tools", "--json", "--config", str(config)), env=env)
    cached = json.loads(out)
    assert code == 0 and cached["tools"] == started["tools"] and len(cached["tools"]) == 2
    assert cached["servers"] == [
        {
            "name": "echo",
            "status": "idle",
            "error": None,
            "tool_count": 2,
            "startup_ms": None,
            "from_cache": True,
            "protocol_version": "2026-07-28",  # the era it spoke at its start, cached
        },
        {
            "name": "off",
            "status": "disabled",
            "error": None,
            "tool_count": 0,
            "startup_ms": None,
            "from_cache": False,
            "protocol_version": None,
        },
    ]
    assert not [name for name in loaded if name.split(".")[0] in ("mcp", "mcp_types")]
    assert not [
        name
        for name in loaded
        if name.startswith(("mcp_agent.tools.hub", "mcp_agent.tools.server.connection"))
    ]
    assert not [name for name in loaded if name.startswith(("mcp_agent.gateway", "mcp_agent.loop"))]
    # no model client: tools never talks to the model server (it only reads the provider's dialect)
    assert [name for name in loaded if name.startswith("mcp_agent.providers.")] == [
        "mcp_agent.providers.servers",
        "mcp_agent.providers.servers.endpoints",
    ]
    # --fresh starts the servers
    code, loaded, out, _ = _loaded(_cli("tools", "--json", "--fresh", "--config", str(config)), env=env)
    assert code == 0 and "mcp_agent.tools.hub" in loaded and json.loads(out)["servers"][0]["status"] == "up"


def test_tools_with_a_server_not_cached_opens_the_hub_but_not_the_gateway_nor_the_loop(
    tmp_path: Path,
) -> None:
    config = _tools_config(
        tmp_path, {"gone": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}}
    )
    env = {"MCP_AGENT_STATE_DIR": str(tmp_path / "state")}
    code, loaded, out, _ = _loaded(_cli("tools", "--json", "--config", str(config)), env=env)
    assert code == 0 and json.loads(out)["servers"][0]["status"] == "failed"
    assert "mcp_agent.tools.hub" in loaded
    assert not [name for name in loaded if name.startswith(("mcp_agent.gateway", "mcp_agent.loop"))]
    assert [name for name in loaded if name.startswith("mcp_agent.providers.")] == [
        "mcp_agent.providers.servers",
        "mcp_agent.providers.servers.endpoints",
    ]
