"""exposeTools relays what a server sends during a call to the client that made it
(``gateway/mcp/relay.py``, ``tools/relay.py``): progress, logs, and the server's own requests.

The real Agent and ToolHub over the fixture server ``tests/servers/relay.py`` (stdio, or
Streamable HTTP in its own process), and the SDK's ``Client`` over the gateway's Streamable
HTTP (both eras) and over the gateway's stdio (``mcp-agent serve --stdio``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client

from mcp_agent.assembly import open_agent
from mcp_agent.config import AgentConfig, parse_config
from mcp_agent.gateway.mcp import held_calls
from mcp_agent.gateway.mcp.relay import missing_capability, required
from mcp_agent.tools.hub import open_tool_hub
from tests.servers import over_http

from ..conftest import Running, eventually, running_gateway
from .test_server import transport_for

ROOT = Path(__file__).resolve().parents[3]
SERVERS = ROOT / "tests" / "servers"
RELAY = str(SERVERS / "relay.py")
ERAS = ["legacy", "auto"]  # the 2025 handshake, and 2026-07-28 (what the SDK picks)
# the clients here use logging/setLevel, sampling and roots, which the SDK calls deprecated (2026-07-28)
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
ALICE, BOB = "alice-" + "a" * 20, "bob-" + "b" * 20


def relay_data(server: dict[str, Any] | None = None, **gateway: Any) -> dict[str, Any]:
    """The gateway's config over the relay server, which speaks the handshake era here
    (``protocol: legacy``): what these tests relay — a server's requests on its back channel,
    ``logging/setLevel``, ``resources/subscribe`` — exists only in that era; a 2026-07-28 server
    asks with ``input_required`` results instead."""
    server = server or {"command": sys.executable, "args": [RELAY]}
    return {
        "llm": {"endpoint": "http://127.0.0.1:9/v1", "model": "rule-model"},
        "limits": {"toolTimeoutSeconds": 30},
        "mcpServers": {"relay": {"protocol": "legacy", **server}},
        "gateway": {"description": "Relay.", "exposeTools": True, **gateway},
    }


def relay_config(server: dict[str, Any] | None = None) -> AgentConfig:
    return parse_config(relay_data(server), environ={})


@pytest.fixture
def http_upstream() -> Iterator[str]:
    """``relay.py`` over Streamable HTTP in its own process; its URL."""
    with over_http("relay.py") as url:
        yield url


@pytest.fixture
async def gateway() -> AsyncIterator[Running]:
    async with running_gateway(relay_config(), factory=open_agent) as running:
        yield running


@asynccontextmanager
async def client(
    running: Running, era: str, *, token: str | None = None, **callbacks: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with Client(transport_for(running.url, "http", headers), mode=era, **callbacks) as connected:  # type: ignore[arg-type]
        yield connected


class Seen:
    """What a client was sent: progress and logs."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[tuple[str, Any]] = []

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.data))


def text_of(result: types.CallToolResult) -> str:
    part = result.content[0]
    assert isinstance(part, types.TextContent)
    return part.text


# ------------------------------------------------------------------------------ progress


@pytest.mark.parametrize("era", ERAS)
async def test_progress_reaches_the_client_under_its_own_token(gateway: Running, era: str) -> None:
    seen = Seen()
    async with client(gateway, era) as connected:
        result = await connected.call_tool("relay__count", {"steps": 3}, progress_callback=seen.on_progress)
        quiet = await connected.call_tool("relay__count", {"steps": 2})  # no token: nothing sent
    assert text_of(result) == "counted to 3" and text_of(quiet) == "counted to 2"
    assert seen.progress == [(1, 3, "step 1/3"), (2, 3, "step 2/3"), (3, 3, "step 3/3")]


