"""The CLI as a user runs it: real subprocesses, a fake model server, fixture tool servers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion, openai_stream

ROOT = Path(__file__).resolve().parent.parent
ECHO = str(ROOT / "tests" / "servers" / "echo.py")


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "mcp_agent", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def write_config(folder: Path, server: FakeModelServer | None, **extra: object) -> Path:
    config = {
        "llm": {"endpoint": server.base_url if server else "http://127.0.0.1:9/v1", "model": "m", "maxRetries": 0},
        "mcpServers": {"echo": {"command": sys.executable, "args": [ECHO]}},
        **extra,
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        yield server


def test_bad_config_exits_2_naming_the_path(tmp_path):
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"limits": {"maxRound": 3}}))
    for command in (["tools"], ["query", "hi"], ["doctor"], ["serve"]):
        done = run_cli(*command, "--config", str(path))
        assert done.returncode == 2, command
        assert "limits.maxRound" in done.stderr and "maxRounds" in done.stderr
        assert done.stdout == ""


def test_missing_config_exits_2(tmp_path):
    done = run_cli("tools", "--config", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and "nope.json" in done.stderr


def test_usage_error_exits_2():
    done = run_cli("frobnicate")
    assert done.returncode == 2


def test_tools_json_reports_tools_and_servers(tmp_path):
    path = write_config(
        tmp_path,
        None,
        mcpServers={
            "echo": {"command": sys.executable, "args": [ECHO]},
            "broken": {"command": "/nonexistent/server-binary"},
            "off": {"command": "x", "disabled": True},
        },
    )
    done = run_cli("tools", "--json", "--config", str(path))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    tools = {tool["exposed_name"]: tool for tool in report["tools"]}
    assert set(tools) == {"echo__echo", "echo__add"}
    assert tools["echo__add"]["server"] == "echo" and tools["echo__add"]["name"] == "add"
    assert tools["echo__add"]["parameters"]["required"] == ["a", "b"]
    assert isinstance(tools["echo__add"]["changes"], list)
    servers = {server["name"]: server for server in report["servers"]}
    assert servers["echo"]["status"] == "up" and servers["echo"]["tool_count"] == 2
    assert servers["echo"]["startup_ms"] > 0
    assert servers["broken"]["status"] == "failed" and servers["broken"]["error"]
    assert servers["off"]["status"] == "disabled"


def test_tools_text_output(tmp_path):
    done = run_cli("tools", "--config", str(write_config(tmp_path, None)))
    assert done.returncode == 0, done.stderr
    assert "2 tools from 1 servers" in done.stdout
    assert "echo__add(a, b)" in done.stdout


def test_query_answers_on_stdout_with_progress_on_stderr(tmp_path, model):
    model.enqueue(
        Reply.sse(openai_stream(calls=[Call("echo__echo", {"text": "hi there"})], usage=(10, 5))),
        Reply.sse(openai_stream(content="The echo said: hi there.", usage=(20, 4))),
    )
    done = run_cli("query", "say hi", "--config", str(write_config(tmp_path, model)))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The echo said: hi there.\n"
    assert "calling echo__echo" in done.stderr
    assert "done: success" in done.stderr
    # the tool really ran: its result went back to the model
    second = model.requests[1].json["messages"]
    assert second[-1]["role"] == "tool" and second[-1]["content"] == "hi there"


def test_query_json_and_failure_exit_code(tmp_path, model):
    model.enqueue(Reply.json({"error": {"message": "invalid api key", "type": "auth"}}, status=401))
    done = run_cli("query", "hi", "--json", "--quiet", "--config", str(write_config(tmp_path, model)))
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["termination_reason"] == "terminal_error"
    assert "invalid api key" in result["detail"]
    assert done.stderr == ""  # --quiet: no progress


def test_query_without_model_server_says_how_to_start_one(tmp_path):
    done = run_cli("query", "hi", "--config", str(write_config(tmp_path, None)))
    assert done.returncode == 1
    assert "terminal_error" in done.stderr and "No model server is listening" in done.stderr


def test_query_session_persists_between_processes(tmp_path, model):
    model.enqueue(Reply.json(completion(content="Noted: your name is Ada.")))
    model.enqueue(Reply.json(completion(content="Your name is Ada.")))
    path = write_config(tmp_path, model, llm={"endpoint": model.base_url, "model": "m", "stream": False})
    env = {"MCP_AGENT_STATE_DIR": str(tmp_path / "state")}
    first = run_cli("query", "My name is Ada.", "--session", "s1", "--config", str(path), env=env)
    assert first.returncode == 0, first.stderr
    second = run_cli("query", "What is my name?", "--session", "s1", "--config", str(path), env=env)
    assert second.returncode == 0, second.stderr
    contents = [m["content"] for m in model.requests[1].json["messages"]]
    assert "My name is Ada." in contents and "Noted: your name is Ada." in contents
    assert (tmp_path / "state" / "sessions" / "s1.json").exists()


def test_query_session_id_must_be_a_plain_name(tmp_path):
    done = run_cli("query", "hi", "--session", "../etc/x", "--config", str(write_config(tmp_path, None)))
    assert done.returncode == 2 and "session id" in done.stderr


def _models(request: RecordedRequest) -> Reply:
    if request.path.endswith("/models"):
        return Reply.json({"object": "list", "data": [{"id": "m", "object": "model"}]})
    return Reply.json({"error": {"message": "unexpected"}}, status=404)


def test_doctor_passes_when_all_is_well(tmp_path, model):
    model.handler = _models
    done = run_cli("doctor", "--config", str(write_config(tmp_path, model)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "model 'm' is available" in done.stdout
    assert "server echo (stdio): up" in done.stdout
    assert "all checks passed" in done.stdout


def test_doctor_fails_on_missing_model_and_broken_server(tmp_path, model):
    model.handler = _models
    path = write_config(
        tmp_path,
        model,
        llm={"endpoint": model.base_url, "model": "other"},
        mcpServers={"bad": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}},
    )
    done = run_cli("doctor", "--config", str(path))
    assert done.returncode == 1
    assert "model 'other' is not offered" in done.stdout
    assert "server bad (stdio): failed" in done.stdout


def test_doctor_fails_when_no_model_server(tmp_path):
    done = run_cli("doctor", "--config", str(write_config(tmp_path, None)))
    assert done.returncode == 1
    assert "No model server is listening" in done.stdout


# --------------------------------------------------------------------------------------------
# globs that match nothing: a warning at start-up, a failure in doctor


def _typo_config(folder: Path, server: FakeModelServer | None) -> Path:
    return write_config(
        folder,
        server,
        mcpServers={"echo": {"command": sys.executable, "args": [ECHO], "allowTools": ["echo", "ad"]}},
        approvals={"require": ["*__echo", "*__ech*", "echo__ehco"]},
    )


def test_globs_that_match_nothing_are_warned_about_at_start_up(tmp_path, model):
    model.enqueue(Reply.json(completion(content="fine")))
    done = run_cli("query", "hi", "--config", str(_typo_config(tmp_path, model)))
    assert done.returncode == 0, done.stderr
    assert "mcpServers.echo.allowTools: 'ad' matches no tool; nearest: add" in done.stderr
    assert "approvals.require: 'echo__ehco' matches no tool; nearest: echo__echo" in done.stderr
    assert "'*__echo'" not in done.stderr and "'*__ech*'" not in done.stderr  # these match


def test_doctor_fails_on_globs_that_match_nothing(tmp_path, model):
    model.handler = _models
    done = run_cli("doctor", "--config", str(_typo_config(tmp_path, model)))
    assert done.returncode == 1, done.stdout
    assert "[FAIL] mcpServers.echo.allowTools: 'ad' matches no tool; nearest: add" in done.stdout
    assert "[FAIL] approvals.require: 'echo__ehco' matches no tool; nearest: echo__echo" in done.stdout
