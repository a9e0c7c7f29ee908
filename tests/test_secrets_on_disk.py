"""What the gateway keeps on disk shows no known secret, and no other user can read it: a scripted
run with ten fake secrets, then every byte under the state folder and the record folder searched.

The secrets (each a value no heuristic knows, so only the knowledge of the values masks them):
the model server's ``apiKey``, a secret header sent to the model server, the password in the
model endpoint's URL, the gateway's ``authToken``, a tool server's ``env`` value, a remote
server's bearer token, its ``X-Api-Key`` header and a key in its URL's query, a secret-named
variable of the gateway's environment, and a variable substituted into a remote header.

How they reach what is written, all real processes on 127.0.0.1: a fake model server that
quotes the headers it receives in its answers and in the arguments of the tool calls it asks
for, and answers as llama.cpp (so ``server-info.json`` is written); a stdio tool server that
prints its environment (``tests/servers/env_echo.py``); a remote tool server that prints the
URL and headers it was called with, also in a result long enough to be paged
(``tests/servers/header_echo.py``); a gated tool whose call waits for an approval (kept with its
arguments) and times out; a query that contains two secrets. The gateway keeps its state in
SQLite in the state folder (searched while it runs, WAL included, and after it stopped) and
records every run (``gateway.recordDir``). The test also checks that each secret reached the
process where it would have been written (the model saw the tool results, the query), so a pass
means masked, not absent.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion
from tests.fakes.server_shapes import llamacpp_routes
from tests.gateway.conftest import eventually, free_port
from tests.servers import over_http

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
MASK = "***"


def _value(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(10)}"


@pytest.fixture(scope="module")
def fake() -> dict[str, str]:
    """The ten fake secrets, by the environment variable that holds each."""
    return {
        "TEST_LLM_API_KEY": _value("llmkey"),  # llm.apiKey
        "TEST_LLM_ORG": _value("llmorg"),  # llm.headers["X-Org-Secret"]
        "TEST_ENDPOINT_PASSWORD": _value("endpw"),  # the password in llm.endpoint
        "TEST_GATEWAY_TOKEN": _value("gwtok"),  # gateway.authToken
        "UPSTREAM_CRED": _value("upstream"),  # a stdio server's env
        "REMOTE_BEARER": _value("remote"),  # a remote server's Authorization header
        "REMOTE_API_KEY": _value("rapikey"),  # its X-Api-Key header
        "REMOTE_QUERY_KEY": _value("rquery"),  # ?api_key= in its URL
        "SERVICE_PASSWORD": _value("svcpw"),  # the gateway's environment, secret-named
        "TRACE_CRED": _value("trace"),  # ${VAR} into a header whose name says nothing
    }


def _handler(fake: dict[str, str]) -> object:
    def answer(request: RecordedRequest) -> Reply:
        """The leaky model: its answers quote the headers it was sent."""
        auth = request.headers.get("authorization", "")
        org = request.headers.get("x-org-secret", "")
        messages = request.json["messages"]
        last = messages[-1]
        query = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        if last["role"] == "tool":
            return Reply.json(
                completion(content=f"the tool said {last['content']} (asked with {auth}, org {org})")
            )
        call = {
            "show env": Call("envecho__show_env", {}),
            "whoami": Call("remote__whoami", {}),
            "long": Call("remote__long", {"size": 6000}),
            "note": Call("remote__note", {"text": f"org {org}, service password {fake['SERVICE_PASSWORD']}"}),
        }.get(query)
        if call is None:
            return Reply.json(completion(content=f"you said: {query} (asked with {auth}, org {org})"))
        return Reply.json(
            completion(content=None, calls=[Call(call.name, call.arguments, id=f"c{secrets.token_hex(3)}")])
        )

    return answer


@pytest.fixture(scope="module")
def model(fake: dict[str, str]) -> Iterator[FakeModelServer]:
    with running_model_server() as server:
        server.routes.update(llamacpp_routes(32768))
        server.handler = _handler(fake)  # type: ignore[assignment]
        yield server


@pytest.fixture
def remote() -> Iterator[str]:
    """``tests/servers/header_echo.py`` over Streamable HTTP; its URL."""
    with over_http("header_echo.py") as url:
        yield url


def _config(folder: Path, model: FakeModelServer, remote: str, port: int) -> Path:
    endpoint = model.base_url.replace("http://", "http://agent:${TEST_ENDPOINT_PASSWORD}@")
    config = {
        "llm": {
            "endpoint": endpoint,
            "model": "m",
            "provider": "openai",
            "stream": False,
            "maxRetries": 0,
            "apiKey": "${TEST_LLM_API_KEY}",
            "headers": {"X-Org-Secret": "${TEST_LLM_ORG}"},
        },
        "limits": {"maxRounds": 3, "toolTimeoutSeconds": 30, "timeoutSeconds": 60, "maxResultChars": 1000},
        "approvals": {"require": ["remote__note"], "timeoutSeconds": 0.5},
        "mcpServers": {
            "envecho": {
                "command": sys.executable,
                "args": [str(SERVERS / "env_echo.py")],
                "env": {"UPSTREAM": "${UPSTREAM_CRED}", "ENV_ECHO_VARS": "UPSTREAM"},
            },
            "remote": {
                "url": remote + "?api_key=${REMOTE_QUERY_KEY}",
                "transport": "http",
                "headers": {
                    "Authorization": "Bearer ${REMOTE_BEARER}",
                    "X-Api-Key": "${REMOTE_API_KEY}",
                    "X-Trace": "${TRACE_CRED}",
                },
            },
        },
        "gateway": {"port": port, "authToken": "${TEST_GATEWAY_TOKEN}", "recordDir": "records"},
    }
    path = folder / "agent.json"
    path.write_text(json.dumps(config))
    return path


QUERIES = [("s1", "show env"), ("s1", "whoami"), ("s1", "long"), ("s1", "note"), ("s2", "")]
"""The runs, by session; the last one's query is made of secrets (``_typed``)."""