async def test_progress_from_a_server_over_http(http_upstream: str) -> None:
    config = relay_config({"url": http_upstream})
    seen = Seen()
    async with running_gateway(config, factory=open_agent) as running, client(running, "legacy") as connected:
        result = await connected.call_tool("relay__count", {"steps": 2}, progress_callback=seen.on_progress)
    assert text_of(result) == "counted to 2"
    assert seen.progress == [(1, 2, "step 1/2"), (2, 2, "step 2/2")]


# ------------------------------------------------------------------------------ logs


async def test_logs_reach_the_client_filtered_by_the_level_it_set(gateway: Running) -> None:
    everything, errors = Seen(), Seen()
    async with client(gateway, "legacy", logging_callback=everything.on_log) as connected:
        assert text_of(await connected.call_tool("relay__chatter", {})) == "chattered"
        await eventually(lambda: len(everything.logs) == 4)  # no level set: all of them
    assert [level for level, _ in everything.logs] == ["debug", "info", "warning", "error"]
    assert everything.logs[1] == ("info", "info line")
    async with client(gateway, "legacy", logging_callback=errors.on_log) as connected:
        await connected.set_logging_level("error")
        assert text_of(await connected.call_tool("relay__level", {})) == "error"  # passed on to the server
        await connected.call_tool("relay__chatter", {})
        await connected.call_tool("relay__count", {"steps": 1})  # a later call: the error log came first
    assert errors.logs == [("error", "error line")]


async def test_the_server_is_asked_for_the_most_verbose_level_any_client_wants(gateway: Running) -> None:
    async with client(gateway, "legacy") as quiet, client(gateway, "legacy") as verbose:
        await quiet.set_logging_level("error")
        await verbose.set_logging_level("info")
        assert text_of(await quiet.call_tool("relay__level", {})) == "info"


async def test_a_restarted_server_is_asked_for_the_level_again(gateway: Running) -> None:
    hub = gateway.app.service.hub
    assert hub is not None
    async with client(gateway, "legacy") as connected:
        await connected.set_logging_level("warning")
        restarts = hub.connection("relay").restarts  # type: ignore[union-attr]
        await connected.call_tool("relay__crash", {})
        await eventually(lambda: hub.connection("relay").restarts > restarts)  # type: ignore[union-attr]
        await up(gateway)
        assert text_of(await connected.call_tool("relay__level", {})) == "warning"


async def test_a_2026_client_gets_the_logs_its_request_asks_for() -> None:
    seen, silent = Seen(), Seen()
    async with running_gateway(relay_config(), factory=open_agent) as running:
        async with client(running, "auto", logging_callback=seen.on_log, log_level="warning") as connected:
            await connected.call_tool("relay__chatter", {})
        async with client(running, "auto", logging_callback=silent.on_log) as connected:
            await connected.call_tool("relay__chatter", {})
    assert seen.logs == [("warning", "warning line"), ("error", "error line")]
    assert silent.logs == []  # 2026-07-28: no logs without asking


async def test_a_log_is_not_relayed_while_another_callers_call_is_in_flight() -> None:
    callers = {"alice": {"token": ALICE, "scopes": ["query"]}, "bob": {"token": BOB, "scopes": ["query"]}}
    config = parse_config(relay_data(callers=callers), environ={})
    alice, bob = Seen(), Seen()
    async with running_gateway(config, factory=open_agent) as running:
        async with (
            client(running, "legacy", token=ALICE, logging_callback=alice.on_log) as first,
            client(running, "legacy", token=BOB, logging_callback=bob.on_log) as second,
            anyio.create_task_group() as tg,
        ):
            held: list[str] = []

            async def hold() -> None:
                held.append(text_of(await first.call_tool("relay__hold", {})))

            tg.start_soon(hold)
            await eventually(lambda: len(running.app.service.hub.connection("relay").relay) == 1)  # type: ignore[union-attr]
            assert text_of(await second.call_tool("relay__chatter", {})) == "chattered"
            await second.call_tool("relay__release", {})
        assert held == ["released"]
        assert alice.logs == [] and bob.logs == []  # whose they were cannot be told: nobody reads them
        async with client(running, "legacy", token=BOB, logging_callback=bob.on_log) as alone:
            await alone.call_tool("relay__chatter", {})
            await eventually(lambda: len(bob.logs) == 4)


