"""The CLI as a user runs it: real subprocesses, a fake model server, fixture tool servers."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion, openai_stream

ROOT = Path(__file__).resolve().parents[2]
ECHO = str(ROOT / "tests" / "servers" / "echo.py")


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """``python -m mcp_agent ARGS`` with stdin at /dev/null (never a terminal, wherever pytest runs)."""
    return subprocess.run(
        [sys.executable, "-m", "mcp_agent", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def run_on_terminal(
    *args: str, answer: Callable[[str], str | None], timeout: float = 60
) -> tuple[int, str, str]:
    """``python -m mcp_agent ARGS`` with stdin and stderr on a pseudo-terminal (stdout a pipe).

    Each time a new ``[y/N]`` question appears, ``answer(question line)`` is typed, followed by
    Enter (None: nothing is typed). Returns the exit code, stdout, and everything the terminal showed (the program's
    stderr and the echo of what was typed). ``timeout`` is a does-not-hang bound.
    """
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_agent", *args],
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    os.close(slave)
    screen, asked = "", 0
    deadline = time.monotonic() + timeout
    with process:
        try:
            while True:
                ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise AssertionError(f"the CLI did not finish; the terminal shows:\n{screen}")
                try:
                    data = os.read(master, 4096)
                except OSError:  # EIO: every holder of the terminal has closed it
                    break
                if not data:
                    break
                screen += data.decode(errors="replace")
                while screen.count("[y/N]") > asked:
                    question = screen.split("[y/N]")[asked].rsplit("Allow ", 1)[-1]
                    asked += 1
                    typed = answer(question)
                    if typed is not None:
                        os.write(master, typed.encode() + b"\n")
            assert process.stdout is not None
            out = process.stdout.read().decode()
            code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            os.close(master)
            if process.poll() is None:
                process.kill()
    return code, out, screen


def write_config(folder: Path, server: FakeModelServer | None, **extra: object) -> Path:
    config = {
        "llm": {
            "endpoint": server.base_url if server else "http://127.0.0.1:9/v1",
            "model": "m",
            "maxRetries": 0,
        },
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


def test_version_and_both_console_scripts():
    import tomllib

    import mcp_agent

    done = run_cli("--version")
    assert (done.returncode, done.stdout) == (0, f"mcp-agent {mcp_agent.__version__}\n")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == mcp_agent.__version__
    assert project["scripts"] == {
        "mcp-agent": "mcp_agent.cli.main:main",
        "mcp-gateway-agent": "mcp_agent.cli.main:main",
    }


def test_config_comes_from_the_option_then_the_variable_then_agent_json(tmp_path):
    (tmp_path / "agent.json").write_text(json.dumps({"limits": {"maxRound": 1}}))  # the default: broken
    (tmp_path / "elsewhere").mkdir()
    named = write_config(tmp_path / "elsewhere", None)
    # no option, no variable: ./agent.json
    done = run_cli("tools", "--json", cwd=tmp_path, env={"MCP_AGENT_CONFIG": ""})
    assert done.returncode == 2 and "agent.json: invalid config" in done.stderr
    # the variable names the file (a launcher that owns the arguments)
    done = run_cli("tools", "--json", cwd=tmp_path, env={"MCP_AGENT_CONFIG": str(named)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["servers"][0]["name"] == "echo"
    # --config wins over the variable
    done = run_cli("tools", "--config", "agent.json", cwd=tmp_path, env={"MCP_AGENT_CONFIG": str(named)})
    assert done.returncode == 2 and "limits.maxRound" in done.stderr
    # a missing file named by the variable says where its name came from
    done = run_cli("tools", cwd=tmp_path, env={"MCP_AGENT_CONFIG": str(tmp_path / "nope.json")})
    assert done.returncode == 2
    assert "nope.json" in done.stderr and "(named by $MCP_AGENT_CONFIG)" in done.stderr


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_an_empty_question_is_refused(tmp_path, question):
    done = run_cli("query", question, "--config", str(write_config(tmp_path, None)))
    assert done.returncode == 2
    assert done.stderr.startswith("mcp-agent: query: the question is empty") and done.stdout == ""


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--port", "99999"], "mcp-agent: --port 99999: give a port from 0 to 65535"),
        (["--port", "-1"], "mcp-agent: --port -1: give a port from 0 to 65535"),
        (["--host", "bad host!"], "mcp-agent: --host: 'bad host!' is not a host name or an IP address"),
        (["--host", "localhost:8080"], "mcp-agent: --host: 'localhost:8080' has a port in it"),
        (["--host", "http://127.0.0.1"], "mcp-agent: --host: 'http://127.0.0.1' is a URL or path"),
        (["--host", "300.1.2.3"], "mcp-agent: --host: '300.1.2.3' is not a valid IPv4 address"),
    ],
)
def test_serve_checks_host_and_port_like_the_config(tmp_path, option, message):
    done = run_cli("serve", *option, "--config", str(write_config(tmp_path, None)))
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert "serving" not in done.stderr


def test_serve_refuses_public_allowed_hosts_without_a_token_and_doctor_says_so(tmp_path):
    config = write_config(tmp_path, None, gateway={"allowedHosts": ["agent.example.com"], "port": 0})
    done = run_cli("serve", "--config", str(config), env={"MCP_AGENT_STATE_DIR": str(tmp_path / "state")})
    assert done.returncode == 2
    assert "refusing to serve gateway.allowedHosts ['agent.example.com'] without a token" in done.stderr
    doctor = run_cli("doctor", "--config", str(config), timeout=90)
    assert doctor.returncode == 1
    assert "[FAIL] serve would refuse to start: refusing to serve gateway.allowedHosts" in doctor.stdout


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
    assert "2 tools from 1 server\n" in done.stdout
    assert "echo__add(a, b)" in done.stdout


def test_tools_and_doctor_say_which_lists_came_from_the_cache(tmp_path, model):
    path = write_config(tmp_path, model)
    first = json.loads(run_cli("tools", "--json", "--config", str(path)).stdout)
    assert first["servers"][0]["from_cache"] is False and first["servers"][0]["status"] == "up"
    assert first["servers"][0]["protocol_version"] == "2026-07-28"  # echo.py speaks both eras
    again = run_cli("tools", "--config", str(path))
    assert again.returncode == 0, again.stderr
    assert "echo: 2 tools from cache (not started" in again.stdout
    assert "echo__add(a, b)" in again.stdout
    fresh = json.loads(run_cli("tools", "--json", "--fresh", "--config", str(path)).stdout)
    assert fresh["servers"][0]["from_cache"] is False and fresh["servers"][0]["status"] == "up"
    model.handler = _models
    doctor = run_cli("doctor", "--config", str(path))
    assert "server echo (stdio): up" in doctor.stdout and "(the cached list was up to date)" in doctor.stdout
    assert "2 tools, protocol 2026-07-28" in doctor.stdout


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


def test_query_says_on_stderr_that_an_answer_was_cut_off(tmp_path, model):
    model.enqueue(
        Reply.sse(openai_stream(content="One, two,", finish="length", usage=(10, 2048))),
        Reply.sse(openai_stream(content="three, four,", finish="length", usage=(20, 2048))),
    )
    done = run_cli("query", "count", "--config", str(write_config(tmp_path, model)))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "One, two, three, four,\n"
    assert "mcp-agent: the answer was cut off at the output cap (2048 tokens), and again" in done.stderr
    assert model.requests[0].json["max_tokens"] == 2048


def test_query_json_and_failure_exit_code(tmp_path, model):
    model.enqueue(Reply.json({"error": {"message": "invalid api key", "type": "auth"}}, status=401))
    done = run_cli("query", "hi", "--json", "--quiet", "--config", str(write_config(tmp_path, model)))
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["termination_reason"] == "terminal_error"
    assert "invalid api key" in result["detail"]
    assert done.stderr == ""  # --quiet: no progress


def test_query_without_model_server_says_how_to_start_one(tmp_path):
    """Nothing listens: how to start a server, the config file actually given (not "agent.json"),
    and ``retryable``: once a server runs, the same query succeeds."""
    named = write_config(tmp_path, None).rename(tmp_path / "fake_agent.json")
    done = run_cli("query", "hi", "--config", named.name, cwd=tmp_path)
    assert done.returncode == 1
    assert "llm_error" in done.stderr and "No model server is listening" in done.stderr
    assert "set `llm.endpoint` in fake_agent.json" in done.stderr and "in agent.json" not in done.stderr
    done = run_cli("query", "hi", "--json", "--quiet", "--config", named.name, cwd=tmp_path)
    result = json.loads(done.stdout)
    assert result["retryable"] is True and result["termination_reason"] == "llm_error"
    assert "(retrying may help)" in result["answer"] and "will not help" not in result["answer"]


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
    assert (tmp_path / "state" / "state.db").exists()  # the gateway's own default store
    assert not (tmp_path / "state" / "sessions").exists()  # no JSON files any more

    async def stored() -> list[str]:
        from mcp_agent.state import open_state

        state = await open_state(f"sqlite:///{tmp_path}/state/state.db")
        try:
            session = await state.sessions.get("s1")
            assert session is not None
            return [m.content for m in session.transcript]
        finally:
            await state.aclose()

    assert anyio.run(stored)[-2:] == ["What is my name?", "Your name is Ada."]


def test_query_session_imports_the_json_files_of_earlier_versions_once(tmp_path, model):
    """``query --session`` once kept ``sessions/ID.json``; those conversations move into the
    state database at the first start, and the folder is kept as ``sessions.imported``."""
    folder = tmp_path / "state" / "sessions"
    folder.mkdir(parents=True)
    old = [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": "Noted, Ada."}]
    (folder / "old-1.json").write_text(json.dumps({"id": "old-1", "runs": 1, "transcript": old}))
    (folder / "junk.json").write_text("{not json")
    model.enqueue(Reply.json(completion(content="Your name is Ada.")))
    model.enqueue(Reply.json(completion(content="Still Ada.")))
    path = write_config(tmp_path, model, llm={"endpoint": model.base_url, "model": "m", "stream": False})
    env = {"MCP_AGENT_STATE_DIR": str(tmp_path / "state")}
    first = run_cli("query", "What is my name?", "--session", "old-1", "--config", str(path), env=env)
    assert first.returncode == 0, first.stderr
    contents = [m["content"] for m in model.requests[0].json["messages"]]
    assert "My name is Ada." in contents and "Noted, Ada." in contents
    assert "junk.json cannot be read" in first.stderr  # a bad file is named and left in place
    assert (folder / "junk.json").exists() and (folder / "old-1.json").exists()
    (folder / "junk.json").unlink()
    second = run_cli("query", "And now?", "--session", "old-1", "--config", str(path), env=env)
    assert second.returncode == 0, second.stderr
    assert not folder.exists() and (tmp_path / "state" / "sessions.imported" / "old-1.json").exists()
    contents = [m["content"] for m in model.requests[1].json["messages"]]
    assert contents.count("My name is Ada.") == 1 and "Your name is Ada." in contents  # imported once


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
    # doctor follows health: what serve would report
    assert (
        "serve would report health degraded: model 'other' is not on the model server; tool server down: bad"
        in done.stdout
    )


def test_doctor_fails_when_no_model_server(tmp_path):
    done = run_cli("doctor", "--config", str(write_config(tmp_path, None)))
    assert done.returncode == 1
    assert "No model server is listening" in done.stdout
    assert "serve would report health degraded: model server unreachable" in done.stdout


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


def test_doctor_fails_on_caller_tool_globs_that_match_nothing(tmp_path, model):
    model.handler = _models
    tools = {"allow": ["echo__*"], "deny": ["echo__ad", "echo__echo"]}
    gateway = {"callers": {"alice": {"token": "t" * 20, "tools": tools}}}
    done = run_cli("doctor", "--config", str(write_config(tmp_path, model, gateway=gateway)))
    assert done.returncode == 1, done.stdout
    assert (
        "[FAIL] gateway.callers.alice.tools.deny: 'echo__ad' matches no tool; nearest: echo__add"
        in done.stdout
    )
    assert "'echo__*'" not in done.stdout and "'echo__echo'" not in done.stdout  # these match


# --------------------------------------------------------------------------------------------
# approvals in query: asked on a terminal, denied at once without one, --approve


def _gated(folder: Path, server: FakeModelServer, **approvals: object) -> Path:
    # approvals.timeoutSeconds 0 waits for the run's deadline: a silent wait would hang the test
    return write_config(
        folder,
        server,
        llm={"endpoint": server.base_url, "model": "m", "stream": False, "maxRetries": 0},
        approvals={"require": ["echo__*"], "timeoutSeconds": 0, **approvals},
    )


def _tool_messages(request: RecordedRequest) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


def test_query_without_a_terminal_denies_at_once_and_says_how_to_allow(tmp_path, model):
    model.enqueue(
        Reply.json(completion(content=None, calls=[Call("echo__echo", {"text": "hi"})])),
        Reply.json(completion(content="It was not allowed.")),
    )
    done = run_cli("query", "say hi", "--config", str(_gated(tmp_path, model)))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It was not allowed.\n"
    assert (
        """mcp-agent: denied echo__echo {"text": "hi"}: no terminal to ask on; to allow this tool, """
        "run the query again with --approve 'echo__echo'"
    ) in done.stderr
    [denial] = _tool_messages(model.requests[1])
    assert denial.startswith("[DENIED: no terminal to ask on; to allow this tool, run the query again")
    assert "--approve 'echo__echo'" in denial


def test_query_approve_glob_approves_without_asking(tmp_path, model):
    model.enqueue(
        Reply.json(completion(content=None, calls=[Call("echo__echo", {"text": "hi"})])),
        Reply.json(completion(content="The echo said hi.")),
    )
    path = str(_gated(tmp_path, model))
    done = run_cli("query", "say hi", "--config", path, "--approve", "nothing*", "--approve", "echo__e*")
    assert done.returncode == 0, done.stderr
    assert _tool_messages(model.requests[1]) == ["hi"]
    assert """· approved echo__echo {"text": "hi"} (--approve 'echo__e*')""" in done.stderr
    assert "--approve: 'nothing*' matches no tool" in done.stderr  # a typo is pointed out


def test_query_on_a_terminal_asks_one_question_at_a_time(tmp_path, model):
    long_text = "x" * 500
    calls = [Call("echo__echo", {"text": long_text}, id="c1"), Call("echo__add", {"a": 1, "b": 2}, id="c2")]
    model.enqueue(
        Reply.json(completion(content=None, calls=calls)),
        Reply.json(completion(content="Done.")),
    )
    code, out, screen = run_on_terminal(
        "query",
        "go",
        "--config",
        str(_gated(tmp_path, model)),
        answer=lambda q: "y" if "echo__echo" in q else "no",
    )
    assert code == 0, screen
    assert out == "Done.\n"
    questions = screen.split("[y/N]")
    assert len(questions) == 3, screen  # two questions
    # one at a time: the second question came only after the first was answered (its echo)
    assert questions[1].lstrip().startswith(("y", "no")), screen
    assert """Allow echo__echo {"text": "xxxxxxxx""" in screen and "x" * 100 not in screen  # cut
    assert """Allow echo__add {"a": 1, "b": 2}? """ in screen
    assert _tool_messages(model.requests[1]) == [
        long_text,
        "[DENIED: the user did not approve this call] Do NOT retry this tool",
    ]


def test_query_on_a_terminal_gives_up_a_question_whose_approval_timed_out(tmp_path, model):
    model.enqueue(
        Reply.json(completion(content=None, calls=[Call("echo__echo", {"text": "hi"})])),
        Reply.json(completion(content="No answer came.")),
    )
    path = str(_gated(tmp_path, model, timeoutSeconds=0.5))
    code, out, screen = run_on_terminal("query", "say hi", "--config", path, answer=lambda q: None)
    assert (code, out) == (0, "No answer came.\n"), screen
    assert (
        """Allow echo__echo {"text": "hi"}? [y/N] \r\n"""
        "(no answer in time: the call was not approved: approval timed out after 0.5 s)\r\n"
    ) in screen
    assert _tool_messages(model.requests[1]) == [
        "[DENIED: approval timed out after 0.5 s] Do NOT retry this tool"
    ]


def test_query_on_a_terminal_with_input_closed_denies(tmp_path, model):
    model.enqueue(
        Reply.json(completion(content=None, calls=[Call("echo__echo", {"text": "hi"})])),
        Reply.json(completion(content="Closed.")),
    )
    code, out, screen = run_on_terminal(
        "query", "say hi", "--config", str(_gated(tmp_path, model)), answer=lambda q: "\x04"
    )
    assert (code, out) == (0, "Closed.\n"), screen
    [result] = _tool_messages(model.requests[1])
    assert result == "[DENIED: the terminal's input is closed (no answer)] Do NOT retry this tool"


def test_a_reader_that_goes_away_is_not_an_error(tmp_path):
    path = write_config(tmp_path, None)
    assert run_cli("tools", "--config", str(path)).returncode == 0  # the list is cached now
    read, write = os.pipe()
    os.close(read)  # the reader is gone before a byte is written (``mcp-agent tools | head`` at its end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mcp_agent", "tools", "--config", str(path)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        os.close(write)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("fifo", "a FIFO (named pipe), not a regular file: not a recording"),
        ("/dev/zero", "a character device, not a regular file: not a recording"),
        ("folder", "a folder, not a regular file: not a recording"),
        ("missing", "cannot read the recording: No such file or directory"),
    ],
)
def test_replay_refuses_what_is_not_a_regular_file_at_once(tmp_path, kind, says):
    """``replay /dev/zero`` once ran out of memory and ``replay FIFO`` hung (a writer never came):
    exit 2, one line, before anything is read."""
    if kind == "fifo":
        path = tmp_path / "run.jsonl"
        os.mkfifo(path)
    elif kind == "folder":
        path = tmp_path
    else:
        path = Path(kind) if kind.startswith("/") else tmp_path / "missing.jsonl"
    done = run_cli("replay", str(path), timeout=30)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"mcp-agent: replay: {path}: {says}\n"