def _typed(fake: dict[str, str]) -> str:
    return f"my key is {fake['TEST_LLM_API_KEY']} and the gateway token {fake['TEST_GATEWAY_TOKEN']}"


def _basic(fake: dict[str, str]) -> str:
    """The endpoint's credentials as HTTP Basic sends them (the model server quotes them back)."""
    return base64.b64encode(f"agent:{fake['TEST_ENDPOINT_PASSWORD']}".encode()).decode()


def _leaks(folders: list[Path], fake: dict[str, str]) -> list[str]:
    """``path: $VARIABLE`` for each file under ``folders`` holding a secret's bytes."""
    forms = {**fake, "TEST_ENDPOINT_PASSWORD (HTTP Basic)": _basic(fake)}
    found = []
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            data = path.read_bytes()
            for variable, value in forms.items():
                if value.encode() in data:
                    found.append(f"{path.relative_to(folder.parent)}: ${variable}")
    return found


def _open_to_others(folders: list[Path]) -> list[str]:
    """Every folder and file under ``folders`` (and they themselves) with a group or other bit."""
    paths = [p for folder in folders for p in [folder, *folder.rglob("*")]]
    return [
        f"{p} {stat.filemode(p.lstat().st_mode)}" for p in paths if stat.S_IMODE(p.lstat().st_mode) & 0o077
    ]


async def test_nothing_on_disk_shows_a_secret_or_is_open_to_others(
    tmp_path: Path, model: FakeModelServer, remote: str, fake: dict[str, str]
) -> None:
    port = free_port()
    config = _config(tmp_path, model, remote, port)
    state, records = tmp_path / "state", tmp_path / "records"
    stderr = open(tmp_path / "stderr.txt", "w+")  # noqa: SIM115 - read back below
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_AGENT_STATE_DIR": str(state), **fake}
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=env,
    )
    answers = []
    try:
        token = {"Authorization": f"Bearer {fake['TEST_GATEWAY_TOKEN']}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=token, timeout=60) as http:

            async def up() -> bool:
                try:
                    return (await http.get("/api/v1/health")).status_code == 200
                except httpx.HTTPError:
                    return False

            await eventually(up, timeout=60)
            sessions: dict[str, str] = {}  # a first query starts a conversation, the next ones go on
            for session, query in QUERIES:
                body = {"query": query or _typed(fake), "session_id": sessions.get(session)}
                answers.append((await http.post("/api/v1/query", json=body)).json())
                sessions[session] = answers[-1].get("session_id")
        running = _leaks([state, records], fake), _open_to_others([state, records])
        wal = state / "state.db-wal"
        assert wal.exists() and wal.stat().st_size > 0  # searched above while it held the runs
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        stderr.seek(0)
        log = stderr.read()
        stderr.close()
    assert code == 0, log[-3000:]

    # every run went where its secrets would be written
    assert [answer["termination_reason"] for answer in answers] == ["success"] * len(QUERIES), answers
    seen = json.dumps([request.json for request in model.requests])
    for variable in ("UPSTREAM_CRED", "REMOTE_BEARER", "REMOTE_API_KEY", "REMOTE_QUERY_KEY", "TRACE_CRED"):
        assert fake[variable] in seen, f"no tool result showed ${variable} to the model"
    assert fake["TEST_LLM_API_KEY"] in seen and fake["TEST_GATEWAY_TOKEN"] in seen  # the typed query
    assert any(request.headers.get("x-org-secret") == fake["TEST_LLM_ORG"] for request in model.requests)
    assert model.requests[-1].headers.get("authorization") == f"Basic {_basic(fake)}"  # and quoted them
    assert "approval timed out" in seen  # the gated call waited (its approval was kept) and was denied
    assert "paged result" in seen  # the long result went to the pages
    assert (state / "server-info.json").exists()
    assert sorted(p.name for p in records.iterdir()) and all(p.suffix == ".jsonl" for p in records.iterdir())

    # nothing on disk shows a secret, and nothing there is open to other users
    after = _leaks([state, records], fake), _open_to_others([state, records])
    assert running == after == ([], []), f"while running: {running}\nafter: {after}"
    assert MASK.encode() in (state / "state.db").read_bytes()  # kept, masked

    # the masked conversation is still one a model takes: the next runs of s1 sent it back
    later = [r.json["messages"] for r in model.requests if r.json["messages"][-1]["content"] == "whoami"]
    assert later and any(m["role"] == "tool" and f'"UPSTREAM": "{MASK}"' in m["content"] for m in later[0]), (
        "the second run of s1 did not get the first one's (masked) transcript"
    )