# ------------------------------------------------------------------------------ the gateway over stdio


async def test_progress_logs_and_questions_over_the_gateways_stdio(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(relay_data()), encoding="utf-8")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_agent", "serve", "--stdio", "--config", str(path)],
        cwd=str(ROOT),
        env={"MCP_AGENT_STATE_DIR": str(tmp_path / "state")},
    )
    seen = Seen()
    with open(tmp_path / "stderr.txt", "w") as errlog, anyio.fail_after(60):
        async with Client(
            stdio_client(params, errlog=errlog), mode="legacy", logging_callback=seen.on_log, **ANSWERING
        ) as connected:  # type: ignore[arg-type]

            async def listed() -> bool:
                return "relay__count" in [tool.name for tool in (await connected.list_tools()).tools]

            await eventually(listed, timeout=30)  # the server starts in the background
            await connected.set_logging_level("warning")
            result = await connected.call_tool(
                "relay__count", {"steps": 2}, progress_callback=seen.on_progress
            )
            await connected.call_tool("relay__chatter", {})
            await connected.call_tool("relay__count", {"steps": 1})
            sample = await connected.call_tool("relay__sample", {})
            form = await connected.call_tool("relay__ask", {})
    assert text_of(sample) == "sampled: you said hi"
    assert text_of(form) == "elicited: accept {'name': 'Ada'}"
    assert text_of(result) == "counted to 2"
    assert seen.progress[:2] == [(1, 2, "step 1/2"), (2, 2, "step 2/2")]
    assert seen.logs == [("warning", "warning line"), ("error", "error line")]


# ------------------------------------------------------------------------------ the server's requests


async def sampled(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    [message] = params.messages
    said = message.content.text if isinstance(message.content, types.TextContent) else "?"
    reply = types.TextContent(type="text", text=f"you said {said}")
    return types.CreateMessageResult(role="assistant", content=reply, model="client-model")


async def elicited(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def rooted(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project", name="project")])


ANSWERING = {"sampling_callback": sampled, "elicitation_callback": elicited, "list_roots_callback": rooted}


async def test_the_servers_requests_reach_the_client_that_made_the_call(gateway: Running) -> None:
    async with client(gateway, "legacy", **ANSWERING) as connected:
        sample = await connected.call_tool("relay__sample", {})
        form = await connected.call_tool("relay__ask", {})
        url = await connected.call_tool("relay__ask_url", {})
        roots = await connected.call_tool("relay__roots", {})
    assert text_of(sample) == "sampled: you said hi"
    assert text_of(form) == "elicited: accept {'name': 'Ada'}"
    assert text_of(url) == "elicited: accept"
    assert text_of(roots) == "roots: file:///tmp/project"


async def test_the_servers_requests_over_an_http_upstream(http_upstream: str) -> None:
    config = relay_config({"url": http_upstream})
    async with (
        running_gateway(config, factory=open_agent) as running,
        client(running, "legacy", **ANSWERING) as c,
    ):
        sample = await c.call_tool("relay__sample", {})
        form = await c.call_tool("relay__ask", {})
    assert text_of(sample) == "sampled: you said hi"
    assert text_of(form) == "elicited: accept {'name': 'Ada'}"


@pytest.mark.parametrize("tool", ["relay__sample", "relay__ask", "relay__ask_url", "relay__roots"])
async def test_a_client_without_the_capability_gets_the_server_the_missing_capability_error(
    gateway: Running, tool: str
) -> None:
    async with client(gateway, "legacy") as connected:
        result = await connected.call_tool(tool, {})
    assert result.is_error
    assert text_of(result).startswith("error -32021: the client did not declare the ")


def test_which_capability_a_request_needs() -> None:
    url = types.ElicitRequest(
        params=types.ElicitRequestURLParams(message="m", url="https://example.test", elicitation_id="e")
    )
    form = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message="m", requested_schema={"type": "object", "properties": {}}
        )
    )
    forms_only = types.ClientCapabilities(
        elicitation=types.ElicitationCapability(form=types.FormElicitationCapability())
    )
    urls_only = types.ClientCapabilities(
        elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability())
    )
    legacy = types.ClientCapabilities(elicitation=types.ElicitationCapability())  # 2025-06-18's {}: forms
    assert missing_capability(url, forms_only) == "elicitation.url"
    assert missing_capability(form, urls_only) == "elicitation.form"
    assert missing_capability(form, legacy) is None and missing_capability(url, legacy) == "elicitation.url"
    sample = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[], max_tokens=1, tools=[types.Tool(name="t", input_schema={"type": "object"})]
        )
    )
    plain = types.ClientCapabilities(sampling=types.SamplingCapability())
    assert missing_capability(sample, plain) == "sampling.tools"
    assert missing_capability(types.ListRootsRequest(), None) == "roots"
    assert required("elicitation.url") == {"elicitation": {"url": {}}}


