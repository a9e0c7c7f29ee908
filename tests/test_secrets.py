"""Secrets never leave the process: a run with known fake secrets that fails in several ways, then
every output channel is searched for them.

The secrets: the model server's API key (``llm.apiKey: "${TEST_LLM_API_KEY}"``), the gateway's
token (``gateway.authToken``), a value put into two tool servers' ``env`` from a variable whose
name says nothing (``${UPSTREAM_CRED}``) and a remote server's ``Authorization`` header. None has
a shape the heuristics of ``redact_text`` know, so only the knowledge of the values masks them.

The ways to leak them, all real processes: a fake model server on 127.0.0.1 that echoes the
``Authorization`` header it receives into its error bodies (401 and 500), into the model list
and into its answers; a tool server (``tests/servers/env_echo.py``) that echoes its environment
in a result, in an error result, in a JSON-RPC error and on its stderr; a tool server that
prints the value on stderr and exits at start. The channels searched: the gateway's stderr with
``-vv`` in both log formats, ``/api/v1/events`` (SSE), every REST answer, ``agent_query``
results over Streamable HTTP and over stdio, and the CLI's ``query``, ``tools`` and ``doctor``
(stdout and stderr). Each test also checks that the secret did reach the place it would leak
from (the key was sent, the tool ran, the error came back), so a pass means masked, not absent.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion
from tests.gateway.conftest import eventually, free_port
from tests.gateway.test_mcp import connect

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
MASK = "***"


def _value(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(10)}"  # unique per run: no shape any heuristic knows


@pytest.fixture(scope="module")
def fake() -> dict[str, str]:
    """The fake secrets, by the environment variable that holds each."""
    return {
        "TEST_LLM_API_KEY": _value("llmkey"),
        "TEST_GATEWAY_TOKEN": _value("gwtok"),
        "UPSTREAM_CRED": _value("upstream"),
        "REMOTE_BEARER": _value("remote"),
    }


def _model(request: RecordedRequest) -> Reply:
    """The leaky model server: whatever it is asked, the Authorization header comes back."""
    auth = request.headers.get("authorization", "")
    if not request.path.endswith("/chat/completions"):
        return Reply.json({"object": "list", "data": [{"id": "m", "owned_by": auth}]})
    messages = request.json["messages"]
    query = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    last = messages[-1]
    if "auth" in query:  # a 401 quoting the key, as some servers do
        return Reply.json(
            {"error": {"message": f"Incorrect API key provided: {auth}", "code": "invalid_api_key"}}, 401
        )
    if "crash" in query:  # a 500 quoting the request's headers
        return Reply.json(
            {"error": {"message": f"internal error handling headers {{'authorization': '{auth}'}}"}}, 500
        )
    if last["role"] == "tool":
        return Reply.json(completion(content=f"the tool said {last['content']} (asked with {auth})"))
    tool = (
        "envecho__fail_env"
        if "fail" in query
        else "envecho__rpc_env"
        if "rpc" in query
        else "envecho__show_env"
    )
    return Reply.json(completion(content=None, calls=[Call(tool, {}, id=f"c{secrets.token_hex(3)}")]))


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        server.handler = _model
        yield server


def _config(folder: Path, model: FakeModelServer, port: int = 0) -> Path:
    leaky_start = (
        "import os, sys; print('cannot start with', os.environ['UPSTREAM'], file=sys.stderr); sys.exit(3)"
    )
    config = {
        "llm": {
            "endpoint": model.base_url,
            "model": "m",
            "provider": "openai",
            "stream": False,
            "maxRetries": 0,
            "apiKey": "${TEST_LLM_API_KEY}",
        },
        "limits": {"maxRounds": 3, "toolTimeoutSeconds": 30, "timeoutSeconds": 60},
        "mcpServers": {
            "envecho": {
                "command": sys.executable,
                "args": [str(SERVERS / "env_echo.py")],
                "env": {"UPSTREAM": "${UPSTREAM_CRED}", "ENV_ECHO_VARS": "UPSTREAM"},
            },
            "broken": {
                "command": sys.executable,
                "args": ["-c", leaky_start],
                "env": {"UPSTREAM": "${UPSTREAM_CRED}"},
            },
            "remote": {
                "url": f"http://127.0.0.1:{free_port()}/mcp",
                "transport": "http",
                "headers": {"Authorization": "Bearer ${REMOTE_BEARER}"},
                "startupTimeoutSeconds": 5,
            },
        },
        "gateway": {"port": port, "authToken": "${TEST_GATEWAY_TOKEN}"},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


QUERIES = ["show the tool", "tool fail please", "tool rpc please", "auth please", "crash please"]
"""One run each: a tool result, an error result and a JSON-RPC error quoting the secret; a 401
and a 500 quoting the key."""


def _assert_clean(channels: dict[str, str], fake: dict[str, str]) -> None:
    leaks = [
        f"{name} shows ${variable}"
        for name, text in channels.items()
        for variable, value in fake.items()
        if value in text or json.dumps(value)[1:-1] in text
    ]
    assert not leaks, "\n".join(leaks)


def _assert_key_was_sent(model: FakeModelServer, fake: dict[str, str]) -> None:
    sent = {request.headers.get("authorization") for request in model.requests}
    assert f"Bearer {fake['TEST_LLM_API_KEY']}" in sent  # so every echo above carried it


def _env(fake: dict[str, str], **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **fake, **extra}


# ------------------------------------------------------------------------------ serve over HTTP


async def _sse(http: httpx.AsyncClient, into: list[str], started: anyio.Event) -> None:
    async with http.stream("GET", "/api/v1/events") as response:
        assert response.status_code == 200
        async for chunk in response.aiter_text():
            into.append(chunk)
            started.set()


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_serve_shows_no_secret_anywhere(
    tmp_path: Path, model: FakeModelServer, fake: dict[str, str], log_format: str
) -> None:
    port = free_port()
    config = _config(tmp_path, model, port)
    stderr = open(tmp_path / "stderr.txt", "w+")  # noqa: SIM115 - read back below
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcp_agent",
            "-vv",
            "--log-format",
            log_format,
            "serve",
            "--config",
            str(config),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=_env(fake),
    )
    channels: dict[str, str] = {}
    events: list[str] = []
    base = f"http://127.0.0.1:{port}"
    token = {"Authorization": f"Bearer {fake['TEST_GATEWAY_TOKEN']}"}
    try:
        async with httpx.AsyncClient(base_url=base, headers=token, timeout=60) as http:

            async def up() -> bool:
                try:
                    return (await http.get("/api/v1/health")).status_code == 200
                except httpx.HTTPError:
                    return False

            await eventually(up, timeout=60)
            async with anyio.create_task_group() as tg:
                listening = anyio.Event()
                tg.start_soon(_sse, http, events, listening)
                with anyio.fail_after(20):
                    await listening.wait()
                answers = {}
                for query in QUERIES:
                    response = await http.post("/api/v1/query", json={"query": query})
                    channels[f"POST /api/v1/query {query!r}"] = response.text
                    answers[query] = response.json()
                with anyio.fail_after(60):
                    async with connect(base, "http", "modern", headers=token) as client:
                        for query in ("show the tool", "auth please"):
                            result = await client.call_tool("agent_query", {"query": query})
                            channels[f"agent_query {query!r}"] = result.model_dump_json()
                for path in (
                    "/api/v1/health",
                    "/api/v1/tools",
                    "/api/v1/sessions",
                    "/api/v1/approvals",
                    "/metrics",
                    "/",
                ):
                    channels[f"GET {path}"] = (await http.get(path)).text
                await eventually(lambda: "auth please" in "".join(events) and "run_ended" in "".join(events))
                await anyio.sleep(0.5)  # the last events
                tg.cancel_scope.cancel()
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        stderr.seek(0)
        channels["stderr"] = stderr.read()
        stderr.close()
        assert process.stdout is not None
        channels["stdout"] = process.stdout.read().decode()
        process.stdout.close()
    channels["/api/v1/events"] = "".join(events)
    assert code == 0, channels["stderr"][-3000:]

    # the secrets reached every place they would leak from
    _assert_key_was_sent(model, fake)
    _assert_clean(channels, fake)
    assert answers["show the tool"]["termination_reason"] == "success"
    assert (
        f'the tool said {{"UPSTREAM": "{MASK}"}} (asked with Bearer {MASK})'
        in answers["show the tool"]["answer"]
    )
    assert answers["auth please"]["termination_reason"] == "terminal_error"
    assert f"Incorrect API key provided: Bearer {MASK}" in answers["auth please"]["error"]
    assert answers["crash please"]["termination_reason"] == "llm_error"
    assert MASK in answers["tool fail please"]["answer"] and MASK in answers["tool rpc please"]["answer"]
    assert "env_echo starting with" in channels["stderr"]  # the child's stderr was logged
    assert "cannot start with" in channels["GET /api/v1/health"] + channels["stderr"]
    assert "tool_call_ended" in channels["/api/v1/events"]
    if log_format == "json":
        entries = [json.loads(line) for line in channels["stderr"].splitlines() if line.strip()]
        assert entries and all(isinstance(entry, dict) for entry in entries)
        assert any("run_id" in entry and "session_id" in entry for entry in entries)  # a run's records


# ------------------------------------------------------------------------------ serve over stdio


def test_serve_stdio_with_json_logs_speaks_clean_json_rpc_and_shows_no_secret(
    tmp_path: Path, model: FakeModelServer, fake: dict[str, str]
) -> None:
    config = _config(tmp_path, model)
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {
                "jsonrpc": "2.0",
                "id": 2 + i,
                "method": "tools/call",
                "params": {"name": "agent_query", "arguments": {"query": q}},
            }
            for i, q in enumerate(QUERIES)
        ),
    ]
    stderr = open(tmp_path / "stderr.txt", "w+")  # noqa: SIM115 - a file: a pipe nobody reads could fill up
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcp_agent",
            "-vv",
            "--log-format",
            "json",
            "serve",
            "--stdio",
            "--config",
            str(config),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=_env(fake),
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    answers: dict[int, Any] = {}
    lines: list[str] = []
    try:
        process.stdin.write(json.dumps(requests[0]) + "\n")
        process.stdin.flush()
        lines.append(process.stdout.readline())
        for request in requests[1:]:
            process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        while len(answers) < len(QUERIES):
            line = process.stdout.readline()
            assert line, "stdout ended early"
            lines.append(line)
            message = json.loads(line)
            if "id" in message:
                answers[message["id"]] = message
        process.stdin.close()  # the end of the session: the gateway exits
        assert process.wait(timeout=30) == 0
        out = process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        stderr.seek(0)
        err = stderr.read()
        stderr.close()
    lines += out.splitlines(keepends=True)
    for line in lines:  # stdout carries JSON-RPC and nothing else
        assert json.loads(line)["jsonrpc"] == "2.0", line
    for line in err.splitlines():  # stderr carries one JSON object per line
        assert isinstance(json.loads(line), dict), line
    _assert_key_was_sent(model, fake)
    _assert_clean({"stdout": "".join(lines), "stderr": err}, fake)
    shown = answers[2]["result"]["structuredContent"]["answer"]
    assert f'the tool said {{"UPSTREAM": "{MASK}"}} (asked with Bearer {MASK})' in shown
    assert f"Incorrect API key provided: Bearer {MASK}" in json.dumps(answers[5])


# ------------------------------------------------------------------------------ the CLI


def _cli(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_agent", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


COMMANDS = [
    ("text", "-vv", "query", "show the tool"),
    ("json", "-vv", "query", "show the tool"),
    ("json", "-vv", "query", "--json", "tool fail please"),
    ("text", "-vv", "query", "tool rpc please"),
    ("text", "-vv", "query", "auth please"),
    ("json", "-vv", "query", "auth please"),
    ("text", "query", "--json", "crash please"),
    ("text", "-vv", "tools"),
    ("json", "tools", "--json"),
    ("json", "-vv", "doctor"),
    ("text", "doctor"),
]
"""Each command once or twice, the log formats shared out among them (``$MCP_AGENT_LOG_FORMAT``)."""


def test_cli_commands_show_no_secret(tmp_path: Path, model: FakeModelServer, fake: dict[str, str]) -> None:
    config = str(_config(tmp_path, model))
    channels = {
        " ".join(command): _cli(*args, "--config", config, env=_env(fake, MCP_AGENT_LOG_FORMAT=log_format))
        for command in COMMANDS
        for log_format, *args in [command]
    }
    _assert_key_was_sent(model, fake)
    _assert_clean(channels, fake)
    for log_format in ("text", "json"):
        shown = channels[f"{log_format} -vv query show the tool"]
        assert f'the tool said {{"UPSTREAM": "{MASK}"}} (asked with Bearer {MASK})' in shown
        assert f"Incorrect API key provided: Bearer {MASK}" in channels[f"{log_format} -vv query auth please"]
    assert (
        "cannot start with" in channels["text -vv tools"]
        and "cannot start with" in channels["json -vv doctor"]
    )
    for name, text in channels.items():
        if name.startswith("json"):  # every line of stderr is a JSON object
            for line in text.split("--- stderr\n", 1)[1].splitlines():
                assert isinstance(json.loads(line), dict), f"{name}: {line}"
