"""No ``approvals`` section: ``query`` denies a destructive call at once without a terminal
(saying how to allow it), and ``doctor`` names the tools that wait and why."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_agent.cli.doctor import destructive_gating
from mcp_agent.config import parse_config
from tests.fakes.model_server import FakeModelServer, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion

from .test_main import ROOT, _models, _tool_messages, run_cli

GATED = str(ROOT / "tests" / "servers" / "gated.py")


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        yield server


def _config(folder: Path, server: FakeModelServer, **extra: object) -> Path:
    config = {
        "llm": {"endpoint": server.base_url, "model": "m", "stream": False, "maxRetries": 0},
        "mcpServers": {
            "fs": {
                "command": sys.executable,
                "args": [GATED],
                "env": {"GATED_TOOLS": str(folder / "tools"), "GATED_DESTRUCTIVE": "write_file"},
            }
        },
        **extra,
    }
    (folder / "tools").write_text("write_file\nread_file\n")
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


def test_query_denies_a_destructive_call_at_once_without_an_approvals_section(tmp_path, model):
    model.enqueue(
        Reply.json(
            completion(
                content=None,
                calls=[Call("fs__write_file", {"text": "a"}), Call("fs__read_file", {"text": "b"})],
            )
        ),
        Reply.json(completion(content="Only read.")),
    )
    done = run_cli("query", "write and read", "--config", str(_config(tmp_path, model)))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Only read.\n"
    assert "mcp-agent: denied fs__write_file" in done.stderr and "--approve 'fs__write_file'" in done.stderr
    denied, read = _tool_messages(model.requests[1])
    assert denied.startswith("[DENIED: no terminal to ask on")
    assert "read_file" in read  # read-only: not gated


def test_query_runs_it_when_require_destructive_is_false(tmp_path, model):
    model.enqueue(
        Reply.json(completion(content=None, calls=[Call("fs__write_file", {"text": "a"})])),
        Reply.json(completion(content="Written.")),
    )
    path = _config(tmp_path, model, approvals={"requireDestructive": False})
    done = run_cli("query", "write", "--config", str(path))
    assert done.returncode == 0, done.stderr
    assert "denied" not in done.stderr
    [result] = _tool_messages(model.requests[1])
    assert "write_file" in result and "DENIED" not in result


def test_doctor_names_the_tools_that_wait(tmp_path, model):
    model.handler = _models
    done = run_cli("doctor", "--config", str(_config(tmp_path, model)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "[  ok] the model's calls of destructive tools wait for approval: fs__write_file "
        "(their annotations say destructiveHint; approvals.requireDestructive not set, so on by default)"
    ) in done.stdout


def test_the_doctor_line_for_each_setting() -> None:
    tools = [
        ("a", {"destructiveHint": True}),
        ("b", {}),
        ("c", {"destructiveHint": True, "readOnlyHint": True}),
    ]
    mark, line = destructive_gating(
        parse_config({"approvals": {"requireDestructive": True}}, environ={}), tools
    )
    assert mark == "ok" and line.endswith(
        ": a (their annotations say destructiveHint; approvals.requireDestructive true)"
    )
    mark, line = destructive_gating(
        parse_config({"approvals": {"requireDestructive": False}}, environ={}), tools
    )
    assert (mark, line) == (
        "warn",
        "destructive tools run without approval (approvals.requireDestructive false): a",
    )
    mark, line = destructive_gating(parse_config({}, environ={}), [("b", {})])
    assert mark == "ok" and line.startswith("no tool declares destructiveHint")
    many = [(f"t{i}", {"destructiveHint": True}) for i in range(10)]
    assert "t7 and 2 more" in destructive_gating(parse_config({}, environ={}), many)[1]