def test_every_command_refuses_a_state_folder_others_may_write_into(tmp_path):
    """Another local user could read the conversations there and replace the tool cache."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    config = str(write_config(tmp_path, None))
    for command in (["tools"], ["query", "hi"], ["query", "--session", "s", "hi"], ["doctor"], ["serve"]):
        done = run_cli(*command, "--config", config, env={"MCP_AGENT_STATE_DIR": str(shared)})
        assert done.returncode == 2, (command, done.stderr)
        assert f"the state folder {shared} is writable by group and others (mode 0777)" in done.stderr, (
            command
        )
        assert f"chmod 700 {shared}" in done.stderr and "MCP_AGENT_STATE_DIR" in done.stderr
    assert os.listdir(shared) == []  # nothing written there


def test_serve_refuses_a_record_folder_others_may_write_into(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs").chmod(0o777)
    done = run_cli(
        "serve", "--port", "0", "--config", str(write_config(tmp_path, None, gateway={"recordDir": "runs"}))
    )
    assert done.returncode == 2, done.stderr
    assert f"gateway.recordDir {tmp_path / 'runs'} is writable by group and others" in done.stderr
    assert "set gateway.recordDir to a folder of your own" in done.stderr and "serving" not in done.stderr


def test_a_relative_command_starts_whatever_folder_the_gateway_is_launched_from(tmp_path):
    """README's ``".venv/bin/python"`` example, launched (as Claude Desktop does) from another
    folder: the command and ``cwd`` are the config file's, so the server starts."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "bin").mkdir(parents=True)
    (project / "srv").mkdir()
    elsewhere.mkdir()
    wrapper = project / "srv" / "py"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    (project / "srv" / "echo.py").write_text(Path(ECHO).read_text())
    config = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"},
        "mcpServers": {"echo": {"command": "./py", "args": ["echo.py"], "cwd": "srv"}},
    }
    (project / "agent.json").write_text(json.dumps(config))
    done = run_cli("tools", "--fresh", "--config", str(project / "agent.json"), cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert "echo: up" in done.stdout and "echo__add(a, b)" in done.stdout, done.stdout