async def test_a_request_while_two_calls_are_in_flight_is_refused_not_guessed(gateway: Running) -> None:
    async with (
        client(gateway, "legacy", **ANSWERING) as first,
        client(gateway, "legacy", **ANSWERING) as second,
        anyio.create_task_group() as tg,
    ):
        held: list[str] = []

        async def hold() -> None:
            held.append(text_of(await first.call_tool("relay__hold", {})))

        tg.start_soon(hold)
        await eventually(lambda: len(gateway.app.service.hub.connection("relay").relay) == 1)  # type: ignore[union-attr]
        sample = await second.call_tool("relay__sample", {})
        await second.call_tool("relay__release", {})
    assert held == ["released"]
    assert sample.is_error
    assert "cannot relay sampling/createMessage: 2 calls are in flight" in text_of(sample)


async def test_a_2026_client_answers_its_servers_questions_in_input_required_rounds(gateway: Running) -> None:
    async with client(gateway, "auto", **ANSWERING) as connected:  # the SDK answers each round itself
        sample = await connected.call_tool("relay__sample", {})
        form = await connected.call_tool("relay__ask", {})
        roots = await connected.call_tool("relay__roots", {})
        plain = await connected.call_tool("relay__count", {"steps": 1})  # no question: one round
    assert text_of(sample) == "sampled: you said hi"
    assert text_of(form) == "elicited: accept {'name': 'Ada'}"
    assert text_of(roots) == "roots: file:///tmp/project"
    assert text_of(plain) == "counted to 1"
    assert len(gateway.app.tool.held) == 0  # nothing left held


