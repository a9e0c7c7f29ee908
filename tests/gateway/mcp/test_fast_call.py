"""The lean path of a 2026-07-28 ``tools/call`` (``gateway/mcp/fast_call.py``): what it claims it
answers as the SDK's path does, and what it passes still works.

Two real gateways side by side, one with ``gateway.fastCalls`` on and one with it off, over the
same real tool servers (``tests/servers/media.py`` and ``conformance.py`` as stdio children). The
same raw request goes to both; the answers (status, content type, body) must be the same, and
the one with the path on must have claimed it, or passed it, as the rule says. Then the SDK's own
clients: a 2026 ``Client``'s calls are claimed, a 2025 ``ClientSession``'s never are.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCResponse,
)

from mcp_agent.assembly import open_agent
from mcp_agent.config import AgentConfig, parse_config
from mcp_agent.gateway.mcp import fast_call
from mcp_agent.gateway.mcp.fast_call import FastCalls

from ..conftest import Running, eventually, make_config, running_gateway
from .test_server import connect

# the conformance fixture's tools ask for sampling and roots, which the SDK calls deprecated
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

SERVERS = Path(__file__).resolve().parents[2] / "servers"
VERSION = "2026-07-28"


def config(*, fast: bool, require: tuple[str, ...] = (), **gateway: Any) -> AgentConfig:
    data: dict[str, Any] = {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "limits": {"maxResultChars": 50, "toolTimeoutSeconds": 30},
        "mcpServers": {
            "media": {"command": sys.executable, "args": [str(SERVERS / "media.py")]},
            "fx": {"command": sys.executable, "args": [str(SERVERS / "conformance.py")]},
        },
        "approvals": {"require": list(require), "timeoutSeconds": 30},
        "gateway": {"description": "Fast calls.", "exposeTools": True, "fastCalls": fast, **gateway},
    }
    return parse_config(data, environ={})


@asynccontextmanager
async def pair(**options: Any) -> AsyncIterator[tuple[Running, Running]]:
    """A gateway with the lean path on and one with it off, both up with every tool server."""
    async with (
        running_gateway(config(fast=True, **options), factory=open_agent) as on,
        running_gateway(config(fast=False, **options), factory=open_agent) as off,
    ):
        assert isinstance(on.app.fast_calls, FastCalls) and off.app.fast_calls is None
        for gateway in (on, off):
            await eventually(lambda gateway=gateway: all_up(gateway))
        yield on, off


async def all_up(gateway: Running) -> bool:
    return all(status.status == "up" for status in gateway.app.service.server_status())


@pytest.fixture
async def gateways() -> AsyncIterator[tuple[Running, Running]]:
    async with pair() as both:
        yield both


def meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        PROTOCOL_VERSION_META_KEY: VERSION,
        CLIENT_CAPABILITIES_META_KEY: capabilities or {},
        CLIENT_INFO_META_KEY: {"name": "raw", "version": "1"},
        **extra,
    }


def call(name: str, arguments: Any = None, request_id: Any = 7, **params: Any) -> dict[str, Any]:
    """A ``tools/call`` request as a 2026-07-28 client sends it."""
    body: dict[str, Any] = {"name": name, "arguments": arguments or {}, "_meta": meta(), **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def headers_for(message: Any, **more: str) -> dict[str, str]:
    """The headers a 2026-07-28 client sends with ``message``."""
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
    }
    if isinstance(message, dict):
        headers["mcp-method"] = message.get("method", "")
        name = (message.get("params") or {}).get("name")
        if isinstance(name, str):
            headers["mcp-name"] = name
    return {**headers, **more}


Answer = tuple[int, str, bytes]


async def post(gateway: Running, body: bytes, headers: dict[str, str]) -> Answer:
    async with gateway.client() as http:
        response = await http.post("/mcp", content=body, headers=headers)
    return response.status_code, response.headers.get("content-type", ""), response.content


async def both(
    gateways: tuple[Running, Running], message: Any, *, raw: bytes | None = None, **headers: str
) -> tuple[Answer, int]:
    """The same request to both gateways: their answers must be equal; returns it and whether
    the gateway with the lean path claimed it (1) or passed it (0)."""
    on, off = gateways
    body = raw if raw is not None else json.dumps(message).encode()
    fast = on.app.fast_calls
    assert fast is not None
    before = fast.claimed
    answer_on = await post(on, body, headers_for(message, **headers))
    answer_off = await post(off, body, headers_for(message, **headers))
    assert answer_on[:2] == answer_off[:2]
    assert sealed(answer_on[2]) == sealed(answer_off[2])
    return answer_on, fast.claimed - before


def sealed(body: bytes) -> Any:
    """The body as JSON with the upstream server's sealed ``requestState`` (random per seal)
    blanked; any other body as it is."""
    try:
        document = json.loads(body)
    except ValueError:
        return body
    result = document.get("result") if isinstance(document, dict) else None
    if isinstance(result, dict) and "requestState" in result:
        result["requestState"] = "sealed"
    return document


def result_of(answer: Answer) -> Any:
    status, content_type, body = answer
    assert (status, content_type) == (200, "application/json")
    return json.loads(body)["result"]


# ------------------------------------------------------------------------------ claimed


async def test_results_are_the_sdk_paths_byte_for_byte(gateways: tuple[Running, Running]) -> None:
    for name, arguments in [
        ("media__picture", {}),  # every kind of part
        ("media__weather", {}),  # structuredContent held to its outputSchema
        ("media__no_structure", {}),  # the output contract broken: an error result
        ("media__wrong_structure", {}),
        ("media__long", {"size": 40}),  # cut to maxResultChars
        ("media__long", {"size": "many"}),  # invalid arguments: an error result, no call
        ("fx__test_simple_text", {}),
    ]:
        (status, content_type, _), claimed = await both(gateways, call(name, arguments))
        assert (claimed, status, content_type) == (1, 200, "application/json"), name
    invalid, _ = await both(gateways, call("media__long", {"size": "many"}))
    assert result_of(invalid)["isError"] and "size" in result_of(invalid)["content"][0]["text"]


async def test_string_ids_and_structured_results_keep_their_shape(gateways: tuple[Running, Running]) -> None:
    answer, claimed = await both(gateways, call("media__weather", request_id="a-7"))
    document = json.loads(answer[2])
    assert claimed == 1 and document["id"] == "a-7"
    assert document["result"]["structuredContent"] == {"temp": 21.5}
    assert document["result"].get("resultType", "complete") == "complete"


async def test_a_denied_call_is_the_same_error_result() -> None:
    async with pair(require=("media__picture",)) as gateways:
        answers: list[tuple[Answer, int]] = []
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                answers.append(await both(gateways, call("media__picture")))

            tg.start_soon(ask)
            for gateway in gateways:  # the one with the lean path asked first, then the other
                await deny_first(gateway)
    [(answer, claimed)] = answers
    result = result_of(answer)
    assert claimed == 1 and result["isError"] and result["content"][0]["text"].startswith("[DENIED:")


async def deny_first(gateway: Running) -> None:
    """Deny the first approval that ``gateway`` waits for."""
    pending: list[Any] = []
    async with gateway.client() as http:

        async def waiting() -> bool:
            pending[:] = (await http.get("/api/v1/approvals")).json()["pending"]
            return bool(pending)

        await eventually(waiting)
        await http.post(f"/api/v1/approvals/{pending[0]['id']}", json={"approved": False})


async def test_a_crashed_server_is_the_same_error_result(gateways: tuple[Running, Running]) -> None:
    crashed, claimed = await both(gateways, call("media__crash"))
    assert claimed == 1 and result_of(crashed)["isError"]
    down, claimed = await both(gateways, call("media__picture", request_id=8))
    assert claimed == 1 and result_of(down)["isError"]


async def test_an_input_required_round_is_relayed_untouched(gateways: tuple[Running, Running]) -> None:
    message = call("fx__test_input_required_result_request_state")
    message["params"]["_meta"] = meta({"elicitation": {}})
    answer, claimed = await both(gateways, message)
    result = result_of(answer)
    assert claimed == 1 and result["resultType"] == "input_required"
    assert result["requestState"].startswith("v1.") and "confirm" in result["inputRequests"]


async def test_agent_query_refusals_are_the_same_error_result(gateways: tuple[Running, Running]) -> None:
    for arguments in ({"query": ""}, {"query": "hi", "limits": {"maxRounds": "many"}}, {}):
        answer, claimed = await both(gateways, call("agent_query", arguments))
        result = result_of(answer)
        assert claimed == 1 and result["isError"], arguments


async def test_a_missing_client_capability_is_the_same_minus_32021(gateways: tuple[Running, Running]) -> None:
    (status, _, body), claimed = await both(gateways, call("fx__test_missing_capability"))
    error = json.loads(body)["error"]
    assert claimed == 1 and error["code"] == -32021 and status != 200


@pytest.fixture
async def memory_gateway() -> AsyncIterator[Running]:
    """The in-memory tools (``sleep`` records its cancellation), exposed, lean path on."""
    async with running_gateway(make_config(expose_tools=True)) as gateway:
        yield gateway


async def test_a_silent_call_commits_sse_and_pings_as_the_sdk_does(
    memory_gateway: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fast_call, "PING_SECONDS", 0.05)
    message = call("sleep", {"seconds": 0.5})
    status, content_type, body = await post(
        memory_gateway, json.dumps(message).encode(), headers_for(message)
    )
    assert (status, content_type) == (200, "text/event-stream")
    assert body.startswith(b": ping\r\n\r\n")
    last = body.rstrip(b"\r\n").rsplit(b"\r\n\r\n", 1)[-1]
    assert last.startswith(b"event: message\r\ndata: ")
    document = json.loads(last.split(b"data: ", 1)[1])
    assert document["id"] == 7 and document["result"]["content"][0]["text"] == "slept"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("sleep", {"seconds": 30}), ("agent_query", {"query": "sleep 30"})],
    ids=["exposed-tool", "agent-query"],
)
async def test_a_client_that_goes_away_cancels_the_call(
    memory_gateway: Running, name: str, arguments: dict[str, Any]
) -> None:
    """The inner call is cancelled; an ``agent_query`` run ends ``cancelled``."""
    message = call(name, arguments)
    fast = memory_gateway.app.fast_calls
    assert fast is not None
    async with anyio.create_task_group() as tg:
        tg.start_soon(post, memory_gateway, json.dumps(message).encode(), headers_for(message))
        with anyio.fail_after(10):
            await memory_gateway.tools.sleeping.wait()
        tg.cancel_scope.cancel()  # the client closes its connection
    await eventually(lambda: bool(memory_gateway.tools.cancelled))
    assert memory_gateway.tools.cancelled == [30] and fast.claimed == 1
    if name == "agent_query":
        metrics = memory_gateway.app.service.metrics
        await eventually(lambda: metrics.queries["cancelled"] == 1 and metrics.in_flight == 0)


async def test_agent_query_is_claimed_without_exposed_tools_and_answers_as_the_sdk_path() -> None:
    """A gateway that exposes no tool claims ``agent_query`` too: the run, the answer, the session
    id to continue with, and the conversation continued on the next call."""
    async with (
        running_gateway(make_config(fast_calls=True)) as on,
        running_gateway(make_config(fast_calls=False)) as off,
    ):
        assert on.app.fast_calls is not None and off.app.fast_calls is None
        answers = []
        for gateway in (on, off):
            async with connect(gateway.url, "http", "modern") as client:
                first = await client.call_tool("agent_query", {"query": "echo hello"})
                session = first.structured_content["session_id"]
                again = await client.call_tool("agent_query", {"query": "history", "session_id": session})
            answers.append((first, again))
        assert on.app.fast_calls.claimed == 2
        for first, again in answers:
            assert not first.is_error and first.content[0].text.startswith("echo said: hello")
            assert again.content[0].text.startswith("seen: echo hello | history")
        (first_on, again_on), (first_off, again_off) = answers
        assert (
            first_on.content[0].text.split("[session_id")[0]
            == first_off.content[0].text.split("[session_id")[0]
        )
        assert again_on.structured_content.keys() == again_off.structured_content.keys()


# ------------------------------------------------------------------------------ passed


async def test_an_unknown_tool_is_passed_to_the_sdks_minus_32602(gateways: tuple[Running, Running]) -> None:
    (_, _, body), claimed = await both(gateways, call("media__nope"))
    assert claimed == 0 and json.loads(body)["error"]["code"] == -32602


@pytest.mark.parametrize(
    "extra",
    [{"progressToken": "p1"}, {LOG_LEVEL_META_KEY: "debug"}],
    ids=["progress", "log-level"],
)
async def test_progress_and_log_levels_are_passed(
    gateways: tuple[Running, Running], extra: dict[str, Any]
) -> None:
    tool = "fx__test_tool_with_progress" if "progressToken" in extra else "fx__test_tool_with_logging"
    message = call(tool)
    message["params"]["_meta"] = meta(**extra)
    (status, content_type, body), claimed = await both(gateways, message)
    assert claimed == 0 and status == 200
    assert content_type.startswith("text/event-stream")  # the notifications came, on the SDK's stream
    assert b"notifications/" in body


async def test_other_methods_and_odd_bodies_are_passed(gateways: tuple[Running, Running]) -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    cases: list[tuple[Any, bytes | None, dict[str, str]]] = [
        (listing, None, {}),
        ([call("media__picture")], None, {}),  # a batch
        (call("media__picture"), b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ', {}),
        ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}, None, {}),
        (call("media__picture"), None, {"mcp-name": "media__weather"}),  # wrong Mcp-Name: -32020
        (call("media__picture"), None, {"mcp-method": "tools/list"}),
        (call("media__picture"), None, {"accept": "application/json"}),  # no SSE: the SDK's 406
        (call("media__picture"), None, {"content-type": "text/plain"}),  # the SDK's 400
        (call("media__picture", {"x": 1}, request_id=None), None, {}),  # id null: invalid
    ]
    for message, raw, headers in cases:
        answer, claimed = await both(gateways, message, raw=raw, **headers)
        assert claimed == 0, (message, headers, answer)
    mismatch, _ = await both(gateways, call("media__picture"), **{"mcp-name": "media__weather"})
    assert mismatch[0] == 400 and json.loads(mismatch[2])["error"]["code"] == -32020
    listed, _ = await both(gateways, listing)
    assert listed[0] == 200


async def test_mcp_param_headers_are_checked_as_the_sdk_checks_them(
    gateways: tuple[Running, Running],
) -> None:
    """A call whose ``Mcp-Param-*`` headers match its arguments is claimed; one whose header is
    missing or differs is passed, and gets the SDK's own refusal."""
    message = call("fx__test_x_mcp_header", {"region": "eu"})
    good, claimed = await both(gateways, message, **{"mcp-param-region": "eu"})
    assert claimed == 1 and result_of(good)["content"][0]["text"] == "region=eu"
    for headers in ({"mcp-param-region": "us"}, {}):
        (status, _, body), claimed = await both(gateways, message, **headers)
        assert claimed == 0 and status == 400 and json.loads(body)["error"]["code"] == -32020


