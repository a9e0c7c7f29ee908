"""Fuzzing the MCP JSON-RPC input of a real gateway: Streamable HTTP (both eras), SSE and stdio.

Never a 500 or a crash: every input gets a classified answer (a JSON-RPC result or error, a 4xx,
or, for a notification, nothing), and a valid request right after is still answered.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.model_server import FakeModelServer

from ._table import record
from .conftest import ROOT, Gateway, write_config

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=80)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=20,
)
METHODS = st.sampled_from(
    [
        "tools/call",
        "tools/list",
        "ping",
        "initialize",
        "resources/list",
        "prompts/get",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/initialized",
        "completion/complete",
        "logging/setLevel",
        "server/discover",
        "subscriptions/listen",
        "",
        "nope/nope",
    ]
)
AGENT_QUERY_ARGS = st.one_of(
    JSON_VALUES,
    st.fixed_dictionaries(
        {"query": st.one_of(ANY_TEXT, JSON_VALUES)},
        optional={"session_id": st.one_of(ANY_TEXT, JSON_VALUES), "limits": JSON_VALUES},
    ),
)
CALL_PARAMS = st.fixed_dictionaries(
    {"name": st.one_of(st.sampled_from(["agent_query", "echo__echo", "nope", ""]), ANY_TEXT, JSON_VALUES)},
    optional={
        "arguments": AGENT_QUERY_ARGS,
        "_meta": st.one_of(JSON_VALUES, st.just({"progressToken": "p"})),
    },
)
MESSAGES = st.one_of(
    # well-formed envelopes with random methods and params
    st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "method": METHODS},
        optional={"id": st.one_of(st.integers(), ANY_TEXT, JSON_VALUES), "params": JSON_VALUES},
    ),
    # tools/call with random arguments (the agent_query parser's input)
    st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": st.integers(1, 10**6),
            "method": st.just("tools/call"),
            "params": CALL_PARAMS,
        }
    ),
    # anything at all
    JSON_VALUES,
)
HANDSHAKE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "1"},
    },
}
STREAMABLE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def encode(message: Any) -> bytes:
    return json.dumps(message).encode()  # lone surrogates go out escaped, as a JSON client would send them


def classify_http(response: httpx.Response) -> str:
    status = response.status_code
    assert status < 500, (status, response.text[:500])
    text = response.text
    if "event: message" in text or text.startswith("{"):
        kinds = set()
        for line in text.replace("\r\n", "\n").split("\n"):  # SSE lines end only in CR/LF
            body = line[6:] if line.startswith("data: ") else line if line.startswith("{") else ""
            if body:
                message = json.loads(body)  # always JSON
                kinds.add("error" if "error" in message else "result" if "result" in message else "other")
        return f"{status} {'+'.join(sorted(kinds)) or 'empty'}"
    return str(status)


@pytest.fixture(scope="module")
def http(gateway: Gateway) -> Iterator[httpx.Client]:
    with gateway.client() as client:
        yield client


@pytest.fixture(scope="module")
def session_id(http: httpx.Client) -> str:
    opened = http.post("/mcp", content=encode(HANDSHAKE), headers=STREAMABLE)
    session = opened.headers["mcp-session-id"]
    http.post(
        "/mcp",
        content=encode({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        headers={**STREAMABLE, "mcp-session-id": session},
    )
    return session


def assert_answers(http: httpx.Client, headers: dict[str, str]) -> None:
    ping = http.post(
        "/mcp", content=encode({"jsonrpc": "2.0", "id": "live", "method": "ping"}), headers=headers
    )
    assert ping.status_code == 200 and '"live"' in ping.text, ping.text


@FUZZ
@given(message=MESSAGES)
def test_streamable_http_in_a_session(
    gateway: Gateway, http: httpx.Client, session_id: str, message: Any
) -> None:
    headers = {**STREAMABLE, "mcp-session-id": session_id}
    response = http.post("/mcp", content=encode(message), headers=headers)
    record("MCP Streamable HTTP (2025 session)", classify_http(response))
    assert gateway.alive()
    assert_answers(http, headers)


MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def with_envelope(message: Any) -> Any:
    """A 2026 request carries its protocol envelope in ``params._meta``."""
    if isinstance(message, dict) and "method" in message:
        params = message.get("params")
        params = dict(params) if isinstance(params, dict) else {}
        params["_meta"] = ENVELOPE
        return {**message, "params": params}
    return message


@FUZZ
@given(message=MESSAGES, envelope=st.booleans())
def test_streamable_http_modern(gateway: Gateway, http: httpx.Client, message: Any, envelope: bool) -> None:
    headers = {**STREAMABLE, "mcp-protocol-version": MODERN}
    if envelope:
        message = with_envelope(message)
        method = message.get("method") if isinstance(message, dict) else None
        if isinstance(method, str) and method.isascii() and method.isprintable():
            headers["mcp-method"] = method
    response = http.post("/mcp", content=encode(message), headers=headers)
    record("MCP Streamable HTTP (2026)", classify_http(response))
    assert gateway.alive()
    alive = with_envelope({"jsonrpc": "2.0", "id": "live", "method": "tools/list"})  # 2026 has no ping
    answer = http.post("/mcp", content=encode(alive), headers={**headers, "mcp-method": "tools/list"})
    assert answer.status_code == 200 and '"live"' in answer.text, answer.text


@FUZZ
@given(raw=st.binary(max_size=300))
def test_streamable_http_raw_bytes(gateway: Gateway, http: httpx.Client, session_id: str, raw: bytes) -> None:
    headers = {**STREAMABLE, "mcp-session-id": session_id}
    response = http.post("/mcp", content=raw, headers=headers)
    record("MCP Streamable HTTP raw bytes", classify_http(response))
    assert gateway.alive()


class SseSession:
    """A GET /sse stream read by a thread (its answers must be drained), and its POST endpoint."""

    def __init__(self, gateway: Gateway) -> None:
        self.client = httpx.Client(base_url=gateway.url, timeout=httpx.Timeout(30, read=None))
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.endpoint: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        self.path = self.endpoint.get(timeout=10)

    def _read(self) -> None:
        with self.client.stream("GET", "/sse") as response:
            event = ""
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    if event == "endpoint":
                        self.endpoint.put(line[6:])
                    else:
                        self.events.put(json.loads(line[6:]))  # always JSON

    def post(self, body: bytes) -> httpx.Response:
        return self.client.post(self.path, content=body, headers={"content-type": "application/json"})

    def answer(self, request_id: Any, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self.events.get(timeout=max(deadline - time.monotonic(), 0.01))
            if message.get("id") == request_id:
                return message

    def close(self) -> None:
        self.client.close()


@pytest.fixture(scope="module")
def sse(gateway: Gateway) -> Iterator[SseSession]:
    session = SseSession(gateway)
    assert session.post(encode(HANDSHAKE)).status_code == 202
    session.answer(0)
    session.post(encode({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield session
    session.close()


@FUZZ
@given(message=MESSAGES)
def test_sse_messages(gateway: Gateway, sse: SseSession, message: Any) -> None:
    response = sse.post(encode(message))
    assert response.status_code < 500, response.text
    record("MCP SSE message", str(response.status_code))
    assert gateway.alive()
    marker = f"live-{time.monotonic_ns()}"
    assert sse.post(encode({"jsonrpc": "2.0", "id": marker, "method": "ping"})).status_code == 202
    assert "result" in sse.answer(marker)


class StdioGateway:
    """``mcp-agent serve --stdio`` with a reader thread that checks every stdout line is JSON-RPC.

    Its state folder is beside its config: a module-scoped fixture starts before the suite's
    per-test ``MCP_AGENT_STATE_DIR`` is set, and must not use the user's state folder.
    """

    def __init__(self, config: str) -> None:
        state = Path(config).parent / "state"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mcp_agent", "serve", "--stdio", "--config", config],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=str(ROOT),
            env={**os.environ, "MCP_AGENT_STATE_DIR": str(state)},
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.bad: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
                assert isinstance(message, dict) and message.get("jsonrpc") == "2.0"
                self.lines.put(message)
            except (ValueError, AssertionError):
                self.bad.append(line)

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def answer(self, request_id: Any, timeout: float = 20) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The answer to ``request_id`` and the messages that came before it."""
        deadline = time.monotonic() + timeout
        before = []
        while True:
            message = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            if message.get("id") == request_id:
                return message, before
            before.append(message)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture(scope="module")
def stdio(model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioGateway]:
    config = write_config(tmp_path_factory.mktemp("stdio"), model.base_url)
    gateway = StdioGateway(str(config))
    gateway.send(encode(HANDSHAKE))
    gateway.answer(0, timeout=60)  # the handshake's answer
    gateway.send(encode({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield gateway
    gateway.close()
    assert gateway.process.returncode == 0


@FUZZ
@given(line=st.one_of(MESSAGES.map(encode), st.binary(max_size=200).filter(lambda b: b"\n" not in b)))
def test_stdio_lines(stdio: StdioGateway, line: bytes) -> None:
    stdio.send(line)
    marker = f"live-{time.monotonic_ns()}"
    stdio.send(encode({"jsonrpc": "2.0", "id": marker, "method": "ping"}))
    answer, before = stdio.answer(marker)
    assert "result" in answer
    assert stdio.process.poll() is None and stdio.bad == []
    kinds = sorted(
        {"error" if "error" in m else "result" if "result" in m else "notification" for m in before}
    )
    record("MCP stdio line", "+".join(kinds) or "no answer (a notification, or unparseable)")
