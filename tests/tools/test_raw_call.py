"""The raw call path to 2026-07-28 Streamable HTTP servers (``tools/server/raw_call.py``) against
the SDK's session: the same results, the same failures, the same wire, and a kept connection.

Every test runs a real server process (``tests/servers/raw_http.py``, a hand-written 2026-07-28
server that can answer as JSON or as SSE) and a real ``ServerConnection``; ``path`` runs it once
with the raw path (the default) and once with ``MCP_AGENT_RAW_CALLS=0`` (the SDK's session), and
``raw_calls`` counts the calls that went the raw way, so a test knows which path it ran.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp_agent.config import RemoteServerConfig
from mcp_agent.messages import ToolResult
from mcp_agent.tools.relay import Resume, relaying_to
from mcp_agent.tools.server import raw_call
from mcp_agent.tools.server.connection import ServerConnection
from mcp_agent.tools.server.raw_call import RAW_CALLS_ENV, RawCaller
from mcp_agent.tools.server.session import INPUT_REQUIRED_RELAYED
from tests.servers import over_http
from tests.telemetry.conftest import Spans, spans  # noqa: F401 (spans: a fixture)

from .conftest import FAST_RESTARTS

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """One ``raw_http.py`` for the tests that do not kill it or count its connections."""
    with over_http("raw_http.py") as url:
        yield url


@dataclass
class RawCalls:
    """How many calls went the raw way."""

    count: int = 0


@pytest.fixture
def raw_calls(monkeypatch: pytest.MonkeyPatch) -> RawCalls:
    counter = RawCalls()
    original = RawCaller.call_tool

    async def counted(self: RawCaller, *args: Any, **kwargs: Any) -> Any:
        counter.count += 1
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(RawCaller, "call_tool", counted)
    return counter


@pytest.fixture(params=["raw", "sdk"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(RAW_CALLS_ENV, "1" if request.param == "raw" else "0")
    return str(request.param)


@asynccontextmanager
async def running(url: str, **options: Any) -> AsyncIterator[ServerConnection]:
    """A ServerConnection to ``url``, up."""
    connection = ServerConnection("srv", RemoteServerConfig(url=url, **options), policy=FAST_RESTARTS)
    async with anyio.create_task_group() as tg:
        await tg.start(connection.run)
        try:
            assert connection.state == "up", connection.error
            assert connection.protocol_version == (LEGACY if options.get("protocol") == "legacy" else MODERN)
            yield connection
        finally:
            connection.stop()


def seen(result: ToolResult) -> tuple[Any, ...]:
    """What a result says, without its timing."""
    return (result.text, result.is_error, result.content, result.structured)


async def until(condition: Any, seconds: float = 20) -> None:
    """Wait until ``condition()`` is true; a does-not-hang bound, not a timing claim."""
    with anyio.fail_after(seconds):
        while not await condition():
            await anyio.sleep(0.02)


def check_path(path: str, raw_calls: RawCalls, calls: int) -> None:
    assert raw_calls.count == (calls if path == "raw" else 0)


# ------------------------------------------------------------------------- results

CASES: list[tuple[str, dict[str, Any], tuple[Any, ...]]] = [
    ("echo", {"text": "hello"}, ("hello", False)),
    ("structured", {}, ('{"a": 1}', False)),
    ("fail", {}, ("disk is on fire", True)),
    ("image", {}, (None, False)),
    ("rpc_error", {}, ("tool rpc_error failed: bad things (MCP error -32602)", True)),
    ("nonesuch", {}, ("tool nonesuch failed: Unknown tool: nonesuch (MCP error -32602)", True)),
    ("bad_result", {}, (None, True)),
]


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
async def test_each_kind_of_answer_is_the_same_on_both_paths(
    sse: bool, server_url: str, raw_calls: RawCalls
) -> None:
    """Text, structured content, isError, an image, a protocol error, an unknown tool and an invalid
    result: the raw path's ``ToolResult`` is the SDK path's, answered as JSON or as SSE."""
    results: dict[str, list[tuple[Any, ...]]] = {}
    for path in ("raw", "sdk"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(RAW_CALLS_ENV, "1" if path == "raw" else "0")
            async with running(server_url) as connection:
                results[path] = [
                    seen(await connection.call(tool, {**arguments, "sse": sse}))
                    for tool, arguments, _ in CASES
                ]
        assert raw_calls.count == len(CASES)  # the raw path took them all, the SDK's none
    assert results["raw"] == results["sdk"]
    for (tool, _, (text, is_error)), result in zip(CASES, results["raw"], strict=True):
        assert result[1] is is_error, (tool, result)
        if text is not None:
            assert result[0] == text, (tool, result)
    image = results["raw"][3]
    assert [part["type"] for part in image[2]] == ["text", "image"]
    assert results["raw"][1][3] == {"a": 1}
    assert results["raw"][6][0].startswith("tool bad_result failed: the server returned an invalid result (")


BROKEN: list[tuple[str, str]] = [
    ("accepted", "tool accepted failed: server answered a request with 202 Accepted (MCP error -32600)"),
    ("status_error", "tool status_error failed: refused at 400 (MCP error -32602)"),
    ("status_404", "tool status_404 failed: Not Found (MCP error -32601)"),
    ("status_500", "tool status_500 failed: Server returned an error response (MCP error -32603)"),
    ("plain_text", "tool plain_text failed: Unexpected content type: text/plain (MCP error -32600)"),
    ("garbage", "tool garbage failed: server srv: Failed to parse JSON response: "),
    ("garbage_sse", "tool garbage_sse failed: server srv: Failed to parse SSE message: "),
    ("cut_sse", "tool cut_sse failed: server srv: SSE stream ended without a response"),
]


async def test_answers_wrong_at_the_http_level_fail_as_on_the_sdk_path(
    server_url: str, raw_calls: RawCalls
) -> None:
    """202, error statuses with and without a JSON-RPC error, a wrong content type, bodies and
    events that do not parse, a stream that ends without a response: the same error results."""
    results: dict[str, list[tuple[Any, ...]]] = {}
    for path in ("raw", "sdk"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(RAW_CALLS_ENV, "1" if path == "raw" else "0")
            async with running(server_url) as connection:
                results[path] = [seen(await connection.call(tool, {})) for tool, _ in BROKEN]
                assert connection.state == "up"
    assert raw_calls.count == len(BROKEN)
    for (tool, text), raw, sdk in zip(BROKEN, results["raw"], results["sdk"], strict=True):
        assert raw[1] and sdk[1], tool
        assert raw[0].startswith(text), (tool, raw[0])
        assert sdk[0].startswith(text), (tool, sdk[0])
        assert raw == sdk  # the parser's words too: a message that does not parse is parsed the SDK's way


async def test_a_redirect_goes_the_sdk_way(path: str, server_url: str, raw_calls: RawCalls) -> None:
    async with running(server_url) as connection:
        result = await connection.call("redirect", {})
    assert (result.text, result.is_error) == ("redirected", False)
    check_path(path, raw_calls, 1)  # tried raw, then sent again by the SDK, which follows it


async def test_a_timeout_cancels_the_call_on_the_server_and_the_connection_stays_up(
    path: str, server_url: str, raw_calls: RawCalls
) -> None:
    async with running(server_url) as connection:

        async def cancelled() -> int:
            return int((await connection.call("cancelled", {})).text)

        before = await cancelled()
        result = await connection.call("sleep", {"seconds": 60}, timeout=0.3)
        assert (result.text, result.is_error) == ("tool sleep timed out after 0.3 s", True)

        async def seen_by_server() -> bool:  # the server saw the client go away
            return await cancelled() == before + 1

        await until(seen_by_server)
        assert (await connection.call("echo", {"text": "still here"})).text == "still here"
        assert connection.state == "up"
    assert raw_calls.count >= 4 if path == "raw" else raw_calls.count == 0


async def test_a_server_that_dies_mid_call_fails_the_call_and_ends_the_connection(
    path: str, raw_calls: RawCalls
) -> None:
    with over_http("raw_http.py") as url:
        async with running(url) as connection:
            result = await connection.call("die", {})
            assert result.is_error
            assert "connection closed" in result.text.lower(), result.text
            assert result.text.startswith("tool die failed: server srv")

            async def down() -> bool:
                return connection.state != "up"

            await until(down)  # the incarnation ended: restarting (and failing: nobody listens)
    check_path(path, raw_calls, 1)


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
async def test_a_body_over_max_message_bytes_fails_its_call_with_the_hint(
    sse: bool, path: str, server_url: str, raw_calls: RawCalls
) -> None:
    async with running(server_url, max_message_bytes=4000) as connection:
        result = await connection.call("big", {"size": 20_000, "sse": sse})
        assert result.is_error
        assert result.text.startswith("tool big failed: server srv: "), result.text
        assert "4000 byte limit" in result.text and result.text.endswith("(mcpServers.srv.maxMessageBytes)")
        fits = await connection.call("big", {"size": 1000, "sse": sse})
        assert (fits.text, fits.is_error) == ("x" * 1000, False)
        assert connection.state == "up"
    check_path(path, raw_calls, 2)


async def test_progress_reaches_the_callback(path: str, server_url: str, raw_calls: RawCalls) -> None:
    got: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        got.append((progress, total, message))

    async with running(server_url) as connection:
        result = await connection.call("progress", {"steps": 3, "sse": True}, on_progress=on_progress)
    assert (result.text, result.is_error) == ("counted to 3", False)
    assert got == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    check_path(path, raw_calls, 1)


# ------------------------------------------------------------------ the channel


@dataclass
class Channel:
    """A client of an exposed call (``tools/relay.CallerChannel``), recording what reaches it."""

    level: types.LoggingLevel | None = None
    answers: types.InputResponses | None = None
    resume: Resume | None = None
    caller: str = "alice"
    client: object = field(default_factory=object)
    progressed: list[float] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    asked: list[types.InputRequiredResult] = field(default_factory=list)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progressed.append(progress)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(f"{params.level}: {params.data}")

    async def ask(self, request: Any) -> Any:
        return types.ErrorData(code=-1, message="no")

    def log_level(self) -> types.LoggingLevel | None:
        return self.level

    def capabilities(self) -> None:
        return None

    async def input_required(self, result: types.InputRequiredResult) -> types.InputResponses | None:
        self.asked.append(result)
        return self.answers

    def refused(self, error: types.ErrorData) -> None:
        pass


async def test_logs_go_to_the_channel_at_its_level(path: str, server_url: str, raw_calls: RawCalls) -> None:
    async with running(server_url) as connection:
        for level in ("info", "error"):
            channel = Channel(level=level)
            with relaying_to(channel):
                result = await connection.call("chatter", {"sse": True})
            assert result.text == "chattered"
            expected = (
                ["error: a line at error"]
                if level == "error"
                else ["info: a line at info", "error: a line at error"]
            )
            assert channel.logs == expected
            channel = Channel(level=level)
            with relaying_to(channel):
                await connection.call("progress", {"steps": 2, "sse": True})
            assert channel.progressed == [1.0, 2.0]  # a channel's progress, without a callback of the caller
    check_path(path, raw_calls, 4)


async def test_input_required_is_answered_through_the_channel_or_relayed(
    path: str, server_url: str, raw_calls: RawCalls
) -> None:
    answer = types.ElicitResult(action="accept", content={"ok": True})
    async with running(server_url) as connection:
        channel = Channel(answers={"q": answer})  # a 2025 client: the gateway asks, then retries
        with relaying_to(channel):
            result = await connection.call("ask", {})
        assert (result.text, result.is_error) == ('answered: {"ok": true}', False)
        assert [request.method for request in channel.asked[0].input_requests.values()] == [
            "elicitation/create"
        ]

        channel = Channel()  # a 2026 client: the result is handed over, and it retries itself
        with relaying_to(channel):
            result = await connection.call("ask", {})
        assert result.text == INPUT_REQUIRED_RELAYED.format(shown="ask")
        retry = Channel(resume=Resume({"q": answer}, channel.asked[0].request_state))
        with relaying_to(retry):
            result = await connection.call("ask", {})
        assert (result.text, result.is_error) == ('answered: {"ok": true}', False)

        result = await connection.call("ask", {})  # the agent's own loop: no channel, an error
        assert result.is_error and "needs elicitation/create from the client" in result.text
    check_path(path, raw_calls, 5)


# ------------------------------------------------------------------------ the wire


async def test_the_raw_path_sends_what_the_sdk_sends(server_url: str, raw_calls: RawCalls) -> None:
    """Headers, the ``_meta`` envelope (log level, progress token) and the params of a first call
    and of a retry, compared POST by POST with the SDK path's."""

    async def ignore(progress: float, total: float | None, message: str | None) -> None:
        pass

    posts: dict[str, list[dict[str, Any]]] = {}
    for path in ("raw", "sdk"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(RAW_CALLS_ENV, "1" if path == "raw" else "0")
            async with running(server_url) as connection:
                await connection.call("echo", {"text": "plain"})
                await connection.call("echo", {"text": "progress"}, on_progress=ignore)
                with relaying_to(
                    Channel(level="error", resume=Resume({"q": types.ElicitResult(action="decline")}, "s"))
                ):
                    await connection.call("echo", {"text": "retry"})
                wire = json.loads((await connection.call("wire", {})).text)
            posts[path] = wire[-4:-1]
    assert raw_calls.count == 4
    for raw, sdk in zip(posts["raw"], posts["sdk"], strict=True):
        assert raw["headers"] == sdk["headers"]
        assert raw["params"] == sdk["params"]
        for post in (raw, sdk):
            token = post["meta"].pop("progressToken", None)
            assert token in (None, post["id"])
        traced = [
            {key: post["meta"].pop(key) for key in ("traceparent", "tracestate") if key in post["meta"]}
            for post in (raw, sdk)
        ]
        assert traced[0].keys() == traced[1].keys()  # each its own span's (with an OpenTelemetry SDK)
        assert raw["meta"] == sdk["meta"]
    plain, _, retry = posts["raw"]
    assert plain["headers"] == {
        "mcp-method": "tools/call",
        "mcp-name": "echo",
        "mcp-protocol-version": MODERN,
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    assert plain["meta"]["io.modelcontextprotocol/logLevel"] == "warning"  # the session's default
    assert retry["meta"]["io.modelcontextprotocol/logLevel"] == "error"  # the channel's
    assert retry["params"] == ["arguments", "inputResponses", "name", "requestState"]


@pytest.mark.parametrize("protocol", ["2026-07-28", "legacy"])
async def test_credentials_in_the_url_go_as_http_basic(
    server_url: str, path: str, protocol: str, raw_calls: RawCalls
) -> None:
    """``http://user:secret@host/mcp`` (no ``oauth``): the calls carry HTTP Basic, on either path
    and in either era, as a plain HTTP client sends them (the OAuth pass-through would drop them)."""
    with_credentials = server_url.replace("http://", "http://user:s%40cret@", 1)
    async with running(with_credentials, protocol=protocol) as connection:
        await connection.call("echo", {"text": "hi"})
        wire = json.loads((await connection.call("wire", {})).text)
    assert wire[-2]["headers"]["authorization"] == "Basic " + base64.b64encode(b"user:s@cret").decode()
    check_path(path if protocol != "legacy" else "sdk", raw_calls, 2)


async def test_a_tool_with_x_mcp_header_goes_the_sdk_way(server_url: str, raw_calls: RawCalls) -> None:
    async with running(server_url) as connection:
        result = await connection.call("header_tool", {"region": "eu"})
        assert result.text == "region eu"
        wire = json.loads((await connection.call("wire", {})).text)
    assert wire[-2]["headers"]["mcp-param-region"] == "eu"
    assert raw_calls.count == 1  # only the call of "wire"


def test_client_capabilities_restate_the_sdks() -> None:
    assert raw_call.client_capabilities(False) == {}
    assert raw_call.client_capabilities(True) == {
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
        "roots": {"listChanged": True},
    }


@pytest.mark.parametrize("protocol", ["2026-07-28", "legacy"])
async def test_sse_answers_keep_their_connection(path: str, protocol: str, raw_calls: RawCalls) -> None:
    """The SDK's transport closes an SSE answer before its end, which loses the TCP connection;
    read to its end on close (``connection._DrainedAnswer``; the raw path too), the connection is
    kept: ten calls, not ten connections, on either path and in either era. The raw path's
    calls go on the lean transport's own kept connection (``lean_http.py``): one more."""
    with over_http("raw_http.py") as url:
        async with running(url, protocol=protocol) as connection:
            for n in range(10):
                assert (await connection.call("echo", {"text": str(n), "sse": True})).text == str(n)
            connections = int((await connection.call("connections", {})).text)
    lean = path == "raw" and protocol != "legacy"
    assert raw_calls.count == (11 if lean else 0)
    assert connections <= (4 if lean else 3), connections


async def test_the_sdks_span_and_its_context_in_meta_on_both_paths(
    spans: Spans,  # noqa: F811 (the fixture imported above)
    server_url: str,
    raw_calls: RawCalls,
) -> None:
    """With an OpenTelemetry SDK in the process, the SDK makes a client span per request and puts
    its context in ``_meta``: the raw path makes the same span and sends the same context."""
    for path in ("raw", "sdk"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(RAW_CALLS_ENV, "1" if path == "raw" else "0")
            async with running(server_url) as connection:
                await connection.call("echo", {"text": path})
                wire = json.loads((await connection.call("wire", {})).text)
        sent = spans.named("MCP send tools/call echo")[-1]
        assert sent.attributes["mcp.method.name"] == "tools/call"
        assert wire[-2]["meta"]["traceparent"].split("-")[2] == f"{sent.context.span_id:016x}", path
    assert raw_calls.count == 2
    assert len(spans.named("MCP send tools/call echo")) == 2
