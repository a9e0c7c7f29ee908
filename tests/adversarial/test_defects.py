"""Each defect of the adversarial pass (issue 8), replayed against real processes.

D1 issued ids refused, D2 a missing dependency of ``web``, D3 unbounded sizes, D4 secrets on the
open health route, D5 trusted usage, D6 500s for bad input, D7 exposed calls and approvals
without bounds, D8 children surviving SIGKILL, D9 SSRF and oracle gaps in the bundled servers,
D10 Host rules that differ by route. Every test here failed before its fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import anyio
import httpx
import psutil
import pytest

from tests.bundled.harness import ServerSpec, call, open_clients
from tests.fakes.model_server import FakeModelServer, Reply
from tests.fakes.openai_shapes import Call, completion
from tests.gateway.e2e import SERVERS

from ._table import record
from .conftest import ROOT, Gateway, start_gateway, stop_gateway

TOKEN = "adversarial-" + "t" * 20
T = TypeVar("T")


@pytest.fixture(scope="module")
def http(gateway: Gateway) -> Iterator[httpx.Client]:
    with gateway.client() as client:
        yield client


def test_d1_every_issued_conversation_id_is_accepted_back(gateway: Gateway, http: httpx.Client) -> None:
    """About 3 % of ids started with '-' or '_' and were refused on the caller's next turn."""
    refused = 0
    for index in range(300):
        first = http.post("/api/v1/query", json={"query": f"turn one {index}"}).json()
        again = http.post("/api/v1/query", json={"query": "turn two", "session_id": first["session_id"]})
        refused += again.status_code != 200
        record("D1 issued id sent back", "accepted" if again.status_code == 200 else "refused")
    assert refused == 0
    bad = http.post("/api/v1/query", json={"query": "q", "session_id": "abc\n"})
    assert bad.status_code == 400  # the rule is a full match: no trailing newline