async def test_a_missing_token_is_still_401_and_an_oversized_body_413() -> None:
    async with pair(auth_token="s3cret", max_request_bytes=2000) as gateways:
        message = call("media__picture")
        (status, _, _), claimed = await both(gateways, message)
        assert (status, claimed) == (401, 0)
        on = gateways[0]
        token = {"authorization": "Bearer s3cret"}
        ok = await post(on, json.dumps(message).encode(), headers_for(message, **token))
        assert ok[0] == 200 and on.app.fast_calls is not None and on.app.fast_calls.claimed == 1
        big = call("media__long", {"size": 1, "pad": "x" * 5000})
        (status, _, _), claimed = await both(gateways, big, **token)
        assert (status, claimed) == (413, 0)


# ------------------------------------------------------------------------------ the SDK's clients


async def test_a_2026_clients_calls_are_claimed_and_a_2025_clients_never(
    gateways: tuple[Running, Running],
) -> None:
    on, _ = gateways
    fast = on.app.fast_calls
    assert fast is not None
    async with connect(on.url, "http", "modern") as client:
        weather = await client.call_tool("media__weather", {})
        picture = await client.call_tool("media__picture", {})
    assert weather.structured_content == {"temp": 21.5} and not picture.is_error
    assert fast.claimed == 2
    async with connect(on.url, "http", "legacy") as session:
        legacy = await session.call_tool("media__weather", {})
    assert legacy.structured_content == {"temp": 21.5} and fast.claimed == 2


# ------------------------------------------------------------------------------ pure parts


@pytest.mark.parametrize("request_id", [7, "a-7", 0])
def test_a_response_is_written_as_the_sdks_dump_writes_it(request_id: Any) -> None:
    """``wire`` skips pydantic's second pass over the result; the bytes stay the SDK's."""
    result = {
        "content": [{"type": "text", "text": 'héllo \u2028 "q"', "_meta": None}],
        "structuredContent": {"n": 1.5, "none": None, "list": [None, {"x": None}]},
        "isError": False,
        "resultType": "complete",
    }
    message = JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
    sdk = json.dumps(message.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))
    assert json.dumps(fast_call.wire(message), separators=(",", ":")) == sdk
    assert fast_call.sse_event(message) == f"event: message\r\ndata: {sdk}\r\n\r\n".encode()
    error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=-32021, message="m", data=None))
    assert fast_call.wire(error) == error.model_dump(mode="json", by_alias=True, exclude_none=True)
