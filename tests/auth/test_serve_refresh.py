"""A real ``mcp-agent serve`` through a token expiry and its refresh, and the secret scan of
everything it leaves: its log, events, traces, recordings, state files and dashboard answers.

The remote server and its authorization server run in the test (``tests/servers/oauth_protected``)
so the test can make them refuse the token the gateway holds; the gateway is its own process,
logged in beforehand by ``log_in`` (the same code as ``mcp-agent login``), with ``exposeTools``
(an MCP client calls the server's tool through it), a ``recordDir`` and OTLP traces.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mcp_agent.auth.login import log_in
from mcp_agent.auth.token_store import tokens_folder
from mcp_agent.config import RemoteServerConfig
from mcp_agent.state.folder import state_dir
from tests.auth.conftest import Protected
from tests.auth.test_login import store_file
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, running_model_server
from tests.fakes.openai_shapes import Call, completion
from tests.gateway.conftest import eventually, free_port
from tests.telemetry.test_otlp import Receiver, otel_env, receiver  # noqa: F401  # the fixture

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def adding(request: RecordedRequest) -> Reply:
    """The model: a question calls ``p__add``; the tool's answer is repeated."""
    if not request.path.endswith("/chat/completions"):
        return Reply.json({"data": [{"id": "m"}], "object": "list"})
    last = request.json["messages"][-1]
    if last["role"] == "tool":
        return Reply.json(completion(content=f"the sum is {last['content']}"))
    return Reply.json(completion(content=None, calls=[Call("p__add", {"a": 2, "b": 3}, id="c1")]))


@pytest.fixture
def model() -> Any:
    with running_model_server() as server:
        server.handler = adding
        yield server


@asynccontextmanager
async def serving(
    config: Path, env: dict[str, str], log: Path
) -> AsyncIterator[tuple[anyio.abc.Process, str]]:
    port = json.loads(config.read_text())["gateway"]["port"]
    with open(log, "a") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "mcp_agent", "-v", "serve", "--config", str(config)],
            stdout=-1,
            stderr=stderr,
            cwd=str(ROOT),
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:

            async def ready() -> bool:
                try:
                    return (await http.get("/api/v1/health")).json().get("status") in ("ok", "degraded")
                except httpx.TransportError:
                    return False

            await eventually(ready, timeout=60)
        yield process, url
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


async def test_serve_refreshes_an_expired_token_and_no_token_leaves_the_store(
    protected: Protected,
    browser: str,
    model: FakeModelServer,
    receiver: tuple[Receiver, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    spans, endpoint = receiver
    server = RemoteServerConfig(url=protected.url, oauth={})
    await log_in("p", server, folder=tokens_folder(state_dir()), say=lambda text: None)
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps(
            {
                "llm": {"endpoint": model.base_url, "model": "m", "stream": False, "maxRetries": 0},
                "mcpServers": {"p": {"url": protected.url, "oauth": {}}},
                "gateway": {"port": free_port(), "exposeTools": True, "recordDir": str(tmp_path / "rec")},
            }
        )
    )
    env = {
        **otel_env(endpoint),
        "MCP_AGENT_STATE_DIR": str(state_dir()),
        "PYTHONPATH": str(ROOT),
        "MCP_AGENT_BROWSER": "false",  # the gateway never opens one
    }
    log = tmp_path / "serve.log"
    counts = protected.provider.counts
    answers: list[str] = []
    events: list[bytes] = []
    async with (
        serving(config, env, log) as (process, url),
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                async with http.stream("GET", "/api/v1/events") as stream:
                    async for chunk in stream.aiter_bytes():
                        events.append(chunk)

            tg.start_soon(listen)
            await eventually(lambda: bool(events), timeout=30)  # ": listening"

            first = (await http.post("/api/v1/query", json={"query": "add"})).json()
            assert first["answer"] == "the sum is 5.0", first

            protected.provider.expire_access()  # mid-run the server stops taking the token: 401
            second = (await http.post("/api/v1/query", json={"query": "add again"})).json()
            assert second["answer"] == "the sum is 5.0", second
            assert counts["refresh"] == 1

            path = store_file()  # now the token expires by the clock (as after a night)
            stored = json.loads(path.read_text())
            stored["expires_at"] = 1.0
            path.write_text(json.dumps(stored))
            async with (
                streamable_http_client(f"{url}/mcp") as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                called = await session.call_tool("p__add", {"a": 4, "b": 4})
                assert (called.is_error, called.content[0].text) == (False, "8.0")  # type: ignore[union-attr]
            assert counts["refresh"] == 2  # refreshed before it was sent
            assert counts["authorize"] == 1  # no person was needed after the first login

            for path_ in ("/api/v1/health", "/api/v1/tools", "/api/v1/runs", "/api/v1/sessions", "/"):
                answers.append((await http.get(path_)).text)
            for run in (await http.get("/api/v1/runs")).json()["runs"]:
                answers.append((await http.get(f"/api/v1/runs/{run['id']}")).text)
            await eventually(lambda: b"run_ended" in b"".join(events) or b"RunEnded" in b"".join(events), 10)
            tg.cancel_scope.cancel()
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(60):
            await process.wait()

    exported = await anyio.to_thread.run_sync(lambda: spans.wait_for("invoke_agent mcp_agent", count=2))
    assert exported
    traces = json.dumps([span.__dict__ for span in spans.spans], default=str)
    assert "execute_tool" in traces or "p__add" in traces  # the tool's span went out
    recordings = [p.read_text() for p in (tmp_path / "rec").rglob("*") if p.is_file()]
    assert len(recordings) == 2 and all("p__add" in text for text in recordings)
    issued = protected.provider.issued
    assert len(issued) >= 6  # three access and three refresh tokens
    store = store_file()
    files = {p: p.read_bytes().decode(errors="replace") for p in Path(state_dir()).rglob("*") if p.is_file()}
    assert store in files and len(files) > 1
    scanned = {
        "log": log.read_text(),
        "events": b"".join(events).decode(errors="replace"),
        "traces": traces,
        "recordings": "\n".join(recordings),
        "dashboard": "\n".join(answers),
        **{str(p): text for p, text in files.items() if p != store},
    }
    assert "run_ended" in scanned["events"] or "RunEnded" in scanned["events"]
    for where, text in scanned.items():
        assert text.strip(), where  # each place was looked at
        assert not [token for token in issued if token in text], where
    assert any(token in files[store] for token in issued)  # the store, and only it, holds them