async def test_an_input_required_round_carries_the_servers_question_and_a_state(gateway: Running) -> None:
    """Rounds by hand: the question as the server asked it; the retry's answer goes back to it."""
    async with client(gateway, "auto", **ANSWERING) as connected:
        session = connected.session
        first = await session.call_tool("relay__ask", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        [(key, question)] = (first.input_requests or {}).items()
        assert isinstance(question, types.ElicitRequest) and question.params.message == "Your name?"
        answer = types.ElicitResult(action="accept", content={"name": "Bo"})
        done = await session.call_tool(
            "relay__ask",
            {},
            input_responses={key: answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(done, types.CallToolResult) and text_of(done) == "elicited: accept {'name': 'Bo'}"
        again = await session.call_tool("relay__ask", {}, allow_input_required=True)
        assert isinstance(again, types.InputRequiredResult)
        [key] = again.input_requests or {}
        wrong = types.ListRootsResult(roots=[])  # not an answer to an elicitation
        refused = await session.call_tool(
            "relay__ask",
            {},
            input_responses={key: wrong},
            request_state=again.request_state,
            allow_input_required=True,
        )
    assert isinstance(refused, types.CallToolResult) and refused.is_error
    assert text_of(refused).startswith(
        "error -32602: the client answered elicitation/create with something else"
    )


async def test_a_client_that_does_not_come_back_has_its_call_cancelled(gateway: Running) -> None:
    gateway.app.tool.held.retry_window = 0.2
    async with client(gateway, "auto", **ANSWERING) as connected:
        first = await connected.session.call_tool("relay__ask", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        relay = gateway.app.service.hub.connection("relay").relay  # type: ignore[union-attr]
        assert len(relay) == 1 and len(gateway.app.tool.held) == 1
        await eventually(
            lambda: len(gateway.app.tool.held) == 0 and len(relay) == 0
        )  # cancelled on the server
        with pytest.raises(MCPError) as late:
            await connected.session.call_tool(
                "relay__ask",
                {},
                input_responses={},
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert (
        late.value.code == types.INVALID_PARAMS and "unknown or expired request_state" in late.value.message
    )


async def test_a_2025_client_without_a_back_channel_gets_the_server_a_clear_error() -> None:
    async with (
        running_gateway(relay_config(), factory=open_agent, stateless=True) as running,
        client(running, "legacy", **ANSWERING) as connected,
    ):
        sample = await connected.call_tool("relay__sample", {})
    # never an input_required result, which a 2025 client would not read; a stateless request
    # carries no capabilities (they were declared in an initialize long gone), so it lacks them
    assert sample.is_error and text_of(sample).startswith("error -32021: the client did not declare")


async def test_a_retry_with_an_unknown_state_is_refused(gateway: Running) -> None:
    """A protocol error (-32602), as a server refuses a tampered ``requestState``."""
    async with client(gateway, "auto", **ANSWERING) as connected:
        with pytest.raises(MCPError) as refused:
            await connected.call_tool(
                "relay__sample", {}, request_state="mcp-agent.held.nope", input_responses={}
            )
    assert refused.value.code == types.INVALID_PARAMS
    assert "unknown or expired request_state" in refused.value.message


@pytest.mark.parametrize("era", ERAS)
async def test_what_a_prompt_or_a_read_asks_reaches_the_client(gateway: Running, era: str) -> None:
    """``prompts/get`` and ``resources/read`` make a server work as ``tools/call`` does: what it
    asks over its back channel reaches a 2025 client on its own back channel, and a 2026 client in
    ``input_required`` rounds (the SDK's client answers them itself)."""
    async with client(gateway, era, **ANSWERING) as connected:
        prompt = await connected.get_prompt("relay__introduce")
        read = await connected.read_resource("relay://asked")
    [message] = prompt.messages
    assert isinstance(message.content, types.TextContent) and message.content.text == "Hello Ada"
    [contents] = read.contents
    assert isinstance(contents, types.TextResourceContents) and contents.text == "text for Ada"
    assert len(gateway.app.tool.held) == 0  # nothing left held


async def test_a_held_prompts_state_is_good_for_its_retry_only(gateway: Running) -> None:
    """Rounds by hand: a held ``prompts/get``'s ``requestState`` carried by a ``tools/call`` or a
    ``resources/read`` is refused (-32602), as any state the gateway did not give for that request;
    the prompt's own retry gets the prompt."""
    async with client(gateway, "auto", **ANSWERING) as connected:
        session = connected.session
        first = await session.get_prompt("relay__introduce", allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        [(key, question)] = (first.input_requests or {}).items()
        assert isinstance(question, types.ElicitRequest) and question.params.message == "Your name?"
        answers: types.InputResponses = {key: types.ElicitResult(action="accept", content={"name": "Bo"})}
        state = first.request_state
        with pytest.raises(MCPError) as as_a_call:
            await session.call_tool(
                "relay__ask", {}, input_responses=answers, request_state=state, allow_input_required=True
            )
        with pytest.raises(MCPError) as as_a_read:
            await session.read_resource(
                "relay://asked", input_responses=answers, request_state=state, allow_input_required=True
            )
        done = await session.get_prompt(
            "relay__introduce", input_responses=answers, request_state=state, allow_input_required=True
        )
    for refused in (as_a_call.value, as_a_read.value):
        assert refused.code == types.INVALID_PARAMS and "unknown or expired request_state" in refused.message
    assert isinstance(done, types.GetPromptResult)
    [message] = done.messages
    assert isinstance(message.content, types.TextContent) and message.content.text == "Hello Bo"


async def test_a_collected_answer_leaves_no_task_behind(gateway: Running) -> None:
    """A 2026 client's calls and reads run held (its client declared capabilities); once a round
    has carried the answer, nothing of the held call stays (only an answer nobody collected waits
    ``retry_window`` to be forgotten)."""
    async with client(gateway, "auto", **ANSWERING) as connected:
        await connected.call_tool("relay__count", {"steps": 1})  # connections and their tasks opened
        await eventually(lambda: len(gateway.app.tool.held) == 0)
        before = len(asyncio.all_tasks())
        for _ in range(5):
            await connected.call_tool("relay__count", {"steps": 1})
            await connected.read_resource("relay://doc")
        await eventually(lambda: len(asyncio.all_tasks()) <= before)


async def test_a_read_that_cannot_be_held_is_a_json_rpc_error(
    gateway: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt or a resource has no error result: what a held call answers when it fails is an
    error for the request (a tool's is an error result)."""
    monkeypatch.setattr(held_calls, "HELD_MAX", 0)
    async with client(gateway, "auto", **ANSWERING) as connected:
        with pytest.raises(MCPError) as refused:
            await connected.read_resource("relay://asked")
        call = await connected.call_tool("relay__ask", {})
    assert refused.value.code == types.INTERNAL_ERROR
    assert refused.value.message == "too many calls wait for their callers' answers (0)"
    assert call.is_error and text_of(call) == "too many calls wait for their callers' answers (0)"


async def test_a_2026_client_without_the_capability_gets_the_server_the_error(gateway: Running) -> None:
    async with client(gateway, "auto") as connected:
        result = await connected.call_tool("relay__sample", {})
    assert result.is_error and text_of(result).startswith(
        "error -32021: the client did not declare the sampling"
    )


# ------------------------------------------------------------------------------ completions, subscriptions


async def up(running: Running) -> None:
    """The tool server is up (the gateway declares what it offers from then on)."""
    hub = running.app.service.hub
    assert hub is not None
    await eventually(lambda: hub.connection("relay").state == "up")  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ERAS)
async def test_completions_go_to_the_server_of_the_prompt_or_template(gateway: Running, era: str) -> None:
    await up(gateway)
    async with client(gateway, era) as connected:
        assert connected.server_capabilities.completions is not None
        names = await connected.complete(
            types.PromptReference(name="relay__greet"), {"name": "name", "value": "al"}
        )
        items = await connected.complete(
            types.ResourceTemplateReference(uri="relay://items/{id}"), {"name": "id", "value": ""}
        )
        with pytest.raises(MCPError) as unknown:
            await connected.complete(types.PromptReference(name="relay__nope"), {"name": "name", "value": ""})
    assert names.completion.values == ["alice", "alina"]
    assert items.completion.values == ["1", "2", "3"]
    assert (
        unknown.value.code == types.INVALID_PARAMS and "unknown prompt relay__nope" in unknown.value.message
    )


async def test_a_server_without_completions_or_subscriptions_is_not_asked() -> None:
    config = relay_config({"command": sys.executable, "args": [RELAY], "env": {"RELAY_PLAIN": "1"}})
    async with running_gateway(config, factory=open_agent) as running:
        await up(running)
        async with client(running, "legacy") as connected:
            capabilities = connected.server_capabilities
            assert capabilities.completions is None
            assert capabilities.resources is not None and not capabilities.resources.subscribe
            with pytest.raises(MCPError) as completing:
                await connected.complete(
                    types.PromptReference(name="relay__greet"), {"name": "name", "value": ""}
                )
            with pytest.raises(MCPError) as subscribing:
                await connected.subscribe_resource("relay://doc")
    assert completing.value.code == types.METHOD_NOT_FOUND
    assert "server relay offers no completions" in completing.value.message
    assert subscribing.value.code == types.METHOD_NOT_FOUND
    assert "server relay does not offer resource subscriptions" in subscribing.value.message


async def test_resource_updates_reach_the_clients_that_subscribed(gateway: Running) -> None:
    await up(gateway)
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async with (
        client(gateway, "legacy", message_handler=on_message) as subscriber,
        client(gateway, "legacy") as other,
    ):
        assert subscriber.server_capabilities.resources is not None
        assert subscriber.server_capabilities.resources.subscribe
        await subscriber.subscribe_resource("relay://doc")
        await other.subscribe_resource("relay://doc")  # one subscription upstream for both
        assert text_of(await other.call_tool("relay__touch", {"uri": "relay://doc"})) == "touched relay://doc"
        await eventually(lambda: updates == ["relay://doc"])
        await other.unsubscribe_resource("relay://doc")  # the subscriber still is: still subscribed upstream
        assert text_of(await other.call_tool("relay__touch", {"uri": "relay://doc"})) == "touched relay://doc"
        await eventually(lambda: updates == ["relay://doc"] * 2)
        await subscriber.unsubscribe_resource("relay://doc")  # the last one: unsubscribed upstream
        assert (
            text_of(await other.call_tool("relay__touch", {"uri": "relay://doc"}))
            == "not subscribed: relay://doc"
        )


@pytest.fixture
async def modern_gateway() -> AsyncIterator[Running]:
    """The gateway over the relay server speaking 2026-07-28, which has no ``resources/subscribe``:
    the gateway subscribes on a ``subscriptions/listen`` stream (``era.follow_resource_updates``)."""
    server = {"command": sys.executable, "args": [RELAY], "protocol": "2026-07-28"}
    async with running_gateway(parse_config(relay_data(server), environ={}), factory=open_agent) as running:
        yield running


async def listening(connected: Client) -> list[list[str]]:
    """The URIs of each listen stream open on the relay server now."""
    return json.loads(text_of(await connected.call_tool("relay__listening", {})))  # type: ignore[no-any-return]


async def test_resource_updates_from_a_2026_server_reach_the_clients_that_subscribed(
    modern_gateway: Running,
) -> None:
    await up(modern_gateway)
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async with (
        client(modern_gateway, "legacy", message_handler=on_message) as subscriber,
        client(modern_gateway, "legacy") as other,
    ):
        assert await listening(other) == []  # nothing subscribed: no stream
        await subscriber.subscribe_resource("relay://doc")
        await other.subscribe_resource("relay://doc")  # one stream upstream for both
        assert await listening(other) == [["relay://doc"]]
        assert text_of(await other.call_tool("relay__touch", {"uri": "relay://doc"})) == "touched relay://doc"
        await eventually(lambda: updates == ["relay://doc"])
        await subscriber.subscribe_resource("relay://items/7")  # the stream is opened again with both
        assert await listening(other) == [["relay://doc", "relay://items/7"]]
        await other.unsubscribe_resource("relay://doc")  # the subscriber still is: still on the stream
        assert text_of(await other.call_tool("relay__touch", {"uri": "relay://doc"})) == "touched relay://doc"
        await eventually(lambda: updates == ["relay://doc"] * 2)
        await subscriber.unsubscribe_resource("relay://doc")  # the last one: off the stream

        async def without_doc() -> bool:
            return await listening(other) == [["relay://items/7"]]

        await eventually(without_doc)
        assert (
            text_of(await other.call_tool("relay__touch", {"uri": "relay://doc"}))
            == "not subscribed: relay://doc"
        )
        await subscriber.unsubscribe_resource("relay://items/7")

        async def no_stream() -> bool:
            return await listening(other) == []

        await eventually(no_stream)


async def test_a_restarted_2026_server_is_subscribed_again(modern_gateway: Running) -> None:
    hub = modern_gateway.app.service.hub
    assert hub is not None
    await up(modern_gateway)
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async with client(modern_gateway, "legacy", message_handler=on_message) as subscriber:
        await subscriber.subscribe_resource("relay://doc")
        restarts = hub.connection("relay").restarts  # type: ignore[union-attr]
        await subscriber.call_tool("relay__crash", {})
        await eventually(lambda: hub.connection("relay").restarts > restarts)  # type: ignore[union-attr]
        await up(modern_gateway)

        async def subscribed_again() -> bool:
            return await listening(subscriber) == [["relay://doc"]]

        await eventually(subscribed_again)
        touched = await subscriber.call_tool("relay__touch", {"uri": "relay://doc"})
        assert text_of(touched) == "touched relay://doc"
        await eventually(lambda: updates == ["relay://doc"])


async def test_a_2026_server_that_refuses_to_listen_fails_the_subscribe() -> None:
    server = {
        "command": sys.executable,
        "args": [RELAY],
        "protocol": "2026-07-28",
        "env": {"RELAY_DEAF": "1"},
    }
    async with running_gateway(parse_config(relay_data(server), environ={}), factory=open_agent) as running:
        await up(running)
        async with client(running, "legacy") as connected:
            with pytest.raises(MCPError) as subscribing:
                await connected.subscribe_resource("relay://doc")
    assert subscribing.value.code == types.INTERNAL_ERROR
    assert "server relay: subscriptions/listen refused" in subscribing.value.message


async def test_a_client_that_leaves_ends_its_subscription(gateway: Running) -> None:
    await up(gateway)
    async with client(gateway, "legacy") as leaving:
        await leaving.subscribe_resource("relay://items/7")  # a URI its template matches
    async with client(gateway, "legacy") as other:

        async def unsubscribed() -> bool:
            result = await other.call_tool("relay__touch", {"uri": "relay://items/7"})
            return text_of(result) == "not subscribed: relay://items/7"

        await eventually(unsubscribed)


async def test_subscribing_to_an_unknown_uri_is_an_error(gateway: Running) -> None:
    await up(gateway)
    async with client(gateway, "legacy") as connected:
        with pytest.raises(MCPError) as caught:
            await connected.subscribe_resource("nowhere://at/all")
    assert caught.value.code == -32002 and "Resource not found: nowhere://at/all" in caught.value.message


async def test_a_2026_listener_gets_the_updates_of_the_resources_it_listens_for(gateway: Running) -> None:
    await up(gateway)
    async with client(gateway, "auto") as connected:
        async with connected.listen(resource_subscriptions=["relay://doc", "nowhere://x"]) as subscription:
            touched = await connected.call_tool("relay__touch", {"uri": "relay://doc"})
            assert text_of(touched) == "touched relay://doc"  # the gateway subscribed for the listener
            with anyio.fail_after(10):
                async for event in subscription:
                    assert getattr(event, "uri", None) == "relay://doc"
                    break

        async def unsubscribed() -> bool:  # the stream closed: the gateway unsubscribed
            result = await connected.call_tool("relay__touch", {"uri": "relay://doc"})
            return text_of(result) == "not subscribed: relay://doc"

        await eventually(unsubscribed)


@pytest.mark.parametrize("relay_calls", [False, True])
async def test_servers_are_told_their_client_answers_only_when_the_tools_are_exposed(
    relay_calls: bool,
) -> None:
    servers = relay_config().servers()
    async with open_tool_hub(servers, start="wait", relay_calls=relay_calls) as hub:
        result = await hub.call_tool("relay__sample", {})  # a call the model makes: no client to ask
    assert result.is_error
    if relay_calls:
        assert (
            "cannot relay sampling/createMessage: no call of a client that can answer is in flight"
            in result.text
        )
    else:  # no sampling capability declared: the SDK's own refusal
        assert "Sampling not supported" in result.text