def test_d2_the_web_server_reads_html_with_what_is_declared() -> None:
    """lxml >= 5.2 split lxml.html.clean into lxml_html_clean: every HTML page failed."""
    done = subprocess.run(
        [sys.executable, "-c", "from lxml.html.clean import Cleaner; import trafilatura; print('ok')"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "ok", done.stderr
    assert "lxml_html_clean" in (ROOT / "pyproject.toml").read_text()


# ------------------------------------------------------------------------------------------ D3: sizes


@pytest.fixture(scope="module")
def sized(model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway with the ``huge`` fixture server and small caps, so each replay is quick."""
    huge = {"command": sys.executable, "args": [str(SERVERS / "huge.py")], "maxMessageBytes": 1_000_000}
    running = start_gateway(
        tmp_path_factory.mktemp("d3"),
        model.base_url,
        llm={"maxResponseBytes": 2_000_000, "maxToolArgumentChars": 100_000},
        servers={"huge": huge},
    )
    try:
        yield running
    finally:
        stop_gateway(running)


def _ask_with(model: FakeModelServer, running: Gateway, *replies: Reply) -> dict[str, object]:
    """One query whose first model calls get ``replies`` (the rule model answers the rest)."""
    model.enqueue(*replies, only="/chat/completions")  # not the gateways' model-server probes
    with running.client() as client:
        answer = client.post("/api/v1/query", json={"query": "replay"})
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def _peak_rss_while(running: Gateway, work: Callable[[], T]) -> tuple[T, float]:
    """``work()``'s value and the gateway's peak RSS (MB) while it ran."""
    process, peak, stop = psutil.Process(running.process.pid), [0.0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], process.memory_info().rss / 2**20)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        value = work()
    finally:
        stop.set()
        sampler.join()
    return value, peak[0]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("huge__noise", {"chars": 300_000_000}), ("huge__parts", {"bytes": 60_000_000})],
    ids=["300MB-line-without-a-message", "60MB-2M-parts-result"],
)
def test_d3_a_huge_stdout_line_is_never_held(
    model: FakeModelServer, sized: Gateway, tool: str, arguments: dict[str, int]
) -> None:
    """A 300 MB line stayed in memory; a 62 MB, 2-million-part result took the gateway to 2.4 GB."""
    call = Reply.json(completion(content=None, calls=[Call(tool, arguments, id="big")]))
    answer, peak = _peak_rss_while(sized, lambda: _ask_with(model, sized, call))
    assert peak < 250, f"peak RSS {peak:.0f} MB"
    text = str(answer["answer"])
    if tool == "huge__parts":
        assert "maxMessageBytes" in text, text[:500]
    record("D3 huge stdout line", f"peak RSS under 250 MB ({peak:.0f})")
    with sized.client() as client:
        sized.assert_healthy(client)


def test_d3_an_endless_model_stream_is_cut_at_its_cap(model: FakeModelServer, sized: Gateway) -> None:
    """A model stream had no total cap (1 GB in 30 s were accepted)."""
    answer = _ask_with(
        model, sized, Reply.endless(b"x" * 65536, headers={"content-type": "application/json"})
    )
    assert answer["termination_reason"] == "llm_error"
    assert "llm.maxResponseBytes" in str(answer["error"])
    record("D3 endless model body", "llm_error at llm.maxResponseBytes")


def test_d3_huge_tool_call_arguments_are_refused_unparsed(model: FakeModelServer, sized: Gateway) -> None:
    """50 MB of tool-call arguments were accepted (and parsed, and repaired)."""
    huge = Call("echo__echo", '{"text": "' + "y" * 1_500_000 + '"}', id="args")
    answer = _ask_with(model, sized, Reply.json(completion(content=None, calls=[huge])))
    assert answer["termination_reason"] == "success"
    assert "llm.maxToolArgumentChars" in str(answer["answer"])  # the model read the refusal
    record("D3 1.5 MB tool-call arguments", "refused unparsed; the run went on")


# ------------------------------------------------------------------------------------------ D5: usage


@pytest.mark.parametrize(
    ("usage", "shown"),
    [((-(10**9), 5), "negative"), ((10**300, 10**300), "309 digits")],
    ids=["negative", "absurd"],
)
def test_d5_reported_usage_is_clamped_and_flagged(
    gateway: Gateway, model: FakeModelServer, usage: tuple[int, int], shown: str
) -> None:
    """Negative token counts defeated maxTokens; absurd ones were printed as 309-digit numbers."""
    answer = _ask_with(model, gateway, Reply.json(completion(content="fine", usage=usage)))
    counted = answer["usage"]
    assert isinstance(counted, dict) and counted["clamped"] is True
    assert all(
        0 <= counted[key] <= 2 * 10_000_000 for key in ("prompt_tokens", "completion_tokens", "total_tokens")
    )
    record("D5 reported usage", f"{shown}: clamped and flagged")


def test_d4_open_health_tells_only_status_and_version(
    model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Health showed llm.endpoint with user:password and ?key=, and servers' stderr tails."""
    folder = tmp_path_factory.mktemp("d4")
    endpoint = model.base_url.replace("http://", "http://alice:pa55word@") + "?key=k3y-secret"
    running = start_gateway(folder, endpoint, authToken=TOKEN)
    try:
        with running.client() as client:
            open_answer = client.get("/api/v1/health").json()
            detailed = client.get("/api/v1/health", headers={"Authorization": f"Bearer {TOKEN}"}).text
    finally:
        stop_gateway(running)
    assert set(open_answer) == {"status", "version"}
    assert "pa55word" not in detailed and "k3y-secret" not in detailed and "***" in detailed
    record("D4 health", "open: status+version; details masked")


@pytest.mark.parametrize(
    "body",
    [b'{"query": "\\ud800"}', b"[" * 100_000 + b"]" * 100_000, b'{"query": ' + b"1" * 5000 + b"}"],
    ids=["lone-surrogate", "100k-deep", "5000-digits"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_d6_bad_input_is_a_400_not_a_500(
    gateway: Gateway, http: httpx.Client, body: bytes, stream: bool
) -> None:
    headers = {"content-type": "application/json"} | ({"accept": "text/event-stream"} if stream else {})
    response = http.post("/api/v1/query", content=body, headers=headers)
    assert response.status_code == 400, response.text[:300]
    record("D6 bad REST input", f"{response.status_code} {response.json()['error']['type']}")
    gateway.assert_healthy(http)


def test_d7_exposed_calls_wait_for_query_slots(
    model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """100 exposed tool calls once ran at once under maxConcurrentQueries 2."""
    folder = tmp_path_factory.mktemp("d7")
    running = start_gateway(folder, model.base_url, maxConcurrentQueries=2, maxQueuedQueries=100)
    config = json.loads(running.config.read_text())
    assert config["gateway"]["exposeTools"]
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        with running.client() as client:
            while not stop.is_set():
                seen.append(client.get("/api/v1/health").json()["queries_in_flight"])
                time.sleep(0.005)

    async def flood() -> list[str]:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        texts: list[str] = []
        async with (
            streamable_http_client(f"{running.url}/mcp") as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            async with anyio.create_task_group() as tg:
                for index in range(20):

                    async def one(index: int = index) -> None:
                        result = await s.call_tool("echo__echo", {"text": f"e{index}"})
                        texts.append(result.content[0].text)

                    tg.start_soon(one)
        return texts

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        texts = anyio.run(flood)
    finally:
        stop.set()
        watcher.join()
        stop_gateway(running)
    assert sorted(texts) == sorted(f"e{index}" for index in range(20))
    assert max(seen) <= 2
    record("D7 exposed calls", f"at most {max(seen)} at once under a cap of 2")


def test_d7_waiting_approvals_are_capped(
    model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """One caller once had 300 approvals waiting."""
    approvals = {"require": ["echo__*"], "timeoutSeconds": 2, "maxPending": 3}
    running = start_gateway(
        tmp_path_factory.mktemp("d7b"), model.base_url, approvals=approvals, maxConcurrentQueries=40
    )

    async def flood() -> tuple[list[str], int]:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        texts: list[str] = []
        most = 0
        async with (
            streamable_http_client(f"{running.url}/mcp") as (read, write),
            ClientSession(read, write) as session,
            httpx.AsyncClient(base_url=running.url) as http,
        ):
            await session.initialize()
            async with anyio.create_task_group() as tg:
                for index in range(30):

                    async def one(index: int = index) -> None:
                        result = await session.call_tool("echo__echo", {"text": f"e{index}"})
                        texts.append(result.content[0].text)

                    tg.start_soon(one)
                while len(texts) < 30:
                    most = max(most, len((await http.get("/api/v1/approvals")).json()["pending"]))
                    await anyio.sleep(0.01)
        return texts, most

    try:
        texts, most = anyio.run(flood)
    finally:
        stop_gateway(running)
    assert most <= 3
    assert sum("too many approvals are waiting" in text for text in texts) >= 27
    record("D7 gated calls", f"at most {most} waiting under approvals.maxPending 3; the rest denied at once")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_d8_children_die_with_a_killed_gateway_and_the_next_start_reaps_the_rest(
    model: FakeModelServer, tmp_path: Path
) -> None:
    """After SIGKILL of the gateway a tool server's forked grandchild survived."""
    grandchild = {
        "command": sys.executable,
        "args": [str(SERVERS / "grandchild.py")],
        "env": {"GRANDCHILD_STAYS": "1"},  # outlives the end of its stdin: only a signal stops it
    }
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps({"llm": {"endpoint": model.base_url, "model": "m"}, "mcpServers": {"g": grandchild}})
    )
    env = os.environ | {"MCP_AGENT_STATE_DIR": str(tmp_path / "state")}
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_agent", "serve", "--config", str(config), "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(ROOT),
        env=env,
    )
    left: list[psutil.Process] = []
    try:
        _wait(lambda: _healthy(f"http://127.0.0.1:{port}"), 30)
        [server] = psutil.Process(process.pid).children()
        _wait(lambda: len(server.children()) == 1, 20)
        left = [server, *server.children()]
        process.kill()
        process.wait()
        _wait(lambda: _alive([server.pid]) == [], 20)  # died with the gateway
        assert _alive([left[1].pid]) == [left[1].pid]  # the grandchild did not
        done = subprocess.run(
            [sys.executable, "-m", "mcp_agent", "-v", "tools", "--config", str(config)],
            cwd=str(ROOT),
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert _alive([left[1].pid]) == []
        assert b"reaped 1 orphaned process(es) of tool server 'g'" in done.stderr
        record("D8 SIGKILL", "server died with the gateway; grandchild reaped at the next start")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for orphan in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                orphan.kill()


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
        "http://[64:ff9b:1::a00:1]/",  # local-use NAT64
        "http://[2002:7f00:1::1]/",  # 6to4 of 127.0.0.1
        "http://[2002:a9fe:a9fe::1]/",  # 6to4 of 169.254.169.254 (cloud metadata)
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
        "http://[::ffff:169.254.169.254]/",
        "http://[::127.0.0.1]/",  # IPv4-compatible
    ],
)
async def test_d9_the_web_server_refuses_internal_addresses_in_any_ipv6_form(
    url: str, tmp_path: Path
) -> None:
    with open(tmp_path / "err.txt", "w") as errlog:
        async with open_clients([ServerSpec("web", "web")], errlog) as clients:
            text, is_error = await call(clients["web"], "fetch_url", {"url": url})
    assert is_error and "refus" in text.lower(), text
    record("D9 SSRF forms", "refused")


async def test_d9_system_and_ports_reveal_no_secrets(tmp_path: Path) -> None:
    secret_dir = tmp_path / ".ssh"
    secret_dir.mkdir()
    (secret_dir / "id_ed25519").write_text("PRIVATE")
    listener = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen();"
            "print(s.getsockname()[1], flush=True); time.sleep(60)",
            "--api-key=sk-proj-secretsecretsecret123",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert listener.stdout is not None
        port = int(listener.stdout.readline())
        with open(tmp_path / "err.txt", "w") as errlog:
            async with open_clients(
                [ServerSpec("system", "system"), ServerSpec("ports", "ports")], errlog
            ) as clients:
                present, _ = await call(
                    clients["system"], "disk_usage", {"path": str(secret_dir / "id_ed25519")}
                )
                missing, _ = await call(
                    clients["system"], "disk_usage", {"path": str(secret_dir / "id_nope")}
                )
                check, _ = await call(clients["ports"], "check_port", {"port": port})
                table, _ = await call(clients["ports"], "list_listening_ports")
    finally:
        listener.kill()
        listener.wait()
        if listener.stdout is not None:
            listener.stdout.close()
    assert present.replace("id_ed25519", "X") == missing.replace("id_nope", "X")  # no existence oracle
    for text in (check, table):
        assert "sk-proj-secretsecretsecret123" not in text
    record("D9 system/ports", "no oracle, no secrets")


@pytest.mark.parametrize("host", ["evil.localhost", "127.0.0.2", "LOCALHOST:1", "localhost:abc"])
def test_d10_one_host_rule_for_every_route(gateway: Gateway, http: httpx.Client, host: str) -> None:
    """REST accepted evil.localhost, 127.0.0.2 and LOCALHOST:1 where /mcp refused them."""
    statuses = set()
    for method, path in [
        ("GET", "/api/v1/health"),
        ("GET", "/metrics"),
        ("POST", "/mcp"),
        ("POST", "/api/v1/query"),
    ]:
        response = http.request(method, path, headers={"Host": host}, json={})
        statuses.add(response.status_code == 421)
    assert len(statuses) == 1, host  # accepted everywhere or refused everywhere
    record("D10 Host rule", f"{host}: {'refused' if statuses == {True} else 'accepted'} on every route")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def _alive(pids: list[int]) -> list[int]:
    running = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
    return running
