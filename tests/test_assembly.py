"""``open_agent``: the one place that wires concrete parts into an Agent (no tool servers here;
an unreachable model server), and the loop that knows only protocols."""

from __future__ import annotations

import ast
import inspect
import json
import logging
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mcp_agent.assembly import open_agent
from mcp_agent.config import parse_config
from mcp_agent.events import RecordingSink, RunEnded
from mcp_agent.exceptions import ConfigError
from mcp_agent.loop.approvals import ApprovalQueue, GlobGate
from mcp_agent.loop.result import TerminationReason as R
from mcp_agent.state.memory import MemorySessionStore, MemoryState
from mcp_agent.state.records import StateLimits

LOOP = Path(__file__).resolve().parent.parent / "mcp_agent" / "loop"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _offline_config(**more: object) -> dict:
    return {
        "llm": {
            "endpoint": f"http://127.0.0.1:{_free_port()}/v1",
            "model": "m",
            "maxRetries": 0,
            "connectTimeoutSeconds": 2,
            "stream": False,
        },
        "systemPrompt": "sys",
        "limits": {"maxRounds": 2},
        **more,
    }


async def test_open_agent_wires_the_real_parts_and_reports_an_unreachable_model(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(_offline_config()))
    with anyio.fail_after(20):
        async with open_agent(path) as agent:
            assert list(agent.tools.list_tools()) == []
            assert agent.config.limits.max_rounds == 2
            result = await agent.query("hello?")
    assert result.termination_reason in (R.LLM_ERROR, R.TERMINAL_ERROR)
    assert "127.0.0.1" in result.detail or "connect" in result.detail.lower()


async def test_open_agent_accepts_a_config_object() -> None:
    config = parse_config(_offline_config())
    with anyio.fail_after(20):
        async with open_agent(config) as agent:
            assert agent.config is config


async def test_open_agent_with_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        async with open_agent(tmp_path / "nope.json"):
            pass


async def test_open_agent_hands_the_given_parts_to_the_agent(tmp_path: Path) -> None:
    state = MemoryState(StateLimits())
    sessions = MemorySessionStore()
    approvals = ApprovalQueue(5)
    gate = GlobGate(["*"])
    sink = RecordingSink()
    record = tmp_path / "runs" / "run.jsonl"
    config = parse_config(_offline_config())
    with anyio.fail_after(20):
        async with open_agent(
            config,
            state=state,
            record=record,
            record_children=False,
            sessions=sessions,
            approvals=approvals,
            events=sink,
            gate=gate,
        ) as agent:
            assert agent.state is state and agent.runs is state.runs
            assert agent.sessions is sessions and agent.approvals is approvals
            assert agent.record == record
            await agent.query("hello?")
    assert sink.of(RunEnded)  # the agent's own sink saw the run
    assert record.exists()  # and the run was recorded
    [run] = await state.runs.list()
    assert run.query == "hello?"


async def test_a_require_glob_that_matches_no_tool_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    config = parse_config(_offline_config(approvals={"require": ["nothing__here"]}))
    with caplog.at_level(logging.WARNING), anyio.fail_after(20):
        async with open_agent(config, record_children=False):
            pass
    assert any("approvals.require: 'nothing__here' matches no tool" in r.getMessage() for r in caplog.records)


def test_open_agent_takes_explicit_keywords_only() -> None:
    """Typed keywords, no ``**options``: the gateway finds ``state`` in the signature."""
    parameters = inspect.signature(open_agent).parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    assert [name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY] == [
        "state",
        "record",
        "record_children",
        "hold_starts",
        "sessions",
        "approvals",
        "events",
        "gate",
        "pins",
    ]


def test_the_loop_imports_no_concrete_part() -> None:
    """``loop/`` knows the Provider, ToolSource and store protocols; the concretes are wired in
    ``assembly.py`` (and replay stands above the loop)."""
    concrete = (
        "mcp_agent.providers.factory",
        "mcp_agent.tools.hub",
        "mcp_agent.state.sqlite",
        "mcp_agent.state.redis",
        "mcp_agent.replay",
        "mcp_agent.assembly",
        "mcp_agent.gateway",
        "mcp_agent.cli",
    )
    found = []
    for path in sorted(LOOP.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = ["mcp_agent", "loop"][: 2 - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
                names = [target] + [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom | ast.Import):
                names = (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                )
            else:
                continue
            found += [f"{path.name}: {name}" for name in names if name.startswith(concrete)]
    assert found == []


def test_importing_the_loop_loads_no_concrete_part() -> None:
    code = (
        "import sys, mcp_agent.loop.agent, mcp_agent.loop.run\n"
        "print(sorted(n for n in sys.modules if n.startswith(('mcp_agent.providers.factory', "
        "'mcp_agent.tools.hub', 'mcp_agent.state.sqlite', 'mcp_agent.state.redis', 'mcp_agent.replay', "
        "'mcp_agent.assembly', 'mcp_agent.gateway'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
